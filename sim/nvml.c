/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated libnvidia-ml.so.1: device, memory, utilization and process queries
 * answered from the shared machine, without any CUDA context in this process. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "nvml_min.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "state.h"

#define SIM_API __attribute__((visibility("default")))
#define UTIL_WINDOW_NS 1000000000ull /* NVML's sample period: the last second */
/* nvmlDeviceGetProcessUtilization's buffer: NVML asks for room for its whole sample buffer,
 * whatever the number of processes (72 entries on an H200 with driver 580: the size call says
 * 72, and any smaller count is NVML_ERROR_INSUFFICIENT_SIZE even with one process running). */
#define UTIL_SAMPLES 72u

/* A GPU's handle (mig 0) or a MIG device's (mig k + 1: the parent's k-th MIG device). */
struct nvmlDevice_st {
  unsigned index;
  unsigned mig;
};
/* A GPU instance of a GPU in MIG mode: one per MIG device, of the 1-slice profile. */
struct nvmlGpuInstance_st {
  unsigned dev;
  unsigned id;
};
#define SIM_NVLINKS 6u           /* links per GPU: 0-3 to its pair's GPU, 4-5 to an NVSwitch */
#define SIM_PHANTOM_PID 4194305u /* past pid_max: other tenants' (GSLICE_SIM_NVML_CHURN) */
/* Dead processes whose samples are kept, and for how long after they were found dead: past the
 * longest window a caller reads (the daemon's charge check reads up to 10 of its periods). */
#define SIM_GHOSTS 256u
#define GHOST_KEEP_NS 6000000000ull
#define SIM_SAMPLES (SIM_MAX_PROCS + SIM_GHOSTS) /* the most one read can give */

/* The library's one instance: NVML is a process-global, refcounted API. */
static struct {
  pthread_mutex_t mu;
  unsigned refs;
  struct sim_state st;
  struct nvmlDevice_st devs[SIM_MAX_DEVICES];
  struct nvmlDevice_st migs[SIM_MAX_DEVICES][SIM_MAX_MIG];
  struct nvmlGpuInstance_st gis[SIM_MAX_DEVICES][SIM_MAX_MIG];
  uint8_t mig_mode[SIM_MAX_DEVICES]; /* GSLICE_SIM_NVML_MIG */
  uint8_t mig_devices[SIM_MAX_DEVICES];
  uint32_t churn;           /* GSLICE_SIM_NVML_CHURN */
  uint32_t churn_calls;     /* session and accounting list calls so far */
  uint32_t hide_pids;       /* GSLICE_SIM_NVML_HIDE_PIDS */
  int64_t pid_offset;       /* GSLICE_SIM_NVML_PID_OFFSET */
  uint32_t no_process_util; /* GSLICE_SIM_NVML_NO_PROCESS_UTILIZATION */
  /* Processes this library saw live (by slot and generation) and those since found dead, whose
   * samples a GPU still gives for its window (recent). Guarded by the machine's lock. */
  struct seen {
    int32_t pid;
    uint32_t slot, gen;
    uint64_t gone_ns; /* ghosts: when found dead */
  } live[SIM_MAX_PROCS], ghost[SIM_GHOSTS];
  uint32_t nghost; /* ghosts ever recorded; slot = n % SIM_GHOSTS */
} nv = {.mu = PTHREAD_MUTEX_INITIALIZER};

SIM_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  nvmlReturn_t rc = NVML_SUCCESS;
  pthread_mutex_lock(&nv.mu);
  if (nv.refs == 0) {
    struct sim_config cfg;
    char err[512], note[512];
    if (sim_config_parse(secure_getenv, &cfg, err, sizeof(err)) < 0) {
      fprintf(stderr, "%s\n", err);
      rc = NVML_ERROR_UNKNOWN;
    } else {
      nv.hide_pids = cfg.nvml_hide_pids;
      nv.pid_offset = cfg.nvml_pid_offset;
      nv.no_process_util = cfg.nvml_no_process_util;
      memcpy(nv.mig_mode, cfg.nvml_mig_mode, sizeof(nv.mig_mode));
      memcpy(nv.mig_devices, cfg.nvml_mig_devices, sizeof(nv.mig_devices));
      nv.churn = cfg.nvml_churn;
      /* What an earlier init saw was another machine's, maybe. */
      memset(nv.live, 0, sizeof(nv.live));
      nv.nghost = 0;
      int r = sim_state_open(&cfg, &nv.st, note, sizeof(note));
      if (note[0])
        fprintf(stderr, "%s\n", note);
      if (r < 0) {
        fprintf(stderr, "gslice-sim: cannot open the simulated machine %s: %s\n", cfg.state_path,
                strerror(-r));
        rc = NVML_ERROR_DRIVER_NOT_LOADED;
      }
    }
    for (unsigned i = 0; i < SIM_MAX_DEVICES; i++) {
      nv.devs[i] = (struct nvmlDevice_st){.index = i};
      for (unsigned k = 0; k < SIM_MAX_MIG; k++) {
        nv.migs[i][k] = (struct nvmlDevice_st){.index = i, .mig = k + 1};
        nv.gis[i][k] = (struct nvmlGpuInstance_st){.dev = i, .id = k + 1};
      }
    }
  }
  if (rc == NVML_SUCCESS)
    nv.refs++;
  pthread_mutex_unlock(&nv.mu);
  return rc;
}

SIM_API nvmlReturn_t nvmlInit_v2(void) {
  return nvmlInitWithFlags(0);
}
SIM_API nvmlReturn_t nvmlInit(void) {
  return nvmlInitWithFlags(0);
}

SIM_API nvmlReturn_t nvmlShutdown(void) {
  nvmlReturn_t rc = NVML_SUCCESS;
  pthread_mutex_lock(&nv.mu);
  if (nv.refs == 0)
    rc = NVML_ERROR_UNINITIALIZED;
  else if (--nv.refs == 0)
    sim_state_close(&nv.st);
  pthread_mutex_unlock(&nv.mu);
  return rc;
}

SIM_API const char *nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
  case NVML_SUCCESS: return "Success";
  case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
  case NVML_ERROR_NOT_FOUND: return "Not Found";
  case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
  case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
  case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
  case NVML_ERROR_TIMEOUT: return "Timeout";
  default: return "Unknown Error";
  }
}

static struct sim_machine *machine(void) {
  return __atomic_load_n(&nv.refs, __ATOMIC_ACQUIRE) ? nv.st.m : NULL;
}

/* With the lock held: the slots against what this library saw in them. A process gone (its slot
 * freed, or taken by another generation) becomes a ghost: a GPU's samples of it outlive it. */
static void note_slots(const struct sim_machine *m) {
  uint64_t now = sim_now_ns();

  for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
    const struct sim_proc *p = &m->proc[i];
    struct seen *l = &nv.live[i];
    if (l->pid && (p->pid != l->pid || p->gen != l->gen)) {
      nv.ghost[nv.nghost++ % SIM_GHOSTS] =
          (struct seen){.pid = l->pid, .slot = i, .gen = l->gen, .gone_ns = now};
      l->pid = 0;
    }
    if (p->pid && !l->pid)
      *l = (struct seen){.pid = p->pid, .slot = i, .gen = p->gen};
  }
}

/* sim_reap, the processes it finds dead kept as ghosts (seen before it, found gone after). */
static void reap(struct sim_machine *m, int force) {
  note_slots(m);
  sim_reap(m, force);
  note_slots(m);
}

#define REQUIRE_MACHINE(m)                                                                         \
  struct sim_machine *m = machine();                                                               \
  if (!m)                                                                                          \
  return NVML_ERROR_UNINITIALIZED

static nvmlReturn_t dev_arg(struct sim_machine *m, nvmlDevice_t device, unsigned *ret) {
  if (!device || device < &nv.devs[0] || device >= &nv.devs[SIM_MAX_DEVICES] ||
      device->index >= m->devices)
    return NVML_ERROR_INVALID_ARGUMENT;
  *ret = device->index;
  return NVML_SUCCESS;
}

/* A query of one device by NVML's pattern, the body of most calls below: NVML's answer for the
 * device (dev_arg), then for the arguments (`bad` true: INVALID_ARGUMENT), then the answer: the
 * statements after, with the device in d (they may set rc). */
