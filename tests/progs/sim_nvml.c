/* SPDX-License-Identifier: Apache-2.0 */
/* Prints what NVML says about every device (memory, utilization, compute processes),
 * one key=value line per device, for the sim's tests; works against a real NVML too.
 * `sim_nvml protocol` prints device 0's raw answers to nvmlDeviceGetProcessUtilization's
 * size call, a call one entry short, a full one, and one for samples after now.
 * `sim_nvml engines` prints device 0's answers to the video engine, GPM and MIG calls, and
 * `sim_nvml topo` the topology of devices 0 and 1, 0 and 2, each on its edge cases (docs/nvml.md,
 * "The sim"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml_min.h"

#define CK(call)                                                                                   \
  do {                                                                                             \
    nvmlReturn_t rc_ = (call);                                                                     \
    if (rc_ != NVML_SUCCESS) {                                                                     \
      fprintf(stderr, "FAIL %s -> %s\n", #call, nvmlErrorString(rc_));                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int protocol(void) {
  nvmlDevice_t d;
  CK(nvmlInit_v2());
  CK(nvmlDeviceGetHandleByIndex_v2(0, &d));
  unsigned need = 12345;
  nvmlReturn_t rc = nvmlDeviceGetProcessUtilization(d, NULL, &need, 0);
  printf("size rc=%d n=%u", (int)rc, need);
  nvmlProcessUtilizationSample_t *s = calloc(need + 1, sizeof(*s));
  if (!s)
    return 1;
  unsigned n = need ? need - 1 : 0;
  rc = nvmlDeviceGetProcessUtilization(d, s, &n, 0);
  printf(" short rc=%d n=%u", (int)rc, n);
  n = need;
  rc = nvmlDeviceGetProcessUtilization(d, s, &n, 0);
  printf(" full rc=%d n=%u", (int)rc, n);
  for (unsigned j = 0; rc == NVML_SUCCESS && j < n; j++)
    printf(" %u:%u", s[j].pid, s[j].smUtil);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long later = (unsigned long long)ts.tv_sec * 1000000ull + 1000000ull;
  n = need;
  rc = nvmlDeviceGetProcessUtilization(d, s, &n, later);
  printf(" future rc=%d n=%u\n", (int)rc, n);
  free(s);
  CK(nvmlShutdown());
  return 0;
}

static void engines_sessions(nvmlDevice_t d) {
  nvmlEncoderSessionInfo_t e[4];
  nvmlFBCSessionInfo_t f[4];
  nvmlFBCStats_t fs;
  unsigned n = 0, fps, lat;
  nvmlReturn_t rc = nvmlDeviceGetEncoderSessions(d, &n, NULL);
  printf("enc count rc=%d n=%u", (int)rc, n);
  n = 4;
  rc = nvmlDeviceGetEncoderSessions(d, &n, e);
  printf(" full rc=%d n=%u pid=%u %ux%u fps=%u lat=%u", (int)rc, n, n ? e[0].pid : 0,
         n ? e[0].hResolution : 0, n ? e[0].vResolution : 0, n ? e[0].averageFps : 0,
         n ? e[0].averageLatency : 0);
  printf(" null rc=%d", (int)nvmlDeviceGetEncoderSessions(d, NULL, e));
  rc = nvmlDeviceGetEncoderStats(d, &n, &fps, &lat);
  printf(" stats rc=%d n=%u fps=%u lat=%u\n", (int)rc, n, fps, lat);
  n = 0;
  rc = nvmlDeviceGetFBCSessions(d, &n, NULL);
  printf("fbc count rc=%d n=%u", (int)rc, n);
  n = 4;
  rc = nvmlDeviceGetFBCSessions(d, &n, f);
  printf(" full rc=%d n=%u pid=%u type=%d fps=%u lat=%u", (int)rc, n, n ? f[0].pid : 0,
         n ? (int)f[0].sessionType : -1, n ? f[0].averageFPS : 0, n ? f[0].averageLatency : 0);
  rc = nvmlDeviceGetFBCStats(d, &fs);
  printf(" stats rc=%d n=%u fps=%u lat=%u\n", (int)rc, fs.sessionsCount, fs.averageFPS,
         fs.averageLatency);
}

static void engines_util(nvmlDevice_t d) {
  unsigned u[4] = {0}, p[4] = {0}, cap = 0;
  nvmlReturn_t rc[4] = {nvmlDeviceGetEncoderUtilization(d, &u[0], &p[0]),
                        nvmlDeviceGetDecoderUtilization(d, &u[1], &p[1]),
                        nvmlDeviceGetJpgUtilization(d, &u[2], &p[2]),
                        nvmlDeviceGetOfaUtilization(d, &u[3], &p[3])};
  printf("util enc=%d:%u:%u dec=%d:%u jpg=%d:%u ofa=%d:%u", (int)rc[0], u[0], p[0], (int)rc[1],
         u[1], (int)rc[2], u[2], (int)rc[3], u[3]);
  nvmlReturn_t c = nvmlDeviceGetEncoderCapacity(d, NVML_ENCODER_QUERY_HEVC, &cap);
  printf(" cap=%d:%u badtype=%d\n", (int)c, cap,
         (int)nvmlDeviceGetEncoderCapacity(d, NVML_ENCODER_QUERY_UNKNOWN, &cap));
  unsigned tx = 0, rx = 0;
  c = nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_TX_BYTES, &tx);
  printf("pcie tx=%d:%s", (int)c, tx >= 9000 ? "busy" : "idle");
  c = nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_RX_BYTES, &rx);
  printf(" rx=%d:%s bad=%d\n", (int)c, rx >= 9000 ? "busy" : "idle",
         (int)nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_COUNT, &rx));
}

/* GPM over 200 ms: the version words, the samples' checks, a metric the sim has not. */
static int engines_gpm(nvmlDevice_t d) {
  nvmlGpmSupport_t bad = {.version = 2}, sup = {.version = NVML_GPM_SUPPORT_VERSION};
  nvmlGpmSample_t a, b;
  nvmlGpmMetricsGet_t *g = calloc(1, sizeof(*g));
  if (!g)
    return 1;
  printf("gpm support bad=%d", (int)nvmlGpmQueryDeviceSupport(d, &bad));
  nvmlReturn_t rc = nvmlGpmQueryDeviceSupport(d, &sup);
  printf(" rc=%d supported=%u", (int)rc, sup.isSupportedDevice);
  CK(nvmlGpmSampleAlloc(&a));
  CK(nvmlGpmSampleAlloc(&b));
  g->version = NVML_GPM_METRICS_GET_VERSION;
  g->numMetrics = 2;
  g->sample1 = a;
  g->sample2 = b;
  g->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
  g->metrics[1].metricId = 20; /* PCIe TX: not modelled */
  printf(" unfilled=%d mig=%d", (int)nvmlGpmMetricsGet(g), (int)nvmlGpmMigSampleGet(d, 0, a));
  CK(nvmlGpmSampleGet(d, a));
  usleep(200000);
  CK(nvmlGpmSampleGet(d, b));
  g->version = 2;
  printf(" badversion=%d", (int)nvmlGpmMetricsGet(g));
  g->version = NVML_GPM_METRICS_GET_VERSION;
  rc = nvmlGpmMetricsGet(g);
  printf(" metrics rc=%d sm=%d:%.0f pcie=%d", (int)rc, (int)g->metrics[0].nvmlReturn,
         g->metrics[0].value, (int)g->metrics[1].nvmlReturn);
  g->sample1 = b;
  g->sample2 = a;
  printf(" reversed=%d\n", (int)nvmlGpmMetricsGet(g));
  CK(nvmlGpmSampleFree(a));
  CK(nvmlGpmSampleFree(b));
  free(g);
  return 0;
}

