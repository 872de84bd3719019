/* SPDX-License-Identifier: Apache-2.0 */
/* Parses and validates GSLICE_SIM_* (one table: name, default, validator); never
 * falls back to a default silently when a value is bad. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "size.h"

enum kind { K_COUNT, K_SIZE, K_PATH, K_KERNELS, K_OFFSET, K_MIG, K_DEVICE_SMS };

struct var {
  const char *name;
  enum kind kind;
  const char *def; /* NULL: computed (state path) or empty */
  uint64_t min, max;
  unsigned explicit_bit;
};

static const struct var vars[] = {
    {"GSLICE_SIM_DEVICES", K_COUNT, "1", 1, SIM_MAX_DEVICES, SIM_EXPLICIT_DEVICES},
    {"GSLICE_SIM_MEMORY", K_SIZE, "16GiB", 1ull << 20, 1ull << 50, SIM_EXPLICIT_MEMORY},
    {"GSLICE_SIM_CONTEXT_MEMORY", K_SIZE, "256MiB", 0, 1ull << 40, SIM_EXPLICIT_CONTEXT_MEMORY},
    {"GSLICE_SIM_SMS", K_COUNT, "132", 1, 1024, SIM_EXPLICIT_SMS},
    {"GSLICE_SIM_STATE", K_PATH, NULL, 0, 0, 0},
    {"GSLICE_SIM_KERNEL_US", K_KERNELS, "", 0, 0, 0},
    {"GSLICE_SIM_RESERVED_MEMORY", K_SIZE, "0", 0, 1ull << 50, SIM_EXPLICIT_RESERVED},
    {"GSLICE_SIM_NVML_HIDE_PIDS", K_COUNT, "0", 0, 1, 0},
    /* -pid_max .. pid_max (4194304, the kernel's limit) */
    {"GSLICE_SIM_NVML_PID_OFFSET", K_OFFSET, "0", 0, 4194304, 0},
    /* microseconds a context keeps the engine while others wait; 0 turns slicing off */
    {"GSLICE_SIM_TIMESLICE", K_COUNT, "2000", 0, 1000000, SIM_EXPLICIT_TIMESLICE},
    /* 1: nvmlDeviceGetProcessUtilization is NOT_SUPPORTED, as on Blackwell (HAMi-core#218) */
    {"GSLICE_SIM_NVML_NO_PROCESS_UTILIZATION", K_COUNT, "0", 0, 1, 0},
    /* DEV:N[,DEV:N...] (N MIG devices, 0..7) or DEV:pending: those devices' MIG mode */
    {"GSLICE_SIM_NVML_MIG", K_MIG, "", 0, 0, 0},
    /* sessions and accounted processes another tenant starts between two list calls */
    {"GSLICE_SIM_NVML_CHURN", K_COUNT, "0", 0, 1000, 0},
    /* the device memory's bandwidth for memsets and device-to-device copies, GB/s (bytes per
     * ns); 0: they take no device time */
    {"GSLICE_SIM_MEMORY_BANDWIDTH", K_COUNT, "3000", 0, 100000, 0},
    /* DEV:N[,DEV:N...]: device DEV has N SMs (1..1024), not GSLICE_SIM_SMS: a mixed node, which
     * CUDA's default order (FASTEST_FIRST) enumerates otherwise than NVML */
    {"GSLICE_SIM_DEVICE_SMS", K_DEVICE_SMS, "", 1, 1024, 0},
};

static int parse_u64(const char *s, uint64_t *ret) {
  char *end;
  if (!*s || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end)
    return -EINVAL;
  *ret = v;
  return 0;
}