#define SIM_DEVICE_CALL(fn, params, bad, ...)                                                      \
  SIM_API nvmlReturn_t fn params {                                                                 \
    REQUIRE_MACHINE(m);                                                                            \
    unsigned d;                                                                                    \
    nvmlReturn_t rc = dev_arg(m, device, &d);                                                      \
    SIM_ANSWER(bad, __VA_ARGS__);                                                                  \
  }
/* The end of each SIM_*_CALL, once NVML has answered for the device(s) in rc. */
#define SIM_ANSWER(bad, ...)                                                                       \
  if (rc == NVML_SUCCESS && (bad))                                                                 \
    rc = NVML_ERROR_INVALID_ARGUMENT;                                                              \
  if (rc == NVML_SUCCESS) {                                                                        \
    __VA_ARGS__;                                                                                   \
  }                                                                                                \
  return rc
/* A fixed figure of a device: *out = value. */
#define SIM_DEVICE_QUERY(fn, type, value)                                                          \
  SIM_DEVICE_CALL(fn, (nvmlDevice_t device, type * out), !out, *out = (value))

/* A GPU's handle or a MIG device's (of a GPU in MIG mode, one it holds), for the calls NVML
 * answers for both: *ret the GPU, *ret_mig 0 or the MIG device's index + 1. */
static nvmlReturn_t any_arg(struct sim_machine *m, nvmlDevice_t device, unsigned *ret,
                            unsigned *ret_mig) {
  const struct nvmlDevice_st *first = &nv.migs[0][0];
  *ret_mig = 0;
  if (!device || device < first || device >= first + SIM_MAX_DEVICES * SIM_MAX_MIG)
    return dev_arg(m, device, ret);
  if (device->index >= m->devices || nv.mig_mode[device->index] != SIM_MIG_ON ||
      device->mig > nv.mig_devices[device->index])
    return NVML_ERROR_INVALID_ARGUMENT; /* destroyed or never made: no device */
  *ret = device->index;
  *ret_mig = device->mig;
  return NVML_SUCCESS;
}

/* MIG device k of GPU d's UUID: its bytes (the GPU's, the last two marked) and "MIG-..." text. */
static void mig_uuid(const struct sim_machine *m, unsigned d, unsigned k, unsigned char out[16]) {
  sim_uuid(m, d, out);
  out[14] ^= 0x4d;
  out[15] ^= (unsigned char)(k + 1);
}

static void uuid_text(const struct sim_machine *m, unsigned d, unsigned mig, char *buf,
                      size_t len) {
  unsigned char u[16];
  if (!mig) {
    sim_uuid_text(m, d, buf, len);
    return;
  }
  mig_uuid(m, d, mig - 1, u);
  snprintf(buf, len, "MIG-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
}

static nvmlReturn_t copy_str(char *buf, unsigned int len, const char *s) {
  if (!buf)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(s) + 1 > len)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, s, strlen(s) + 1);
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  if (!machine())
    return NVML_ERROR_UNINITIALIZED; /* unlike the NVML version, this one needs nvmlInit */
  return copy_str(version, length, "580.00.00-gslice-sim");
}

SIM_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
  return copy_str(version, length, "13.580.00");
}

SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
  if (!v)
    return NVML_ERROR_INVALID_ARGUMENT;
  *v = 13000;
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
  return nvmlSystemGetCudaDriverVersion(v);
}

SIM_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
  REQUIRE_MACHINE(m);
  if (!deviceCount)
    return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = m->devices;
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  REQUIRE_MACHINE(m);
  if (!device || index >= m->devices)
    return NVML_ERROR_INVALID_ARGUMENT;
  *device = &nv.devs[index];
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static void serial_text(const struct sim_machine *m, unsigned d, char *buf, size_t len);

/* The device whose text (UUID, serial) is key: NOT_FOUND when none is. */
static nvmlReturn_t handle_by_text(const char *key, nvmlDevice_t *device,
                                   void (*text)(const struct sim_machine *, unsigned, char *,
                                                size_t)) {
  REQUIRE_MACHINE(m);
  if (!key || !device)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < m->devices; i++) {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    text(m, i, buf, sizeof(buf));
    if (strcmp(buf, key) == 0) {
      *device = &nv.devs[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

/* The GPU or MIG device (of a GPU in MIG mode) whose UUID is text (ASCII) or bytes (binary). */
static nvmlDevice_t handle_by_uuid(struct sim_machine *m, const char *text,
                                   const unsigned char *bytes) {
  for (unsigned d = 0; d < m->devices; d++)
    for (unsigned mig = 0; mig <= SIM_MAX_MIG; mig++) {
      if (mig && (nv.mig_mode[d] != SIM_MIG_ON || mig > nv.mig_devices[d]))
        break;
      char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
      unsigned char u[16];
      if (mig)
        mig_uuid(m, d, mig - 1, u);
      else
        sim_uuid(m, d, u);
      uuid_text(m, d, mig, buf, sizeof(buf));
      if (text ? strcmp(buf, text) == 0 : memcmp(u, bytes, sizeof(u)) == 0)
        return mig ? &nv.migs[d][mig - 1] : &nv.devs[d];
    }
  return NULL;
}

SIM_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  REQUIRE_MACHINE(m);
  if (!uuid || !device)
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlDevice_t d = handle_by_uuid(m, uuid, NULL);
  if (!d)
    return NVML_ERROR_NOT_FOUND;
  *device = d;
  return NVML_SUCCESS;
}

/* R560's lookup: the version word checked, then the UUID as its type says (ASCII: the text, NUL
 * within its 41 bytes; binary: the 16 bytes); no other type. */
SIM_API nvmlReturn_t nvmlDeviceGetHandleByUUIDV(const nvmlUUID_t *uuid, nvmlDevice_t *device) {
  REQUIRE_MACHINE(m);
  if (!uuid || !device)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (uuid->version != nvmlUUID_v1)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (uuid->type == NVML_UUID_TYPE_ASCII && !memchr(uuid->value.str, 0, sizeof(uuid->value.str)))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (uuid->type != NVML_UUID_TYPE_ASCII && uuid->type != NVML_UUID_TYPE_BINARY)
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlDevice_t d = uuid->type == NVML_UUID_TYPE_ASCII ? handle_by_uuid(m, uuid->value.str, NULL)
                                                      : handle_by_uuid(m, NULL, uuid->value.bytes);
  if (!d)
    return NVML_ERROR_NOT_FOUND;
  *device = d;
  return NVML_SUCCESS;
}

/* A GPU's NVML index; a MIG device's index under its GPU (what
 * nvmlDeviceGetMigDeviceHandleByIndex takes back). */
SIM_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  REQUIRE_MACHINE(m);
  unsigned d, mig;
  nvmlReturn_t rc = any_arg(m, device, &d, &mig);
  if (rc == NVML_SUCCESS && !index)
    rc = NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS)
    *index = mig ? mig - 1 : d;
  return rc;
}

SIM_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  REQUIRE_MACHINE(m);
  unsigned d, mig;
  nvmlReturn_t rc = any_arg(m, device, &d, &mig);
  if (rc != NVML_SUCCESS)
    return rc;
  return copy_str(name, length, mig ? "gslice simulated GPU MIG 1g" : "gslice simulated GPU");
}

SIM_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  REQUIRE_MACHINE(m);
  unsigned d, mig;
  nvmlReturn_t rc = any_arg(m, device, &d, &mig);
  if (rc != NVML_SUCCESS)
    return rc;
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  uuid_text(m, d, mig, buf, sizeof(buf));
  return copy_str(uuid, length, buf);
}

/* A device on bus `bus` of domain 0 (device 0, function 0); id: device id << 16 | vendor id
 * (0x233510de an H100-like GPU's, NVIDIA's vendor id). */
static void pci_fill(nvmlPciInfo_t *pci, unsigned bus, unsigned id) {
  memset(pci, 0, sizeof(*pci));
  pci->bus = bus;
  pci->pciDeviceId = id;
  snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", bus);
  snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", (unsigned char)bus);
}

SIM_DEVICE_CALL(nvmlDeviceGetPciInfo_v3, (nvmlDevice_t device, nvmlPciInfo_t *pci), !pci,
                pci_fill(pci, d + 1, 0x233510deu)) /* cuDeviceGetPCIBusId's: index + 1 */

SIM_DEVICE_CALL(nvmlDeviceGetMinorNumber, (nvmlDevice_t device, unsigned int *minorNumber),
                !minorNumber, *minorNumber = d)

SIM_DEVICE_CALL(nvmlDeviceGetCudaComputeCapability, (nvmlDevice_t device, int *major, int *minor),
                !major || !minor, *major = 9, *minor = 0)

