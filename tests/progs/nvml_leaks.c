/* SPDX-License-Identifier: Apache-2.0 */
/* The NVML calls beyond nvidia-smi's default view that could show a slice the whole device
 * (docs/nvml.md, "Samples, accounting and field values"), made as their callers make them
 * (two-call counts), printed as key=value lines for tests/integration/nvml_leaks.sh:
 *   util gpu=I util=P|rcN
 *   samples gpu=I type=T rc=RC n=N max=V     (nvmlDeviceGetSamples, the size call first)
 *   acct gpu=I rc=RC count=N pids=P,P,...     (nvmlDeviceGetAccountingPids, the count call first)
 *   field gpu=I id=ID rc=RC val=V            (nvmlDeviceGetFieldValues, each field's own rc)
 *   bar1 gpu=I rc=RC total=B used=B
 * `nvml_leaks ids`: "dev index=I serial=S bus=B" per GPU; `nvml_leaks serial S`, `bus1 B`:
 * "serial rc=RC", "bus1 rc=RC"; `nvml_leaks stats PID`: "stats gpu=I pid=P rc=RC mem=B". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "nvml_min.h"

static void samples(nvmlDevice_t d, unsigned i, nvmlSamplingType_t type) {
  nvmlValueType_t vt;
  unsigned n = 0, max = 0;
  nvmlReturn_t rc = nvmlDeviceGetSamples(d, type, 0, &vt, &n, NULL);
  nvmlSample_t *s = rc == NVML_SUCCESS && n ? calloc(n, sizeof(*s)) : NULL;
  if (s)
    rc = nvmlDeviceGetSamples(d, type, 0, &vt, &n, s);
  for (unsigned k = 0; s && rc == NVML_SUCCESS && k < n; k++)
    max = s[k].sampleValue.uiVal > max ? s[k].sampleValue.uiVal : max;
  printf("samples gpu=%u type=%d rc=%d n=%u max=%u\n", i, (int)type, (int)rc,
         rc == NVML_SUCCESS ? n : 0, max);
  free(s);
}

static void accounting(nvmlDevice_t d, unsigned i) {
  unsigned n = 0, none[1];
  nvmlReturn_t rc = nvmlDeviceGetAccountingPids(d, &n, none);
  unsigned *pids = rc == NVML_ERROR_INSUFFICIENT_SIZE ? calloc(n, sizeof(*pids)) : NULL;
  if (pids)
    rc = nvmlDeviceGetAccountingPids(d, &n, pids);
  printf("acct gpu=%u rc=%d count=%u pids=", i, (int)rc, n);
  for (unsigned k = 0; pids && rc == NVML_SUCCESS && k < n; k++)
    printf("%s%u", k ? "," : "", pids[k]);
  printf("\n");
  free(pids);
}

static void fields(nvmlDevice_t d, unsigned i) {
  static const unsigned ids[] = {NVML_FI_DEV_MEMORY_TEMP, NVML_FI_DEV_POWER_INSTANT,
                                 NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                                 NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX};
  nvmlFieldValue_t v[4];
  memset(v, 0, sizeof(v));
  for (unsigned k = 0; k < 4; k++)
    v[k].fieldId = ids[k];
  nvmlReturn_t rc = nvmlDeviceGetFieldValues(d, 4, v);
  for (unsigned k = 0; k < 4; k++)
    printf("field gpu=%u id=%u rc=%d val=%llu\n", i, ids[k],
           rc == NVML_SUCCESS ? (int)v[k].nvmlReturn : (int)rc,
           v[k].valueType == NVML_VALUE_TYPE_UNSIGNED_INT ? (unsigned long long)v[k].value.uiVal
                                                          : v[k].value.ullVal);
}

static int each_device(unsigned long stats_pid) {
  unsigned count = 0;
  if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
    return 1;
  for (unsigned i = 0; i < count; i++) {
    nvmlDevice_t d;
    if (nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS)
      return 1;
    if (stats_pid) {
      nvmlAccountingStats_t st;
      memset(&st, 0, sizeof(st));
      nvmlReturn_t rc = nvmlDeviceGetAccountingStats(d, (unsigned)stats_pid, &st);
      printf("stats gpu=%u pid=%lu rc=%d mem=%llu\n", i, stats_pid, (int)rc, st.maxMemoryUsage);
      continue;
    }
    nvmlUtilization_t u;
    nvmlReturn_t rc = nvmlDeviceGetUtilizationRates(d, &u);
    printf(rc == NVML_SUCCESS ? "util gpu=%u util=%u\n" : "util gpu=%u util=rc%u\n", i,
           rc == NVML_SUCCESS ? u.gpu : (unsigned)rc);
    samples(d, i, NVML_GPU_UTILIZATION_SAMPLES);
    samples(d, i, NVML_MEMORY_UTILIZATION_SAMPLES);
    samples(d, i, NVML_ENC_UTILIZATION_SAMPLES);
    samples(d, i, NVML_TOTAL_POWER_SAMPLES);
    accounting(d, i);
    fields(d, i);
    nvmlBAR1Memory_t b;
    memset(&b, 0, sizeof(b));
    rc = nvmlDeviceGetBAR1MemoryInfo(d, &b);
    printf("bar1 gpu=%u rc=%d total=%llu used=%llu\n", i, (int)rc, b.bar1Total, b.bar1Used);
  }
  return 0;
}

static int ids(void) {
  unsigned count = 0;
  if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
    return 1;
  for (unsigned i = 0; i < count; i++) {
    nvmlDevice_t d;
    char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
    nvmlPciInfo_t pci;
    if (nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS ||
        nvmlDeviceGetSerial(d, serial, sizeof(serial)) != NVML_SUCCESS ||
        nvmlDeviceGetPciInfo_v3(d, &pci) != NVML_SUCCESS)
      return 1;
    printf("dev index=%u serial=%s bus=%s\n", i, serial, pci.busId);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (nvmlInit_v2() != NVML_SUCCESS) {
    fprintf(stderr, "nvml_leaks: nvmlInit failed\n");
    return 1;
  }
  int rc = 0;
  nvmlDevice_t d;
  if (argc == 3 && strcmp(argv[1], "serial") == 0)
    printf("serial rc=%d\n", (int)nvmlDeviceGetHandleBySerial(argv[2], &d));
  else if (argc == 3 && strcmp(argv[1], "bus1") == 0)
    printf("bus1 rc=%d\n", (int)nvmlDeviceGetHandleByPciBusId(argv[2], &d));
  else if (argc == 3 && strcmp(argv[1], "stats") == 0)
    rc = each_device(strtoul(argv[2], NULL, 10));
  else if (argc == 2 && strcmp(argv[1], "ids") == 0)
    rc = ids();
  else if (argc == 1)
    rc = each_device(0);
  else {
    fprintf(stderr, "usage: nvml_leaks [ids | serial S | bus1 BUSID | stats PID]\n");
    rc = 2;
  }
  nvmlShutdown();
  return rc;
}
