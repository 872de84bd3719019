/* SPDX-License-Identifier: Apache-2.0 */
/* The NVML calls beyond nvidia-smi's default view that could show a slice the whole device
 * (docs/nvml.md, "Samples, accounting and field values"), made as their callers make them
 * (two-call counts), printed as key=value lines for tests/integration/nvml_leaks.sh:
 *   util gpu=I util=P|rcN
 *   samples gpu=I type=T rc=RC n=N max=V     (nvmlDeviceGetSamples, the size call first)
 *   acct gpu=I rc=RC count=N pids=P,P,...     (nvmlDeviceGetAccountingPids, the count call first)
 *   field gpu=I id=ID rc=RC val=V            (nvmlDeviceGetFieldValues, each field's own rc)
 *   bar1 gpu=I rc=RC total=B used=B
 *   enc|fbc gpu=I rc=RC count=N pids=P,...   (encoder / NvFBC sessions, the count call first)
 *   encstats|fbcstats gpu=I rc=RC n=N fps=F lat=L
 *   engine gpu=I name=enc|dec|jpg|ofa rc=RC util=U, enccap gpu=I rc=RC cap=C, pcie gpu=I rc=RC tx=K
 *   gpm gpu=I rc=RC supported=S sample=RC metrics=RC util=V (two samples 200 ms apart)
 * `nvml_leaks ids`: "dev index=I serial=S bus=B" per GPU; `nvml_leaks serial S`, `bus1 B`:
 * "serial rc=RC", "bus1 rc=RC"; `nvml_leaks stats PID`: "stats gpu=I pid=P rc=RC mem=B".
 * `nvml_leaks topo [STRIDE]`: the topology of GPU 0 as shown, "topo stride=S nearest=RC:N
 * gpuset=RC:N self=RC:L" (S: bytes between the handles of GPUs 0 and 1, 0 with one GPU), then
 * with STRIDE a handle forged STRIDE bytes below the last GPU's (as one guessing at NVML's table
 * would):
 * "forged mig=RC max=RC mighandle=RC gis=RC gi=RC" (MIG queries of it), "forged mem=RC mem2=RC"
 * (its memory, v1 and v2), "forged util=RC procs=RC samples=RC acct=RC fields=RC enc=RC pcie=RC
 * gpm=RC" (the other wrapped calls), then "forged index=RC ancestor=RC p2p=RC board=RC
 * nearest=RC". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  static const unsigned ids[] = {NVML_FI_DEV_MEMORY_TEMP,
                                 NVML_FI_DEV_POWER_INSTANT,
                                 NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                                 NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX,
                                 NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
                                 NVML_FI_DEV_PCIE_COUNT_RX_BYTES};
  enum { N = sizeof(ids) / sizeof(ids[0]) };
  nvmlFieldValue_t v[N];
  memset(v, 0, sizeof(v));
  for (unsigned k = 0; k < N; k++)
    v[k].fieldId = ids[k];
  nvmlReturn_t rc = nvmlDeviceGetFieldValues(d, N, v);
  for (unsigned k = 0; k < N; k++)
    printf("field gpu=%u id=%u rc=%d val=%llu\n", i, ids[k],
           rc == NVML_SUCCESS ? (int)v[k].nvmlReturn : (int)rc,
           v[k].valueType == NVML_VALUE_TYPE_UNSIGNED_INT ? (unsigned long long)v[k].value.uiVal
                                                          : v[k].value.ullVal);
}

static void print_pids(const unsigned *pids, unsigned n) {
  for (unsigned k = 0; k < n; k++)
    printf("%s%u", k ? "," : "", pids[k]);
  printf("\n");
}

static void encoder(nvmlDevice_t d, unsigned i) {
  unsigned n = 0, pids[64], fps = 0, lat = 0, k;
  nvmlReturn_t rc = nvmlDeviceGetEncoderSessions(d, &n, NULL);
  nvmlEncoderSessionInfo_t *s = rc == NVML_SUCCESS && n ? calloc(n, sizeof(*s)) : NULL;
  if (s)
    rc = nvmlDeviceGetEncoderSessions(d, &n, s);
  printf("enc gpu=%u rc=%d count=%u pids=", i, (int)rc, n);
  for (k = 0; s && rc == NVML_SUCCESS && k < n && k < 64; k++)
    pids[k] = s[k].pid;
  print_pids(pids, s && rc == NVML_SUCCESS ? k : 0);
  free(s);
  rc = nvmlDeviceGetEncoderStats(d, &n, &fps, &lat);
  printf("encstats gpu=%u rc=%d n=%u fps=%u lat=%u\n", i, (int)rc, n, fps, lat);
  n = 0;
  rc = nvmlDeviceGetFBCSessions(d, &n, NULL);
  nvmlFBCSessionInfo_t *f = rc == NVML_SUCCESS && n ? calloc(n, sizeof(*f)) : NULL;
  if (f)
    rc = nvmlDeviceGetFBCSessions(d, &n, f);
  printf("fbc gpu=%u rc=%d count=%u pids=", i, (int)rc, n);
  for (k = 0; f && rc == NVML_SUCCESS && k < n && k < 64; k++)
    pids[k] = f[k].pid;
  print_pids(pids, f && rc == NVML_SUCCESS ? k : 0);
  free(f);
  nvmlFBCStats_t st = {0, 0, 0};
  rc = nvmlDeviceGetFBCStats(d, &st);
  printf("fbcstats gpu=%u rc=%d n=%u fps=%u lat=%u\n", i, (int)rc, st.sessionsCount, st.averageFPS,
         st.averageLatency);
}

static void engines(nvmlDevice_t d, unsigned i) {
  static const char *names[] = {"enc", "dec", "jpg", "ofa"};
  for (unsigned k = 0; k < 4; k++) {
    unsigned u = 0, period = 0;
    nvmlReturn_t rc = k == 0   ? nvmlDeviceGetEncoderUtilization(d, &u, &period)
                      : k == 1 ? nvmlDeviceGetDecoderUtilization(d, &u, &period)
                      : k == 2 ? nvmlDeviceGetJpgUtilization(d, &u, &period)
                               : nvmlDeviceGetOfaUtilization(d, &u, &period);
    printf("engine gpu=%u name=%s rc=%d util=%u\n", i, names[k], (int)rc, u);
  }
  unsigned cap = 0, tx = 0;
  nvmlReturn_t rc = nvmlDeviceGetEncoderCapacity(d, NVML_ENCODER_QUERY_H264, &cap);
  printf("enccap gpu=%u rc=%d cap=%u\n", i, (int)rc, cap);
  rc = nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_TX_BYTES, &tx);
  printf("pcie gpu=%u rc=%d tx=%u\n", i, (int)rc, tx);
}

static void gpm(nvmlDevice_t d, unsigned i) {
  nvmlGpmSupport_t sup = {.version = NVML_GPM_SUPPORT_VERSION};
  nvmlGpmSample_t a = NULL, b = NULL;
  nvmlReturn_t rc = nvmlGpmQueryDeviceSupport(d, &sup), sample = NVML_ERROR_UNKNOWN;
  nvmlGpmMetricsGet_t *g = calloc(1, sizeof(*g));
  if (!g || nvmlGpmSampleAlloc(&a) != NVML_SUCCESS || nvmlGpmSampleAlloc(&b) != NVML_SUCCESS) {
    printf("gpm gpu=%u alloc failed\n", i);
    exit(1);
  }
  sample = nvmlGpmSampleGet(d, a);
  usleep(200000);
  if (sample == NVML_SUCCESS)
    sample = nvmlGpmSampleGet(d, b);
  g->version = NVML_GPM_METRICS_GET_VERSION;
  g->numMetrics = 1;
  g->sample1 = a;
  g->sample2 = b;
  g->metrics[0].metricId = NVML_GPM_METRIC_SM_OCCUPANCY;
  nvmlReturn_t mrc = nvmlGpmMetricsGet(g);
  printf("gpm gpu=%u rc=%d supported=%u sample=%d metrics=%d metric_rc=%d util=%.0f\n", i, (int)rc,
         sup.isSupportedDevice, (int)sample, (int)mrc, (int)g->metrics[0].nvmlReturn,
         g->metrics[0].value);
  nvmlGpmSampleFree(a);
  nvmlGpmSampleFree(b);
  free(g);
}

/* The list calls' documented protocol: the count first, then the handles. */
static nvmlReturn_t listed(nvmlDevice_t d, int near, unsigned *ret_n) {
  nvmlDevice_t all[64];
  unsigned n = 0;
  nvmlReturn_t rc = near ? nvmlDeviceGetTopologyNearestGpus(d, NVML_TOPOLOGY_SYSTEM, &n, NULL)
                         : nvmlSystemGetTopologyGpuSet(0, &n, NULL);
  if (rc == NVML_SUCCESS && n > 64)
    n = 64;
  if (rc == NVML_SUCCESS && n)
    rc = near ? nvmlDeviceGetTopologyNearestGpus(d, NVML_TOPOLOGY_SYSTEM, &n, all)
              : nvmlSystemGetTopologyGpuSet(0, &n, all);
  *ret_n = rc == NVML_SUCCESS ? n : 0;
  return rc;
}