/* The device's memory as NVML sees it: the whole of it (total), the driver's reservation,
 * and what processes allocated (contexts included). */
static nvmlReturn_t memory(nvmlDevice_t device, uint64_t *total, uint64_t *reserved,
                           uint64_t *used) {
  REQUIRE_MACHINE(m);
  unsigned d, mig;
  nvmlReturn_t rc = any_arg(m, device, &d, &mig);
  if (rc != NVML_SUCCESS)
    return rc;
  if (mig) { /* a 1-slice instance: an eighth of the memory, nothing of the sim's runs there */
    *total = m->memory / 8;
    *reserved = *used = 0;
    return NVML_SUCCESS;
  }
  sim_lock(m);
  reap(m, 1);
  *used = sim_dev_used(m, d);
  sim_unlock(m);
  *total = m->memory;
  *reserved = m->reserved;
  return NVML_SUCCESS;
}

/* v1: used is the reservation plus what is allocated (nvmlMemory_t: "sum of reserved and
 * allocated"), so an idle GPU shows the driver's share as used. */
SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem) {
  uint64_t total, reserved, used;
  if (!mem)
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = memory(device, &total, &reserved, &used);
  if (rc != NVML_SUCCESS)
    return rc;
  mem->total = total;
  mem->used = reserved + used;
  mem->free = reserved + used < total ? total - reserved - used : 0;
  return NVML_SUCCESS;
}

/* v2 splits the reservation out: used is only what is allocated (0 on an idle GPU), and
 * reserved + used + free = total, as an H200 (driver 580) reports it. */
SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem) {
  uint64_t total, reserved, used;
  if (!mem)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (mem->version != nvmlMemory_v2)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlReturn_t rc = memory(device, &total, &reserved, &used);
  if (rc != NVML_SUCCESS)
    return rc;
  mem->total = total;
  mem->reserved = reserved;
  mem->used = used;
  mem->free = reserved + used < total ? total - reserved - used : 0;
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!u)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (nv.mig_mode[d] == SIM_MIG_ON)
    return NVML_ERROR_NOT_SUPPORTED; /* "On MIG-enabled GPUs ... not currently supported" */
  sim_lock(m);
  reap(m, 0);
  u->gpu = sim_util_percent(m, d, -1, UTIL_WINDOW_NS);
  sim_unlock(m);
  u->memory = 0; /* memory traffic is not modelled */
  return NVML_SUCCESS;
}

/* The pid NVML shows for a process: its own, or shifted as another namespace's would be. */
static unsigned shown_pid(int32_t pid) {
  return (unsigned)((int64_t)pid + nv.pid_offset);
}

/* Entries other tenants added to a list since this process's first call of it (the churn knob). */
static unsigned churned(void) {
  return nv.churn * __atomic_add_fetch(&nv.churn_calls, 1, __ATOMIC_RELAXED);
}

/* Processes with a context on the device, as NVML lists compute processes (none when it
 * cannot see them, as in a container: GSLICE_SIM_NVML_HIDE_PIDS). */
static nvmlReturn_t running(nvmlDevice_t device, unsigned int *count, void *infos, int v1) {
  REQUIRE_MACHINE(m);
  unsigned d, mig;
  nvmlReturn_t rc = any_arg(m, device, &d, &mig);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !infos))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (mig) { /* a MIG device's processes: the sim's CUDA runs none on one */
    *count = 0;
    return NVML_SUCCESS;
  }
  sim_lock(m);
  reap(m, 1);
  unsigned n = 0;
  for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
    const struct sim_proc *p = &m->proc[i];
    if (!p->pid || p->contexts[d] == 0 || nv.hide_pids)
      continue;
    if (n < *count) {
      if (v1) {
        nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + n;
        o->pid = shown_pid(p->pid);
        o->usedGpuMemory = p->mem[d];
      } else {
        nvmlProcessInfo_t *o = (nvmlProcessInfo_t *)infos + n;
        o->pid = shown_pid(p->pid);
        o->usedGpuMemory = p->mem[d];
        o->gpuInstanceId = 0xFFFFFFFFu;
        o->computeInstanceId = 0xFFFFFFFFu;
      }
    }
    n++;
  }
  sim_unlock(m);
  rc = n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
  *count = n;
  return rc;
}

/* Graphics and MPS clients: the sim runs CUDA contexts only, without an MPS server, so both
 * lists are empty (the compute list's protocol: SUCCESS and a count of 0). */
static nvmlReturn_t no_clients(nvmlDevice_t device, unsigned int *count, void *infos) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !infos))
    return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;
  return NVML_SUCCESS;
}

/* Each ABI version of the three lists (NVML_PROCESS_LISTS): the compute list, or no clients. */
#define SIM_PROCESS_LIST(fn, mode, abi, type)                                                      \
  SIM_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos) {             \
    return (mode) == NVML_PROCESS_MODE_COMPUTE ? running(device, infoCount, infos, (abi) == 1)     \
                                               : no_clients(device, infoCount, infos);             \
  }
NVML_PROCESS_LISTS(SIM_PROCESS_LIST)
#undef SIM_PROCESS_LIST

/* The newer list call: the compute list (host pids, as ever), or none for graphics and MPS. */
SIM_API nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                           nvmlProcessDetailList_t *plist) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!plist)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (plist->version != nvmlProcessDetailList_v1)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (plist->mode > NVML_PROCESS_MODE_MPS)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned room = plist->procArray ? plist->numProcArrayEntries : 0, n = room;
  nvmlProcessInfo_t *infos = room ? calloc(room, sizeof(*infos)) : NULL;
  if (room && !infos)
    return NVML_ERROR_MEMORY;
  rc = plist->mode == NVML_PROCESS_MODE_COMPUTE ? running(device, &n, infos, 0)
                                                : no_clients(device, &n, infos);
  for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++) {
    nvmlProcessDetail_v1_t *o = &plist->procArray[i];
    memset(o, 0, sizeof(*o));
    o->pid = infos[i].pid;
    o->usedGpuMemory = infos[i].usedGpuMemory;
    o->gpuInstanceId = infos[i].gpuInstanceId;
    o->computeInstanceId = infos[i].computeInstanceId;
  }
  free(infos);
  if (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE)
    plist->numProcArrayEntries = n;
  return rc;
}

/* Any of the bus id forms NVML prints (busId "00000000:01:00.0", busIdLegacy "0000:01:00.0"),
 * in either case: the device on that bus (domain 0, device 0). */
SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
  REQUIRE_MACHINE(m);
  unsigned domain, bus, dev, fn;
  char end;
  if (!pciBusId || !device)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (sscanf(pciBusId, "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &end) != 4)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (domain != 0 || dev != 0 || fn != 0 || bus == 0 || bus > m->devices)
    return NVML_ERROR_NOT_FOUND;
  *device = &nv.devs[bus - 1];
  return NVML_SUCCESS;
}

/* As NVML does it, from the caller's own /proc (the first word of the command line, else the
 * kernel's name for it): a pid NVML listed from another namespace names nothing here (NOT_FOUND)
 * or someone else. Truncated to length. */
SIM_API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
  if (!machine())
    return NVML_ERROR_UNINITIALIZED;
  if (!name || length == 0 || pid == 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  char path[64], buf[256] = {0};
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  FILE *f = fopen(path, "re");
  size_t got = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  if (f)
    fclose(f);
  if (got == 0 || buf[0] == 0) {
    snprintf(path, sizeof(path), "/proc/%u/comm", pid);
    f = fopen(path, "re");
    got = f && fgets(buf, sizeof(buf), f) ? strlen(buf) : 0;
    if (f)
      fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    if (got == 0)
      return NVML_ERROR_NOT_FOUND;
  }
  snprintf(name, length, "%s", buf);
  return NVML_SUCCESS;
}

/* The rest of nvidia-smi's default view: fixed figures of a data-center GPU at work (passively
 * cooled, so no fan: NOT_SUPPORTED, which nvidia-smi shows as N/A). */
SIM_DEVICE_QUERY(nvmlDeviceGetPowerUsage, unsigned int, 350000u)         /* mW */
SIM_DEVICE_QUERY(nvmlDeviceGetEnforcedPowerLimit, unsigned int, 700000u) /* mW */
SIM_DEVICE_QUERY(nvmlDeviceGetPerformanceState, nvmlPstates_t, NVML_PSTATE_0)
SIM_DEVICE_QUERY(nvmlDeviceGetComputeMode, nvmlComputeMode_t, NVML_COMPUTEMODE_DEFAULT)
SIM_DEVICE_QUERY(nvmlDeviceGetPersistenceMode, nvmlEnableState_t, NVML_FEATURE_ENABLED)

SIM_DEVICE_CALL(nvmlDeviceGetTemperature,
                (nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp),
                !temp || sensorType != NVML_TEMPERATURE_GPU, *temp = 40)

SIM_DEVICE_CALL(nvmlDeviceGetFanSpeed, (nvmlDevice_t device, unsigned int *speed), !speed,
                rc = NVML_ERROR_NOT_SUPPORTED)

static uint64_t realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

struct sample {
  unsigned pid; /* as NVML shows it */
  unsigned sm;
};

/* Percent of [from, now] that busy is, from the earliest time the busy ring still covers (as
 * sim_util_percent). */
static unsigned window_percent(const struct sim_machine *m, unsigned d, uint64_t busy,
                               uint64_t from, uint64_t now) {
  uint64_t since = sim_ring_since(m, d);
  if (since > from)
    from = since;
  return now > from ? (unsigned)((busy * 100 + (now - from) / 2) / (now - from)) : 0;
}

/* With the lock held: the ghosts that ran on device d in [from, now], into out after the n
 * samples there (up to max): a dead process's stretches are its slot's of its generation, which
 * no live process shares. */
static unsigned ghost_samples(struct sim_machine *m, unsigned d, uint64_t from, uint64_t now,
                              struct sample *out, unsigned n, unsigned max) {
  struct {
    const struct seen *g;
    uint64_t busy;
  } c[SIM_GHOSTS];
  unsigned nc = 0, kept = nv.nghost < SIM_GHOSTS ? nv.nghost : SIM_GHOSTS;

  for (unsigned i = 0; i < kept; i++) {
    const struct seen *g = &nv.ghost[i];
    if (g->pid && g->gone_ns > from && now - g->gone_ns < GHOST_KEEP_NS)
      c[nc++] = (__typeof__(c[0])){.g = g, .busy = 0};
  }
  if (!nc)
    return n;
  const struct sim_device *dv = &m->dev[d];
  uint64_t rn = dv->nring < SIM_RING ? dv->nring : SIM_RING;
  for (uint64_t i = 0; i < rn; i++) {
    const struct sim_interval *iv = &dv->ring[i];
    uint64_t s = iv->start > from ? iv->start : from, e = iv->end < now ? iv->end : now;
    if (e <= s || iv->proc >= SIM_MAX_PROCS ||
        (m->proc[iv->proc].pid && m->proc[iv->proc].gen == iv->proc_gen))
      continue; /* outside the window, or a live process's */
    for (unsigned k = 0; k < nc; k++)
      if (c[k].g->slot == iv->proc && c[k].g->gen == iv->proc_gen) {
        c[k].busy += e - s;
        break;
      }
  }
  for (unsigned k = 0; k < nc && n < max; k++)
    if (c[k].busy) {
      out[n].pid = shown_pid(c[k].g->pid);
      out[n++].sm = window_percent(m, d, c[k].busy, from, now);
    }
  return n;
}

/* The processes that ran on device d since lastSeenTimeStamp (CPU time in microseconds; the
 * window runs from it to now, the last second when it is 0), up to max of them: NOT_FOUND when
 * none did (nothing can be newer than now). Those that died in the window are there too, as a
 * GPU keeps their samples (docs/sim.md). */
static nvmlReturn_t recent(struct sim_machine *m, unsigned d, unsigned long long last_seen,
                           struct sample *out, unsigned max, unsigned *ret_n,
                           uint64_t *ret_now_us) {
  uint64_t now = sim_now_ns(), now_us = realtime_us(), window = UTIL_WINDOW_NS;
  *ret_now_us = now_us;
  if (last_seen >= now_us)
    return NVML_ERROR_NOT_FOUND;
  if (last_seen)
    window = (now_us - last_seen) * 1000;
  if (max > SIM_SAMPLES)
    max = SIM_SAMPLES;
  sim_lock(m);
  reap(m, 0);
  sim_advance(m, d, now);
  unsigned n = 0;
  uint64_t from = now > window ? now - window : 0;
  for (unsigned i = 0; i < SIM_MAX_PROCS && n < max && !nv.hide_pids; i++) {
    const struct sim_proc *p = &m->proc[i];
    if (!p->pid || sim_busy_between(m, d, (int)i, from, now) == 0)
      continue;
    out[n].pid = shown_pid(p->pid);
    out[n++].sm = sim_util_percent(m, d, (int)i, window);
  }
  if (!nv.hide_pids)
    n = ghost_samples(m, d, from, now, out, n, max);
  sim_unlock(m);
  *ret_n = n;
  return n ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}

/* The documented two-call protocol, with the driver's own answers: the size call (utilization
 * NULL) and any call whose count is below the sample buffer's size are
 * NVML_ERROR_INSUFFICIENT_SIZE with *processSamplesCount = that size; with room, one sample per
 * process that ran since lastSeenTimeStamp (SUCCESS, the count written), or
 * NVML_ERROR_NOT_FOUND (count left as passed) when there is none. NOT_SUPPORTED where only the
 * newer call has the samples (GSLICE_SIM_NVML_NO_PROCESS_UTILIZATION, as on Blackwell). */
SIM_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                     nvmlProcessUtilizationSample_t *utilization,
                                                     unsigned int *processSamplesCount,
                                                     unsigned long long lastSeenTimeStamp) {
  REQUIRE_MACHINE(m);
  unsigned d, n;
  uint64_t now_us;
  struct sample got[SIM_SAMPLES];
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (nv.no_process_util)
    return NVML_ERROR_NOT_SUPPORTED;
  if (!processSamplesCount)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!utilization || *processSamplesCount < UTIL_SAMPLES) {
    *processSamplesCount = UTIL_SAMPLES;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  rc = recent(m, d, lastSeenTimeStamp, got, *processSamplesCount, &n, &now_us);
  for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++) {
    nvmlProcessUtilizationSample_t *s = &utilization[i];
    memset(s, 0, sizeof(*s));
    s->pid = got[i].pid;
    s->timeStamp = now_us;
    s->smUtil = got[i].sm;
  }
  if (rc == NVML_SUCCESS)
    *processSamplesCount = n;
  return rc;
}

/* The newer call: the version word checked; a NULL array or too few entries is
 * NVML_ERROR_INSUFFICIENT_SIZE with processSamplesCount = the samples there are; then one per
 * process that ran since lastSeenTimeStamp; NOT_FOUND when none did. */
SIM_API nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                                           nvmlProcessesUtilizationInfo_t *info) {
  REQUIRE_MACHINE(m);
  unsigned d, n;
  uint64_t now_us;
  struct sample got[SIM_SAMPLES];
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!info)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlProcessesUtilizationInfo_v1)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  rc = recent(m, d, info->lastSeenTimeStamp, got, SIM_SAMPLES, &n, &now_us);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!info->procUtilArray || info->processSamplesCount < n) {
    info->processSamplesCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; i++) {
    nvmlProcessUtilizationInfo_v1_t *o = &info->procUtilArray[i];
    memset(o, 0, sizeof(*o));
    o->timeStamp = now_us;
    o->pid = got[i].pid;
    o->smUtil = got[i].sm;
  }
  info->processSamplesCount = n;
  return NVML_SUCCESS;
}

/* A board serial number (13 digits, as NVIDIA prints them): stable per machine and index. */
static void serial_text(const struct sim_machine *m, unsigned d, char *buf, size_t len) {
  snprintf(buf, len, "%013llu", (unsigned long long)(m->path_hash % 100000000000ull) * 100 + d);
}

SIM_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  char buf[NVML_DEVICE_SERIAL_BUFFER_SIZE];
  serial_text(m, d, buf, sizeof(buf));
  return copy_str(serial, length, buf);
}

SIM_API nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device) {
  return handle_by_text(serial, device, serial_text);
}

/* The v1 lookup by bus id: the same devices. */
SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
  return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

/* nvmlDeviceGetSamples: the driver keeps a buffer of samples per type (its size is what the
 * size call says, whatever is in it); the sim takes one every SAMPLE_PERIOD_US over the last
 * second. GPU utilization is the device's (every process's kernels); memory, encoder, decoder,
 * JPEG and OFA utilization 0 (not modelled); power and clocks fixed board figures; module power
 * NOT_SUPPORTED (no NVIDIA CPU in the module). */