static int parse_kernels(const char *s, struct sim_config *cfg) {
  /* name=us[,name=us...] */
  cfg->nkernel_times = 0;
  while (*s) {
    const char *eq = strchr(s, '=');
    const char *comma = strchr(s, ',');
    if (!comma)
      comma = s + strlen(s);
    if (!eq || eq > comma || eq == s || (size_t)(eq - s) >= SIM_KERNEL_NAME_MAX)
      return -EINVAL;
    if (cfg->nkernel_times >= SIM_MAX_KERNEL_TIMES)
      return -EINVAL;
    char num[32];
    size_t nlen = (size_t)(comma - eq - 1);
    if (nlen == 0 || nlen >= sizeof(num))
      return -EINVAL;
    memcpy(num, eq + 1, nlen);
    num[nlen] = 0;
    struct sim_kernel_time *kt = &cfg->kernel_times[cfg->nkernel_times];
    if (parse_u64(num, &kt->us) < 0)
      return -EINVAL;
    memcpy(kt->name, s, (size_t)(eq - s));
    kt->name[eq - s] = 0;
    cfg->nkernel_times++;
    s = *comma ? comma + 1 : comma;
  }
  return 0;
}

/* DEV:N or DEV:pending[,...]: each device named once, below SIM_MAX_DEVICES. */
static int parse_mig(const char *s, struct sim_config *cfg) {
  while (*s) {
    char item[32], *colon, *end;
    size_t len = strcspn(s, ",");
    if (len == 0 || len >= sizeof(item) || (s[len] == ',' && !s[len + 1]))
      return -EINVAL;
    memcpy(item, s, len);
    item[len] = 0;
    s += s[len] ? len + 1 : len;
    uint64_t dev, n = 0;
    if (!(colon = strchr(item, ':')))
      return -EINVAL;
    *colon = 0;
    if (parse_u64(item, &dev) < 0 || dev >= SIM_MAX_DEVICES || cfg->nvml_mig_mode[dev])
      return -EINVAL;
    if (strcmp(colon + 1, "pending") == 0) {
      cfg->nvml_mig_mode[dev] = SIM_MIG_PENDING;
      continue;
    }
    n = strtoull(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end || n > SIM_MAX_MIG)
      return -EINVAL;
    cfg->nvml_mig_mode[dev] = SIM_MIG_ON;
    cfg->nvml_mig_devices[dev] = (uint8_t)n;
  }
  return 0;
}

/* DEV:N[,DEV:N...]: each device named once, below SIM_MAX_DEVICES; N within lo..hi. */
static int parse_device_sms(const char *s, uint64_t lo, uint64_t hi, struct sim_config *cfg) {
  while (*s) {
    char item[32], *colon;
    size_t len = strcspn(s, ",");
    if (len == 0 || len >= sizeof(item) || (s[len] == ',' && !s[len + 1]))
      return -EINVAL;
    memcpy(item, s, len);
    item[len] = 0;
    s += s[len] ? len + 1 : len;
    uint64_t dev, n;
    if (!(colon = strchr(item, ':')))
      return -EINVAL;
    *colon = 0;
    if (parse_u64(item, &dev) < 0 || dev >= SIM_MAX_DEVICES || cfg->device_sms[dev] ||
        parse_u64(colon + 1, &n) < 0 || n < lo || n > hi)
      return -EINVAL;
    cfg->device_sms[dev] = (uint32_t)n;
  }
  return 0;
}

/* A numeric variable's value into its field (vars[] order). */
static void store(struct sim_config *cfg, size_t i, uint64_t n) {
  switch (i) {
  case 0: cfg->devices = (uint32_t)n; break;
  case 1: cfg->memory = n; break;
  case 2: cfg->context_memory = n; break;
  case 3: cfg->sms = (uint32_t)n; break;
  case 6: cfg->reserved = n; break;
  case 7: cfg->nvml_hide_pids = (uint32_t)n; break;
  case 9: cfg->timeslice_ns = n * 1000; break;
  case 10: cfg->nvml_no_process_util = (uint32_t)n; break;
  case 12: cfg->nvml_churn = (uint32_t)n; break;
  case 13: cfg->memory_gbps = n; break;
  default: break;
  }
}