static int topo(long stride) {
  nvmlDevice_t d, d1;
  unsigned count = 0, nn, ns, idx;
  nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
  if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS || count == 0 ||
      nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS)
    return 1;
  long s = count > 1 && nvmlDeviceGetHandleByIndex_v2(1, &d1) == NVML_SUCCESS
               ? (long)((char *)d1 - (char *)d)
               : 0;
  nvmlReturn_t rn = listed(d, 1, &nn), rs = listed(d, 0, &ns);
  nvmlReturn_t ra = nvmlDeviceGetTopologyCommonAncestor(d, d, &level);
  printf("topo stride=%ld nearest=%d:%u gpuset=%d:%u self=%d:%d\n", s, (int)rn, nn, (int)rs, ns,
         (int)ra, (int)level);
  if (!stride)
    return 0;
  if (nvmlDeviceGetHandleByIndex_v2(count - 1, &d) != NVML_SUCCESS)
    return 1;
  nvmlDevice_t f = (nvmlDevice_t)((char *)d - stride);
  nvmlGpuP2PStatus_t st;
  int board;
  unsigned n = 0;
  unsigned cur, pend, max;
  nvmlGpuInstance_t gis[8];
  printf("forged mig=%d max=%d mighandle=%d gis=%d gi=%d\n",
         (int)nvmlDeviceGetMigMode(f, &cur, &pend), (int)nvmlDeviceGetMaxMigDeviceCount(f, &max),
         (int)nvmlDeviceGetMigDeviceHandleByIndex(f, 0, &d1),
         (int)nvmlDeviceGetGpuInstances(f, 0, gis, &n),
         (int)nvmlDeviceGetGpuInstanceById(f, 1, gis));
  nvmlMemory_t mem;
  nvmlMemory_v2_t mem2 = {.version = nvmlMemory_v2};
  printf("forged mem=%d mem2=%d\n", (int)nvmlDeviceGetMemoryInfo(f, &mem),
         (int)nvmlDeviceGetMemoryInfo_v2(f, &mem2));
  nvmlUtilization_t u;
  nvmlValueType_t vt;
  nvmlFieldValue_t fv = {.fieldId = NVML_FI_DEV_MEMORY_TEMP};
  unsigned fps, lat, pids[4], tx;
  nvmlGpmSupport_t sup = {.version = NVML_GPM_SUPPORT_VERSION};
  nvmlReturn_t fr[8];
  n = 0;
  fr[0] = nvmlDeviceGetUtilizationRates(f, &u);
  fr[1] = nvmlDeviceGetComputeRunningProcesses_v3(f, &n, NULL);
  fr[2] = nvmlDeviceGetSamples(f, NVML_GPU_UTILIZATION_SAMPLES, 0, &vt, &n, NULL);
  n = 4;
  fr[3] = nvmlDeviceGetAccountingPids(f, &n, pids);
  fr[4] = nvmlDeviceGetFieldValues(f, 1, &fv);
  fr[5] = nvmlDeviceGetEncoderStats(f, &n, &fps, &lat);
  fr[6] = nvmlDeviceGetPcieThroughput(f, NVML_PCIE_UTIL_TX_BYTES, &tx);
  fr[7] = nvmlGpmQueryDeviceSupport(f, &sup);
  printf("forged util=%d procs=%d samples=%d acct=%d fields=%d enc=%d pcie=%d gpm=%d\n", (int)fr[0],
         (int)fr[1], (int)fr[2], (int)fr[3], (int)fr[4], (int)fr[5], (int)fr[6], (int)fr[7]);
  printf("forged index=%d ancestor=%d p2p=%d board=%d nearest=%d\n",
         (int)nvmlDeviceGetIndex(f, &idx), (int)nvmlDeviceGetTopologyCommonAncestor(d, f, &level),
         (int)nvmlDeviceGetP2PStatus(f, d, NVML_P2P_CAPS_INDEX_READ, &st),
         (int)nvmlDeviceOnSameBoard(d, f, &board),
         (int)nvmlDeviceGetTopologyNearestGpus(f, NVML_TOPOLOGY_SYSTEM, &n, NULL));
  return 0;
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
    encoder(d, i);
    engines(d, i);
    gpm(d, i);
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
  else if ((argc == 2 || argc == 3) && strcmp(argv[1], "topo") == 0)
    rc = topo(argc == 3 ? strtol(argv[2], NULL, 10) : 0);
  else if (argc == 1)
    rc = each_device(0);
  else {
    fprintf(stderr,
            "usage: nvml_leaks [ids | serial S | bus1 BUSID | stats PID | topo [STRIDE]]\n");
    rc = 2;
  }
  nvmlShutdown();
  return rc;
}