#define SAMPLE_BUFFER 120u
#define SAMPLE_PERIOD_US 166667ull
#define SAMPLES_KEPT 6u

static unsigned sample_value(struct sim_machine *m, unsigned d, nvmlSamplingType_t type,
                             uint64_t end_ns) {
  uint64_t period = SAMPLE_PERIOD_US * 1000;
  switch (type) {
  case NVML_TOTAL_POWER_SAMPLES: return 350000u; /* mW */
  case NVML_PROCESSOR_CLK_SAMPLES: return 1980u; /* MHz */
  case NVML_MEMORY_CLK_SAMPLES: return 2619u;
  case NVML_GPU_UTILIZATION_SAMPLES: {
    uint64_t from = end_ns > period ? end_ns - period : 0;
    return (unsigned)(sim_busy_between(m, d, -1, from, end_ns) * 100 / period);
  }
  default: return 0;
  }
}

SIM_API nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type,
                                          unsigned long long lastSeenTimeStamp,
                                          nvmlValueType_t *sampleValType, unsigned int *sampleCount,
                                          nvmlSample_t *samples) {
  REQUIRE_MACHINE(m);
  unsigned d, n = 0;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if ((unsigned)type >= NVML_SAMPLINGTYPE_COUNT || !sampleValType || !sampleCount ||
      (samples && *sampleCount == 0))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (type == NVML_MODULE_POWER_SAMPLES)
    return NVML_ERROR_NOT_SUPPORTED;
  *sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
  if (!samples) {
    *sampleCount = SAMPLE_BUFFER;
    return NVML_SUCCESS;
  }
  uint64_t now_ns = sim_now_ns(), now = realtime_us();
  sim_lock(m);
  reap(m, 0);
  sim_advance(m, d, now_ns);
  for (unsigned k = SAMPLES_KEPT; k-- > 0 && n < *sampleCount;) {
    uint64_t ts = now - k * SAMPLE_PERIOD_US; /* oldest first, as the driver's buffer */
    if (ts <= lastSeenTimeStamp)
      continue;
    memset(&samples[n], 0, sizeof(samples[n]));
    samples[n].timeStamp = ts;
    samples[n++].sampleValue.uiVal = sample_value(m, d, type, now_ns - k * SAMPLE_PERIOD_US * 1000);
  }
  sim_unlock(m);
  if (n == 0)
    return NVML_ERROR_NOT_FOUND;
  *sampleCount = n;
  return NVML_SUCCESS;
}

/* Accounting: the sim's GPUs run with accounting mode on (`nvidia-smi -am 1`, a node where
 * the admin keeps per-process records), listing the processes with a context on the device
 * as NVML shows their pids (a container's own are not: GSLICE_SIM_NVML_HIDE_PIDS, _PID_OFFSET).
 * The sim forgets a process once it is gone, where the driver keeps finished ones. */
SIM_DEVICE_QUERY(nvmlDeviceGetAccountingMode, nvmlEnableState_t, NVML_FEATURE_ENABLED)

SIM_API nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int *count,
                                                 unsigned int *pids) {
  REQUIRE_MACHINE(m);
  unsigned d, n = 0;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !pids))
    return NVML_ERROR_INVALID_ARGUMENT;
  sim_lock(m);
  reap(m, 1);
  for (unsigned i = 0; i < SIM_MAX_PROCS && !nv.hide_pids; i++) {
    const struct sim_proc *p = &m->proc[i];
    if (!p->pid || p->contexts[d] == 0)
      continue;
    if (n < *count)
      pids[n] = shown_pid(p->pid);
    n++;
  }
  sim_unlock(m);
  for (unsigned k = 0, more = churned(); k < more; k++, n++)
    if (n < *count)
      pids[n] = SIM_PHANTOM_PID + k;
  rc = n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
  *count = n;
  return rc;
}

/* A listed process's record: its share of the last second (the sim keeps no lifetime figure),
 * its memory now as its maximum, running. NOT_FOUND for a pid with no record. */
SIM_API nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int pid,
                                                  nvmlAccountingStats_t *stats) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!stats)
    return NVML_ERROR_INVALID_ARGUMENT;
  rc = NVML_ERROR_NOT_FOUND;
  sim_lock(m);
  reap(m, 1);
  for (unsigned i = 0; i < SIM_MAX_PROCS && !nv.hide_pids && rc != NVML_SUCCESS; i++) {
    const struct sim_proc *p = &m->proc[i];
    if (!p->pid || p->contexts[d] == 0 || shown_pid(p->pid) != pid)
      continue;
    memset(stats, 0, sizeof(*stats));
    stats->gpuUtilization = sim_util_percent(m, d, (int)i, UTIL_WINDOW_NS);
    stats->maxMemoryUsage = p->mem[d];
    stats->isRunning = 1;
    rc = NVML_SUCCESS;
  }
  sim_unlock(m);
  return rc;
}

/* BAR1: a 128 GiB aperture (an H100's), 2 MiB of it mapped per live context (the sim's model
 * of what the driver maps for a context). */
SIM_API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!bar1)
    return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t used = 0;
  sim_lock(m);
  reap(m, 1);
  for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
    if (m->proc[i].pid)
      used += (uint64_t)m->proc[i].contexts[d] << 21;
  sim_unlock(m);
  bar1->bar1Total = 128ull << 30;
  bar1->bar1Used = used;
  bar1->bar1Free = bar1->bar1Total - used;
  return NVML_SUCCESS;
}

/* One field: memory temperature, power and energy are board figures; the NVLink throughput
 * counters (KiB since the driver loaded) and the PCIe byte counters (R555: bytes since the
 * driver loaded) grow with the device's work, every process's (the sim's model: 1 KiB per
 * microsecond a kernel ran); any other field NOT_SUPPORTED. */
static void field_value(struct sim_machine *m, unsigned d, nvmlFieldValue_t *v) {
  v->nvmlReturn = NVML_SUCCESS;
  v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
  switch (v->fieldId) {
  case NVML_FI_DEV_MEMORY_TEMP: v->value.uiVal = 45; break;
  case NVML_FI_DEV_POWER_INSTANT: v->value.uiVal = 350000u; break;
  case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    v->value.ullVal = 350ull * (sim_now_ns() / 1000000ull); /* mJ at 350 W */
    break;
  case NVML_FI_DEV_PCIE_COUNT_TX_BYTES:
  case NVML_FI_DEV_PCIE_COUNT_RX_BYTES:
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    v->value.ullVal = sim_busy_total(m, d, -1, sim_now_ns()) / 1000 * 1024;
    break;
  default:
    if (v->fieldId >= NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX &&
        v->fieldId <= NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX) {
      v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
      v->value.ullVal = sim_busy_total(m, d, -1, sim_now_ns()) / 1000;
    } else {
      v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
}

/* Each value answered in its own nvmlReturn; SUCCESS once the device and array are good. */
SIM_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                              nvmlFieldValue_t *values) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!values || valuesCount <= 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  long long now = (long long)realtime_us();
  sim_lock(m);
  for (int i = 0; i < valuesCount; i++) {
    memset(&values[i].value, 0, sizeof(values[i].value));
    values[i].timestamp = now;
    values[i].latencyUsec = 0;
    field_value(m, d, &values[i]);
  }
  sim_unlock(m);
  return NVML_SUCCESS;
}

/* Video engines: the sim runs no encoder, so it gives every process with a context on the
 * device one H.264 encoder session and one NvFBC (CUDA) session, a video pipeline's, so that
 * tests see sessions by owning pid (as NVML shows pids: hidden or shifted by the knobs). The
 * device's figures follow from them: encoder utilization 10% per session, its capacity what is
 * left; decoder, JPEG and OFA idle. */
#define SIM_ENC_FPS 30u
#define SIM_ENC_LATENCY_US 2000u
#define SIM_FBC_FPS 60u
#define SIM_FBC_LATENCY_US 1000u
#define SIM_ENGINE_PERIOD_US 167000u /* the engines' sampling period */

/* The pids (as NVML shows them) of the processes with a context on d, up to max; their number. */
static unsigned session_pids(struct sim_machine *m, unsigned d, unsigned *out, unsigned max) {
  unsigned n = 0;
  sim_lock(m);
  reap(m, 1);
  for (unsigned i = 0; i < SIM_MAX_PROCS && !nv.hide_pids; i++) {
    const struct sim_proc *p = &m->proc[i];
    if (!p->pid || p->contexts[d] == 0)
      continue;
    if (n < max)
      out[n] = shown_pid(p->pid);
    n++;
  }
  sim_unlock(m);
  return n;
}