/* What a number-valued variable wants, in its error. */
static const char *count_hint(const char *name) {
  if (strcmp(name, "GSLICE_SIM_TIMESLICE") == 0)
    return "a whole number of microseconds";
  if (strcmp(name, "GSLICE_SIM_MEMORY_BANDWIDTH") == 0)
    return "a whole number of GB/s";
  return "a whole number";
}

/* The one line saying which variable is wrong and what it wants: -EINVAL. */
static int bad_value(const struct var *v, const char *val, const char *hint, char *err,
                     size_t errlen) {
  if (v->kind == K_OFFSET)
    snprintf(err, errlen, "gslice-sim: %s='%s' is invalid: want %s between -%llu and %llu", v->name,
             val, hint, (unsigned long long)v->max, (unsigned long long)v->max);
  else if (v->kind == K_COUNT || v->kind == K_SIZE)
    snprintf(err, errlen, "gslice-sim: %s='%s' is invalid: want %s between %llu and %llu", v->name,
             val, hint, (unsigned long long)v->min, (unsigned long long)v->max);
  else
    snprintf(err, errlen, "gslice-sim: %s='%s' is invalid: want %s", v->name, val, hint);
  return -EINVAL;
}

int sim_config_parse(sim_getenv_fn getenv_fn, struct sim_config *ret, char *err, size_t errlen) {
  struct sim_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const struct var *v = &vars[i];
    const char *val = getenv_fn(v->name);
    int set = val != NULL;
    if (!val)
      val = v->def;
    uint64_t n = 0;
    int r = 0;
    const char *hint = "";
    switch (v->kind) {
    case K_COUNT:
      r = parse_u64(val, &n);
      hint = count_hint(v->name);
      break;
    case K_SIZE:
      r = gs_size_parse(val, &n);
      hint = "a size like 16GiB";
      break;
    case K_PATH:
      if (!val) {
        snprintf(cfg.state_path, sizeof(cfg.state_path), "/dev/shm/gslice-sim-%u",
                 (unsigned)getuid());
        continue;
      }
      if (!*val || strlen(val) >= sizeof(cfg.state_path))
        r = -EINVAL;
      hint = "a file path";
      if (r == 0)
        strcpy(cfg.state_path, val);
      break;
    case K_KERNELS:
      r = parse_kernels(val, &cfg);
      hint = "name=microseconds[,name=microseconds...]";
      break;
    case K_OFFSET:
      /* A signed whole number; n holds its magnitude for the range check. */
      r = parse_u64(val[0] == '-' ? val + 1 : val, &n);
      hint = "a whole number, optionally negative,";
      if (r == 0 && n <= v->max)
        cfg.nvml_pid_offset = val[0] == '-' ? -(int64_t)n : (int64_t)n;
      break;
    case K_MIG:
      r = parse_mig(val, &cfg);
      hint = "DEV:N[,DEV:N...] (N MIG devices, 0..7) or DEV:pending, each device once";
      break;
    case K_DEVICE_SMS:
      r = parse_device_sms(val, v->min, v->max, &cfg);
      hint = "DEV:N[,DEV:N...] (device DEV has N SMs, 1..1024), each device once";
      break;
    }
    if (r == 0 && (v->kind == K_COUNT || v->kind == K_SIZE || v->kind == K_OFFSET) &&
        (n < v->min || n > v->max))
      r = -ERANGE;
    if (r < 0)
      return bad_value(v, val, hint, err, errlen);
    if (set)
      cfg.explicit_mask |= v->explicit_bit;
    store(&cfg, i, n);
  }
  if (cfg.reserved >= cfg.memory) {
    snprintf(err, errlen,
             "gslice-sim: GSLICE_SIM_RESERVED_MEMORY (%llu) must be below GSLICE_SIM_MEMORY (%llu)",
             (unsigned long long)cfg.reserved, (unsigned long long)cfg.memory);
    return -EINVAL;
  }
  if (cfg.context_memory >= cfg.memory - cfg.reserved) {
    snprintf(err, errlen,
             "gslice-sim: GSLICE_SIM_CONTEXT_MEMORY (%llu) must be below GSLICE_SIM_MEMORY less "
             "GSLICE_SIM_RESERVED_MEMORY (%llu)",
             (unsigned long long)cfg.context_memory,
             (unsigned long long)(cfg.memory - cfg.reserved));
    return -EINVAL;
  }
  *ret = cfg;
  return 0;
}