static int engines(void) {
  nvmlDevice_t d, mig;
  nvmlGpuInstance_t gi[8];
  unsigned cur = 9, pend = 9, max = 0, n = 8;
  CK(nvmlInit_v2());
  CK(nvmlDeviceGetHandleByIndex_v2(0, &d));
  engines_sessions(d);
  engines_util(d);
  if (engines_gpm(d))
    return 1;
  nvmlReturn_t rc = nvmlDeviceGetMigMode(d, &cur, &pend);
  printf("mig mode=%d:%u:%u", (int)rc, cur, pend);
  rc = nvmlDeviceGetMaxMigDeviceCount(d, &max);
  printf(" max=%d:%u handle0=%d handle%u=%d gis=%d gi=%d\n", (int)rc, max,
         (int)nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig), max,
         (int)nvmlDeviceGetMigDeviceHandleByIndex(d, max, &mig),
         (int)nvmlDeviceGetGpuInstances(d, 0, gi, &n), (int)nvmlDeviceGetGpuInstanceById(d, 1, gi));
  CK(nvmlShutdown());
  return 0;
}

static int topo(void) {
  nvmlDevice_t d[3], out[4];
  nvmlGpuTopologyLevel_t l01, l02;
  nvmlGpuP2PStatus_t st;
  int same = -1;
  unsigned single = 0, host = 0, one = 1, set = 0;
  CK(nvmlInit_v2());
  for (unsigned i = 0; i < 3; i++)
    CK(nvmlDeviceGetHandleByIndex_v2(i, &d[i]));
  CK(nvmlDeviceGetTopologyCommonAncestor(d[0], d[1], &l01));
  CK(nvmlDeviceGetTopologyCommonAncestor(d[0], d[2], &l02));
  CK(nvmlDeviceGetTopologyNearestGpus(d[0], NVML_TOPOLOGY_SINGLE, &single, NULL));
  CK(nvmlDeviceGetTopologyNearestGpus(d[0], NVML_TOPOLOGY_HOSTBRIDGE, &host, NULL));
  CK(nvmlDeviceGetTopologyNearestGpus(d[0], NVML_TOPOLOGY_HOSTBRIDGE, &one, out));
  CK(nvmlSystemGetTopologyGpuSet(0, &set, NULL));
  printf("topo 01=%d 02=%d single=%u host=%u short=%u:%d set=%u", (int)l01, (int)l02, single, host,
         one, out[0] == d[1], set);
  printf(" badlevel=%d badcpu=%d", (int)nvmlDeviceGetTopologyNearestGpus(d[0], 15, &host, NULL),
         (int)nvmlSystemGetTopologyGpuSet(1u << 30, &set, NULL));
  nvmlReturn_t rc = nvmlDeviceGetP2PStatus(d[0], d[2], NVML_P2P_CAPS_INDEX_READ, &st);
  printf(" p2p=%d:%d badcaps=%d", (int)rc, (int)st,
         (int)nvmlDeviceGetP2PStatus(d[0], d[2], NVML_P2P_CAPS_INDEX_UNKNOWN, &st));
  CK(nvmlDeviceOnSameBoard(d[0], d[1], &same));
  printf(" board=%d\n", same);
  CK(nvmlShutdown());
  return 0;
}