/* The sessions' count protocol (nvmlDeviceGetEncoderSessions, nvmlDeviceGetFBCSessions):
 * *count 0 asks for the count (SUCCESS); a count below the sessions is INSUFFICIENT_SIZE with
 * the count needed; else each session written by fill() and their count. */
static nvmlReturn_t sessions(nvmlDevice_t device, unsigned *count, void *infos,
                             void (*fill)(void *infos, unsigned i, unsigned pid)) {
  REQUIRE_MACHINE(m);
  unsigned d, pids[SIM_MAX_PROCS];
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !infos))
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = session_pids(m, d, pids, SIM_MAX_PROCS), own = n < SIM_MAX_PROCS ? n : SIM_MAX_PROCS;
  n += churned();
  if (*count == 0 || n > *count) {
    rc = *count == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    *count = n;
    return rc;
  }
  for (unsigned i = 0; i < n; i++)
    fill(infos, i, i < own ? pids[i] : SIM_PHANTOM_PID + i);
  *count = n;
  return NVML_SUCCESS;
}

static void fill_encoder(void *infos, unsigned i, unsigned pid) {
  nvmlEncoderSessionInfo_t *s = (nvmlEncoderSessionInfo_t *)infos + i;
  *s = (nvmlEncoderSessionInfo_t){.sessionId = pid,
                                  .pid = pid,
                                  .codecType = NVML_ENCODER_QUERY_H264,
                                  .hResolution = 1920,
                                  .vResolution = 1080,
                                  .averageFps = SIM_ENC_FPS,
                                  .averageLatency = SIM_ENC_LATENCY_US};
}

static void fill_fbc(void *infos, unsigned i, unsigned pid) {
  nvmlFBCSessionInfo_t *s = (nvmlFBCSessionInfo_t *)infos + i;
  *s = (nvmlFBCSessionInfo_t){.sessionId = pid,
                              .pid = pid,
                              .sessionType = NVML_FBC_SESSION_TYPE_CUDA,
                              .hMaxResolution = 1920,
                              .vMaxResolution = 1080,
                              .hResolution = 1920,
                              .vResolution = 1080,
                              .averageFPS = SIM_FBC_FPS,
                              .averageLatency = SIM_FBC_LATENCY_US};
}

SIM_API nvmlReturn_t nvmlDeviceGetEncoderSessions(nvmlDevice_t device, unsigned int *sessionCount,
                                                  nvmlEncoderSessionInfo_t *sessionInfos) {
  return sessions(device, sessionCount, sessionInfos, fill_encoder);
}

SIM_API nvmlReturn_t nvmlDeviceGetFBCSessions(nvmlDevice_t device, unsigned int *sessionCount,
                                              nvmlFBCSessionInfo_t *sessionInfo) {
  return sessions(device, sessionCount, sessionInfo, fill_fbc);
}

/* The device's sessions: 0 and their number, or NVML's error for the device. */
static nvmlReturn_t session_count(nvmlDevice_t device, unsigned *ret_n) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc == NVML_SUCCESS)
    *ret_n = session_pids(m, d, NULL, 0);
  return rc;
}

/* Every session's: their number, mean fps and latency (0 when there is none). */
SIM_API nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int *sessionCount,
                                               unsigned int *averageFps,
                                               unsigned int *averageLatency) {
  unsigned n = 0;
  nvmlReturn_t rc = session_count(device, &n);
  if (rc == NVML_SUCCESS && (!sessionCount || !averageFps || !averageLatency))
    rc = NVML_ERROR_INVALID_ARGUMENT;
  if (rc != NVML_SUCCESS)
    return rc;
  *sessionCount = n;
  *averageFps = n ? SIM_ENC_FPS : 0;
  *averageLatency = n ? SIM_ENC_LATENCY_US : 0;
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *fbcStats) {
  unsigned n = 0;
  nvmlReturn_t rc = session_count(device, &n);
  if (rc == NVML_SUCCESS && !fbcStats)
    rc = NVML_ERROR_INVALID_ARGUMENT;
  if (rc != NVML_SUCCESS)
    return rc;
  fbcStats->sessionsCount = n;
  fbcStats->averageFPS = n ? SIM_FBC_FPS : 0;
  fbcStats->averageLatency = n ? SIM_FBC_LATENCY_US : 0;
  return NVML_SUCCESS;
}

static unsigned encoder_percent(unsigned sessions_n) {
  return sessions_n >= 10 ? 100 : sessions_n * 10;
}

SIM_API nvmlReturn_t nvmlDeviceGetEncoderCapacity(nvmlDevice_t device,
                                                  nvmlEncoderType_t encoderQueryType,
                                                  unsigned int *encoderCapacity) {
  unsigned n = 0;
  nvmlReturn_t rc = session_count(device, &n);
  if (rc == NVML_SUCCESS && (!encoderCapacity || encoderQueryType > NVML_ENCODER_QUERY_AV1))
    rc = NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS)
    *encoderCapacity = 100 - encoder_percent(n);
  return rc;
}

/* One engine's utilization over its sampling period: the encoder's from its sessions, the
 * others idle. */
static nvmlReturn_t engine_util(nvmlDevice_t device, int encoder, unsigned *util,
                                unsigned *period_us) {
  unsigned n = 0;
  nvmlReturn_t rc = session_count(device, &n);
  if (rc == NVML_SUCCESS && (!util || !period_us))
    rc = NVML_ERROR_INVALID_ARGUMENT;
  if (rc != NVML_SUCCESS)
    return rc;
  *util = encoder ? encoder_percent(n) : 0;
  *period_us = SIM_ENGINE_PERIOD_US;
  return NVML_SUCCESS;
}

#define SIM_ENGINE_UTIL(fn, encoder)                                                               \
  SIM_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *utilization,                          \
                          unsigned int *samplingPeriodUs) {                                        \
    return engine_util(device, encoder, utilization, samplingPeriodUs);                            \
  }
NVML_ENGINE_UTILIZATIONS(SIM_ENGINE_UTIL)

/* GPM: the sim's GPUs are Hopper-like (compute capability 9.0), so GPM is supported. A sample
 * holds the device and its busy time so far (every process's kernels); the metrics of two are
 * the busy share of the time between them (graphics and SM utilization, SM occupancy: the sim
 * keeps every SM busy while a kernel runs); any other metric NOT_SUPPORTED in its own
 * nvmlReturn. MIG is off, so a MIG sample is NOT_SUPPORTED. */
#define GPM_MAGIC 0x67706d31u
struct nvmlGpmSample_st {
  uint32_t magic;
  uint32_t filled;
  unsigned dev;
  uint64_t at_ns;
  uint64_t busy_ns;
};

SIM_API nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample) {
  if (!gpmSample)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct nvmlGpmSample_st *s = calloc(1, sizeof(*s));
  if (!s)
    return NVML_ERROR_MEMORY;
  s->magic = GPM_MAGIC;
  *gpmSample = s;
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample) {
  if (!gpmSample || gpmSample->magic != GPM_MAGIC)
    return NVML_ERROR_INVALID_ARGUMENT;
  gpmSample->magic = 0;
  free(gpmSample);
  return NVML_SUCCESS;
}

SIM_DEVICE_CALL(nvmlGpmQueryDeviceSupport, (nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport),
                !gpmSupport,
                if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
                    rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
                else gpmSupport->isSupportedDevice = 1)

SIM_API nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!gpmSample || gpmSample->magic != GPM_MAGIC)
    return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t now = sim_now_ns();
  sim_lock(m);
  gpmSample->busy_ns = sim_busy_total(m, d, -1, now);
  sim_unlock(m);
  gpmSample->dev = d;
  gpmSample->at_ns = now;
  gpmSample->filled = 1;
  return NVML_SUCCESS;
}

SIM_DEVICE_CALL(nvmlGpmMigSampleGet,
                (nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample),
                !gpmSample || gpmSample->magic != GPM_MAGIC, (void)gpuInstanceId;
                rc = NVML_ERROR_NOT_SUPPORTED)