uint64_t sim_config_kernel_us(const struct sim_config *cfg, const char *name) {
  for (unsigned i = 0; i < cfg->nkernel_times; i++)
    if (strcmp(cfg->kernel_times[i].name, name) == 0)
      return cfg->kernel_times[i].us;
  return 0;
}

unsigned sim_config_sms(const struct sim_config *cfg, unsigned d, unsigned machine_sms) {
  return d < SIM_MAX_DEVICES && cfg->device_sms[d] ? cfg->device_sms[d] : machine_sms;
}

void sim_device_order(const struct sim_config *cfg, unsigned ndev, unsigned machine_sms,
                      const char *device_order, unsigned out[SIM_MAX_DEVICES]) {
  int fastest = !device_order || strcmp(device_order, "PCI_BUS_ID") != 0;
  if (ndev > SIM_MAX_DEVICES)
    ndev = SIM_MAX_DEVICES;
  /* An insertion sort, stable: devices with as many SMs stay in bus order. */
  for (unsigned i = 0; i < ndev; i++) {
    unsigned j = i, sms = sim_config_sms(cfg, i, machine_sms);
    for (; fastest && j > 0 && sim_config_sms(cfg, out[j - 1], machine_sms) < sms; j--)
      out[j] = out[j - 1];
    out[j] = i;
  }
}

/* One entry of CUDA_VISIBLE_DEVICES: the physical index it names, or -1 if invalid. An index is
 * CUDA's enumeration order's (order[i]: the physical device CUDA numbers i; NULL: bus order). */
static int visible_entry(const char *s, size_t n, unsigned ndev, const char *const *uuid_text,
                         const unsigned *order) {
  while (n && (*s == ' ' || *s == '\t')) {
    s++;
    n--;
  }
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  if (n >= 4 && strncasecmp(s, "GPU-", 4) == 0) {
    int found = -1;
    for (unsigned i = 0; i < ndev; i++)
      if (strlen(uuid_text[i]) >= n && strncasecmp(uuid_text[i], s, n) == 0) {
        if (found >= 0)
          return -1; /* a prefix must name one device */
        found = (int)i;
      }
    return found;
  }
  /* Leading digits, as strtoul reads them; no digits (or a sign) is invalid. */
  uint64_t v = 0;
  size_t i = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    v = v * 10 + (uint64_t)(s[i] - '0');
    if (v >= ndev)
      return -1;
  }
  if (i == 0)
    return -1;
  return order ? (int)order[v] : (int)v;
}

unsigned sim_visible_parse(const char *spec, unsigned ndev, const char *const *uuid_text,
                           unsigned out[SIM_MAX_DEVICES]) {
  return sim_visible_parse_order(spec, ndev, uuid_text, NULL, out);
}

unsigned sim_visible_parse_order(const char *spec, unsigned ndev, const char *const *uuid_text,
                                 const unsigned *order, unsigned out[SIM_MAX_DEVICES]) {
  if (ndev > SIM_MAX_DEVICES)
    ndev = SIM_MAX_DEVICES;
  if (!spec) {
    for (unsigned i = 0; i < ndev; i++)
      out[i] = order ? order[i] : i;
    return ndev;
  }
  unsigned n = 0;
  if (!*spec)
    return 0;
  for (const char *p = spec;; p++) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int d = visible_entry(p, len, ndev, uuid_text, order);
    if (d < 0)
      break;
    for (unsigned i = 0; i < n; i++)
      if (out[i] == (unsigned)d)
        return 0; /* a repeated device: the driver then shows none */
    out[n++] = (unsigned)d;
    if (!end)
      break;
    p = end;
  }
  return n;
}