int main(int argc, char **argv) {
  unsigned n;
  if (argc == 2 && strcmp(argv[1], "protocol") == 0)
    return protocol();
  if (argc == 2 && strcmp(argv[1], "engines") == 0)
    return engines();
  if (argc == 2 && strcmp(argv[1], "topo") == 0)
    return topo();
  CK(nvmlInit_v2());
  CK(nvmlDeviceGetCount_v2(&n));
  printf("devices=%u\n", n);
  for (unsigned i = 0; i < n; i++) {
    nvmlDevice_t d;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    nvmlMemory_t mem;
    nvmlMemory_v2_t mem2 = {.version = nvmlMemory_v2};
    nvmlUtilization_t u;
    CK(nvmlDeviceGetHandleByIndex_v2(i, &d));
    CK(nvmlDeviceGetName(d, name, sizeof(name)));
    CK(nvmlDeviceGetUUID(d, uuid, sizeof(uuid)));
    CK(nvmlDeviceGetMemoryInfo(d, &mem));
    CK(nvmlDeviceGetMemoryInfo_v2(d, &mem2));
    CK(nvmlDeviceGetUtilizationRates(d, &u));
    nvmlPciInfo_t pci;
    int major = 0, minor = 0;
    unsigned idx = 99;
    nvmlDevice_t again;
    CK(nvmlDeviceGetPciInfo_v3(d, &pci));
    CK(nvmlDeviceGetCudaComputeCapability(d, &major, &minor));
    CK(nvmlDeviceGetIndex(d, &idx));
    CK(nvmlDeviceGetHandleByUUID(uuid, &again));
    if (idx != i || again != d) {
      fprintf(stderr, "FAIL index/uuid lookup of device %u\n", i);
      return 1;
    }
    unsigned count = 0;
    nvmlReturn_t rc = nvmlDeviceGetComputeRunningProcesses_v3(d, &count, NULL);
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) {
      fprintf(stderr, "FAIL processes: %s\n", nvmlErrorString(rc));
      return 1;
    }
    nvmlProcessInfo_t *p = calloc(count + 1, sizeof(*p));
    count += 1;
    CK(nvmlDeviceGetComputeRunningProcesses_v3(d, &count, p));
    /* v1's used includes the driver's reservation; v2 gives it apart (used = allocations). */
    printf("dev=%u pci=%s cc=%d.%d uuid=%s used=%llu total=%llu free=%llu used_v2=%llu "
           "reserved_v2=%llu util=%u procs=%u",
           i, pci.busId, major, minor, uuid, mem.used, mem.total, mem.free, mem2.used,
           mem2.reserved, u.gpu, count);
    for (unsigned j = 0; j < count; j++)
      printf(" %u:%llu", p[j].pid, p[j].usedGpuMemory);
    /* Per-process SM utilization (lastSeenTimeStamp 0: all NVML keeps), by the documented
     * protocol: a size call with no buffer (NVML_ERROR_INSUFFICIENT_SIZE and the count to
     * allocate: NVML's sample buffer, not the number of processes), then the real call;
     * NVML_ERROR_NOT_FOUND means no process ran. */
    unsigned ns = 0;
    nvmlProcessUtilizationSample_t *samples = NULL;
    rc = nvmlDeviceGetProcessUtilization(d, NULL, &ns, 0);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      samples = calloc(ns ? ns : 1, sizeof(*samples));
      rc = samples ? nvmlDeviceGetProcessUtilization(d, samples, &ns, 0) : NVML_ERROR_MEMORY;
    } else if (rc == NVML_SUCCESS) {
      ns = 0; /* a size call cannot succeed: nothing was written */
    }
    printf(" sm=");
    if (rc == NVML_SUCCESS)
      for (unsigned j = 0; j < ns; j++)
        printf("%s%u:%u", j ? "," : "", samples[j].pid, samples[j].smUtil);
    else if (rc == NVML_ERROR_NOT_FOUND)
      printf("none");
    else
      printf("error:%s", nvmlErrorString(rc));
    free(samples);
    printf("\n");
    free(p);
  }
  CK(nvmlShutdown());
  return 0;
}