static nvmlReturn_t gpm_samples(const nvmlGpmMetricsGet_t *g) {
  const struct nvmlGpmSample_st *a = g->sample1, *b = g->sample2;
  if (!a || !b || a->magic != GPM_MAGIC || b->magic != GPM_MAGIC || !a->filled || !b->filled ||
      a->dev != b->dev || b->at_ns <= a->at_ns)
    return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet) {
  if (!machine())
    return NVML_ERROR_UNINITIALIZED;
  if (!metricsGet)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (metricsGet->numMetrics == 0 || metricsGet->numMetrics > NVML_GPM_METRIC_MAX)
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = gpm_samples(metricsGet);
  if (rc != NVML_SUCCESS)
    return rc;
  const struct nvmlGpmSample_st *a = metricsGet->sample1, *b = metricsGet->sample2;
  double busy = (double)(b->busy_ns - a->busy_ns) * 100.0 / (double)(b->at_ns - a->at_ns);
  for (unsigned i = 0; i < metricsGet->numMetrics; i++) {
    nvmlGpmMetric_t *x = &metricsGet->metrics[i];
    unsigned id = x->metricId;
    memset(&x->metricInfo, 0, sizeof(x->metricInfo));
    x->value = 0;
    x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (id == NVML_GPM_METRIC_GRAPHICS_UTIL || id == NVML_GPM_METRIC_SM_UTIL ||
        id == NVML_GPM_METRIC_SM_OCCUPANCY) {
      x->value = busy > 100.0 ? 100.0 : busy;
      x->nvmlReturn = NVML_SUCCESS;
      x->metricInfo.unit = (char *)"%";
    }
  }
  return NVML_SUCCESS;
}

/* Topology: GPUs in pairs on one PCIe switch (0 and 1, 2 and 3, ...), every pair on one host
 * bridge of the one NUMA node; all of them near every CPU; peer access across any two; each GPU
 * its own board. */
static nvmlGpuTopologyLevel_t topo_level(unsigned a, unsigned b) {
  if (a == b)
    return NVML_TOPOLOGY_INTERNAL;
  return a / 2 == b / 2 ? NVML_TOPOLOGY_SINGLE : NVML_TOPOLOGY_HOSTBRIDGE;
}

static bool topo_level_valid(nvmlGpuTopologyLevel_t l) {
  return l == NVML_TOPOLOGY_INTERNAL || l == NVML_TOPOLOGY_SINGLE || l == NVML_TOPOLOGY_MULTIPLE ||
         l == NVML_TOPOLOGY_HOSTBRIDGE || l == NVML_TOPOLOGY_NODE || l == NVML_TOPOLOGY_SYSTEM;
}

static nvmlReturn_t two_devices(nvmlDevice_t d1, nvmlDevice_t d2, unsigned *a, unsigned *b) {
  REQUIRE_MACHINE(m);
  nvmlReturn_t rc = dev_arg(m, d1, a);
  return rc == NVML_SUCCESS ? dev_arg(m, d2, b) : rc;
}

/* A query of two devices (NVML's answer for both, then the arguments, then the answer, with the
 * devices in a and b), as SIM_DEVICE_CALL. */
#define SIM_PAIR_CALL(fn, params, bad, ...)                                                        \
  SIM_API nvmlReturn_t fn params {                                                                 \
    unsigned a, b;                                                                                 \
    nvmlReturn_t rc = two_devices(device1, device2, &a, &b);                                       \
    SIM_ANSWER(bad, __VA_ARGS__);                                                                  \
  }
SIM_PAIR_CALL(nvmlDeviceGetTopologyCommonAncestor,
              (nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t *pathInfo),
              !pathInfo, *pathInfo = topo_level(a, b))
SIM_PAIR_CALL(nvmlDeviceGetP2PStatus,
              (nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
               nvmlGpuP2PStatus_t *p2pStatus),
              !p2pStatus || (unsigned)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN,
              *p2pStatus = NVML_P2P_STATUS_OK)
SIM_PAIR_CALL(nvmlDeviceOnSameBoard, (nvmlDevice_t device1, nvmlDevice_t device2, int *onSameBoard),
              !onSameBoard, *onSameBoard = a == b)

/* The documented count protocol of both lists: *count 0 is set to the GPUs found; else up to
 * *count handles written and *count set to their number. */
static nvmlReturn_t device_list(struct sim_machine *m, int near, unsigned from,
                                nvmlGpuTopologyLevel_t level, unsigned *count, nvmlDevice_t *out) {
  unsigned n = 0;
  if (!count || (*count && !out))
    return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < m->devices; i++) {
    if (near && (i == from || topo_level(from, i) > level))
      continue;
    if (*count && n == *count)
      break;
    if (*count)
      out[n] = &nv.devs[i];
    n++;
  }
  *count = n;
  return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device,
                                                      nvmlGpuTopologyLevel_t level,
                                                      unsigned int *count,
                                                      nvmlDevice_t *deviceArray) {
  REQUIRE_MACHINE(m);
  unsigned d;
  nvmlReturn_t rc = dev_arg(m, device, &d);
  if (rc == NVML_SUCCESS && !topo_level_valid(level))
    rc = NVML_ERROR_INVALID_ARGUMENT;
  return rc == NVML_SUCCESS ? device_list(m, 1, d, level, count, deviceArray) : rc;
}

SIM_API nvmlReturn_t nvmlSystemGetTopologyGpuSet(unsigned int cpuNumber, unsigned int *count,
                                                 nvmlDevice_t *deviceArray) {
  REQUIRE_MACHINE(m);
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  if (cpus > 0 && cpuNumber >= (unsigned long)cpus)
    return NVML_ERROR_INVALID_ARGUMENT;
  return device_list(m, 0, 0, NVML_TOPOLOGY_SYSTEM, count, deviceArray);
}

/* MIG: the sim's GPUs can hold 7 MIG devices (an H100's 1-slice ones) and run with MIG mode off,
 * unless GSLICE_SIM_NVML_MIG sets it: then a GPU holds the MIG devices it names, each a compute
 * instance filling a GPU instance of the 1-slice profile (ids 1..N), an eighth of the memory.
 * With MIG off there is no MIG device at any index (NOT_FOUND) and no GPU instance
 * (NOT_SUPPORTED, as NVML answers where the mode is off). */
static bool mig_on(unsigned d) {
  return nv.mig_mode[d] == SIM_MIG_ON;
}

SIM_DEVICE_CALL(nvmlDeviceGetMigMode,
                (nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode),
                !currentMode || !pendingMode,
                *currentMode = mig_on(d) ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
                *pendingMode = nv.mig_mode[d] != SIM_MIG_OFF ? NVML_DEVICE_MIG_ENABLE
                                                             : NVML_DEVICE_MIG_DISABLE)

SIM_DEVICE_QUERY(nvmlDeviceGetMaxMigDeviceCount, unsigned int, SIM_MAX_MIG)

SIM_DEVICE_CALL(nvmlDeviceGetMigDeviceHandleByIndex,
                (nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice),
                !migDevice || index >= SIM_MAX_MIG,
                if (!mig_on(d) || index >= nv.mig_devices[d]) rc = NVML_ERROR_NOT_FOUND;
                else *migDevice = &nv.migs[d][index])

/* The MIG queries of a handle of either kind (any_arg): `out` NULL is INVALID_ARGUMENT; a GPU's
 * handle (no MIG device) is answered `gpu_rc` (SUCCESS: answered like a MIG device's); then the
 * answer, with the GPU in d and the MIG device's index + 1 in mig. */
#define SIM_MIG_CALL(fn, handle, type, gpu_rc, ...)                                                \
  SIM_API nvmlReturn_t fn(nvmlDevice_t handle, type *out) {                                        \
    REQUIRE_MACHINE(m);                                                                            \
    unsigned d, mig;                                                                               \
    nvmlReturn_t rc = any_arg(m, handle, &d, &mig);                                                \
    SIM_ANSWER(                                                                                    \
        !out, if (!mig && (gpu_rc) != NVML_SUCCESS) rc = (gpu_rc); else { __VA_ARGS__; });         \
  }
SIM_MIG_CALL(nvmlDeviceIsMigDeviceHandle, device, unsigned int, NVML_SUCCESS, *out = mig != 0)
SIM_MIG_CALL(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, migDevice, nvmlDevice_t,
             NVML_ERROR_INVALID_ARGUMENT, *out = &nv.devs[d])
SIM_MIG_CALL(nvmlDeviceGetGpuInstanceId, device, unsigned int, NVML_ERROR_NOT_SUPPORTED,
             *out = nv.gis[d][mig - 1].id)
/* The one compute instance filling its GPU instance: id 0. */
SIM_MIG_CALL(nvmlDeviceGetComputeInstanceId, device, unsigned int, NVML_ERROR_NOT_SUPPORTED,
             *out = 0)

/* A profile's GPU instances, into an array the caller sized from the profile's instanceCount
 * (*count is out only); only the 1-slice profile has any. */
static void gpu_instances(unsigned d, unsigned profile, nvmlGpuInstance_t *out, unsigned *count) {
  *count = profile == NVML_GPU_INSTANCE_PROFILE_1_SLICE ? nv.mig_devices[d] : 0;
  for (unsigned k = 0; k < *count; k++)
    out[k] = &nv.gis[d][k];
}

SIM_DEVICE_CALL(nvmlDeviceGetGpuInstances,
                (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstances,
                 unsigned int *count),
                !count || !gpuInstances || profileId >= NVML_GPU_INSTANCE_PROFILE_COUNT,
                if (!mig_on(d)) rc = NVML_ERROR_NOT_SUPPORTED;
                else gpu_instances(d, profileId, gpuInstances, count))

SIM_DEVICE_CALL(nvmlDeviceGetGpuInstanceById,
                (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance),
                !gpuInstance, if (!mig_on(d)) rc = NVML_ERROR_NOT_SUPPORTED;
                else if (id == 0 || id > nv.mig_devices[d]) rc = NVML_ERROR_NOT_FOUND;
                else *gpuInstance = &nv.gis[d][id - 1])

/* NVLink: SIM_NVLINKS active links per GPU; links 0-3 bridge it to its pair's GPU (0 and 1, 2 and
 * 3, ...: the PCIe switch's pairs), or to the NVSwitch where it has no pair; links 4-5 reach the
 * NVSwitch (bus 0xC0, NVIDIA's vendor id). */
#define SIM_NVSWITCH_BUS 0xC0u
/* The GPU at the far end of link `link` of GPU d, or -1 (the NVSwitch). */
static int nvlink_gpu(const struct sim_machine *m, unsigned d, unsigned link) {
  return link < 4 && (d ^ 1u) < m->devices ? (int)(d ^ 1u) : -1;
}
SIM_DEVICE_CALL(nvmlDeviceGetNvLinkState,
                (nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive),
                !isActive || link >= SIM_NVLINKS, *isActive = NVML_FEATURE_ENABLED)
SIM_DEVICE_CALL(nvmlDeviceGetNvLinkRemoteDeviceType,
                (nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t *type),
                !type || link >= SIM_NVLINKS,
                *type = nvlink_gpu(m, d, link) >= 0 ? NVML_NVLINK_DEVICE_TYPE_GPU
                                                    : NVML_NVLINK_DEVICE_TYPE_SWITCH)
static void nvlink_pci(const struct sim_machine *m, unsigned d, unsigned link, nvmlPciInfo_t *pci) {
  int gpu = nvlink_gpu(m, d, link);
  pci_fill(pci, gpu >= 0 ? (unsigned)gpu + 1 : SIM_NVSWITCH_BUS,
           gpu >= 0 ? 0x233510deu : 0x22a310deu);
}
SIM_DEVICE_CALL(nvmlDeviceGetNvLinkRemotePciInfo_v2,
                (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci),
                !pci || link >= SIM_NVLINKS, nvlink_pci(m, d, link, pci))

/* PCIe throughput over the last 20 ms: the sim's model moves 100 KB/s per percent the device was
 * busy (every process's kernels), either way. */
static unsigned pcie_kbps(struct sim_machine *m, unsigned d) {
  sim_lock(m);
  reap(m, 0);
  unsigned kbps = sim_util_percent(m, d, -1, 20000000ull) * 100u;
  sim_unlock(m);
  return kbps;
}
SIM_DEVICE_CALL(nvmlDeviceGetPcieThroughput,
                (nvmlDevice_t device, nvmlPcieUtilCounter_t counter, unsigned int *value),
                !value || (unsigned)counter >= NVML_PCIE_UTIL_COUNT, *value = pcie_kbps(m, d))

/* v1 of the far end's PCI info: as _v2, the bus id in the legacy form (a 4-digit domain), as
 * NVML's v1 entry points give it. */
static void nvlink_pci_v1(const struct sim_machine *m, unsigned d, unsigned link,
                          nvmlPciInfo_t *pci) {
  nvlink_pci(m, d, link, pci);
  snprintf(pci->busId, sizeof(pci->busId), "%s", pci->busIdLegacy);
}
SIM_DEVICE_CALL(nvmlDeviceGetNvLinkRemotePciInfo,
                (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci),
                !pci || link >= SIM_NVLINKS, nvlink_pci_v1(m, d, link, pci))

/* Clock event reasons: GpuIdle while no process's kernel ran on the device over the last 100 ms
 * (its clocks drop then), none otherwise (a cool GPU under its power limit: 350 of 700 W). The
 * deprecated "throttle reasons" call is the same one. Every reason NVML names is supported. */
#define SIM_IDLE_WINDOW_NS 100000000ull
static unsigned long long clock_reasons(struct sim_machine *m, unsigned d) {
  sim_lock(m);
  reap(m, 0);
  uint64_t now = sim_now_ns();
  uint64_t busy =
      sim_busy_between(m, d, -1, now > SIM_IDLE_WINDOW_NS ? now - SIM_IDLE_WINDOW_NS : 0, now);
  sim_unlock(m);
  return busy ? nvmlClocksEventReasonNone : nvmlClocksEventReasonGpuIdle;
}
SIM_DEVICE_QUERY(nvmlDeviceGetCurrentClocksEventReasons, unsigned long long, clock_reasons(m, d))
SIM_DEVICE_QUERY(nvmlDeviceGetCurrentClocksThrottleReasons, unsigned long long, clock_reasons(m, d))
SIM_DEVICE_QUERY(nvmlDeviceGetSupportedClocksEventReasons, unsigned long long, 0x1ffull)

/* Confidential computing is off on the sim: the protected memory's usage is not supported. */
SIM_DEVICE_CALL(nvmlDeviceGetConfComputeProtectedMemoryUsage,
                (nvmlDevice_t device, nvmlMemory_t *memory), !memory, rc = NVML_ERROR_NOT_SUPPORTED)

/* Event sets (NVML's reference, "Event Handling Methods"): a set holds the event types registered
 * per device; a data-center GPU supports ECC, P-state, Xid and clock events. None ever happens on
 * the sim (no ECC or Xid error, P0 and its clocks fixed): a wait ends with NVML_ERROR_TIMEOUT. */
#define SIM_EVENT_MAGIC 0x45564e54u
#define SIM_EVENT_TYPES                                                                            \
  (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |         \
   nvmlEventTypeXidCriticalError | nvmlEventTypeClock)
struct nvmlEventSet_st {
  unsigned magic;
  unsigned long long types[SIM_MAX_DEVICES];
};

static bool event_set_ok(nvmlEventSet_t set) {
  return set && set->magic == SIM_EVENT_MAGIC;
}

SIM_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
  REQUIRE_MACHINE(m);
  (void)m;
  if (!set)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!(*set = calloc(1, sizeof(**set))))
    return NVML_ERROR_MEMORY;
  (*set)->magic = SIM_EVENT_MAGIC;
  return NVML_SUCCESS;
}

SIM_DEVICE_QUERY(nvmlDeviceGetSupportedEventTypes, unsigned long long, SIM_EVENT_TYPES)

/* Types the device does not support are NVML_ERROR_NOT_SUPPORTED, as NVML answers for "some of
 * the requested event types"; no type or no set INVALID_ARGUMENT. */
SIM_DEVICE_CALL(nvmlDeviceRegisterEvents,
                (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set),
                !event_set_ok(set) || eventTypes == 0,
                if (eventTypes & ~SIM_EVENT_TYPES) rc = NVML_ERROR_NOT_SUPPORTED;
                else set->types[d] |= eventTypes)

SIM_API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                         unsigned int timeoutms) {
  REQUIRE_MACHINE(m);
  (void)m;
  if (!event_set_ok(set) || !data)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct timespec ts = {.tv_sec = timeoutms / 1000, .tv_nsec = (long)(timeoutms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
  return NVML_ERROR_TIMEOUT;
}

SIM_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  REQUIRE_MACHINE(m);
  (void)m;
  if (!event_set_ok(set))
    return NVML_ERROR_INVALID_ARGUMENT;
  set->magic = 0;
  free(set);
  return NVML_SUCCESS;
}
