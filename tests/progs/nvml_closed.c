/* SPDX-License-Identifier: Apache-2.0 */
/* NVML through the hook where it used to answer for the whole node (the fourth attack run of
 * 2026-12-02, docs/nvml.md), for tests/integration/nvml_closed.sh:
 *   nvml_closed hold N       N processes attached to the sim (cuInit), "held N" once they are;
 *                            they die with this one (the sim's 256 process slots filled)
 *   nvml_closed cuinit       "cuinit rc=RC" (CUDA's, no NVML)
 *   nvml_closed count [UUID] "count rc=RC n=N stride=S" (S: bytes between the handles of devices
 *                            0 and 1, 0 with one), "dev i=I uuid=U" per device listed,
 *                            "handle0 rc=RC", with UUID "byuuid rc=RC" (the lookup of it)
 *   nvml_closed samples      per device listed, the per-process samples' size calls and fill:
 *                            "samples gpu=I old=RC:N new=RC:N oldfill=RC:N newfill=RC:N"
 *   nvml_closed f9 [STRIDE]  GPU 0 as listed: "link1 l=L rc=RC bus=B" (the v1 NVLink far end,
 *                            links 0-5), "clocks reasons=RC:R throttle=RC:R", "cc rc=RC",
 *                            "events create=RC reg=RC wait=RC"; with STRIDE, a handle forged
 *                            STRIDE bytes below the last GPU's: "forged link1=RC clocks=RC
 *                            throttle=RC cc=RC reg=RC"
 *   nvml_closed null         every wrapped call on GPU 0 as listed with NULL outputs, one
 *                            "null NAME=RC" line each (a store through NULL crashes it). */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "nvml_min.h"

static int hold(int n) {
  int fds[2];
  if (pipe(fds) < 0)
    return 1;
  pid_t parent = getpid();
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p < 0)
      return 1;
    if (p == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent)
        _exit(0);
      char ok = cuInit(0) == CUDA_SUCCESS ? 'y' : 'n';
      if (write(fds[1], &ok, 1) != 1)
        _exit(1);
      pause();
      _exit(0);
    }
  }
  int held = 0;
  for (int i = 0; i < n; i++) {
    char c;
    if (read(fds[0], &c, 1) != 1)
      return 1;
    held += c == 'y';
  }
  printf("held %d\n", held);
  fflush(stdout);
  pause();
  return 0;
}

static int count(const char *uuid) {
  unsigned n = 0;
  nvmlDevice_t d, d1;
  nvmlReturn_t rc = nvmlDeviceGetCount_v2(&n);
  long stride = rc == NVML_SUCCESS && n > 1 &&
                        nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS &&
                        nvmlDeviceGetHandleByIndex_v2(1, &d1) == NVML_SUCCESS
                    ? (long)((char *)d1 - (char *)d)
                    : 0;
  printf("count rc=%d n=%u stride=%ld\n", (int)rc, n, stride);
  for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++) {
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
    if (nvmlDeviceGetHandleByIndex_v2(i, &d) == NVML_SUCCESS)
      nvmlDeviceGetUUID(d, text, sizeof(text));
    printf("dev i=%u uuid=%s\n", i, text);
  }
  printf("handle0 rc=%d\n", (int)nvmlDeviceGetHandleByIndex_v2(0, &d));
  if (uuid)
    printf("byuuid rc=%d\n", (int)nvmlDeviceGetHandleByUUID(uuid, &d));
  return 0;
}

/* The size calls as a tool makes them, then a fill with the room they said. */
static void samples_of(unsigned i, nvmlDevice_t d) {
  unsigned on = 0, fn;
  nvmlReturn_t orc = nvmlDeviceGetProcessUtilization(d, NULL, &on, 0);
  nvmlProcessesUtilizationInfo_t info = {.version = nvmlProcessesUtilizationInfo_v1};
  nvmlReturn_t nrc = nvmlDeviceGetProcessesUtilizationInfo(d, &info);
  unsigned nn = info.processSamplesCount;
  nvmlProcessUtilizationSample_t *os = calloc(on + 1, sizeof(*os));
  nvmlProcessUtilizationInfo_v1_t *ns = calloc(nn + 1, sizeof(*ns));
  fn = on;
  nvmlReturn_t ofill = nvmlDeviceGetProcessUtilization(d, os, &fn, 0);
  info.procUtilArray = ns;
  nvmlReturn_t nfill = nvmlDeviceGetProcessesUtilizationInfo(d, &info);
  printf("samples gpu=%u old=%d:%u new=%d:%u oldfill=%d:%u newfill=%d:%u\n", i, (int)orc, on,
         (int)nrc, nn, (int)ofill, ofill == NVML_SUCCESS ? fn : 0, (int)nfill,
         nfill == NVML_SUCCESS ? info.processSamplesCount : 0);
  free(os);
  free(ns);
}

static int samples(void) {
  unsigned n = 0;
  if (nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS)
    return 1;
  for (unsigned i = 0; i < n; i++) {
    nvmlDevice_t d;
    if (nvmlDeviceGetHandleByIndex_v2(i, &d) == NVML_SUCCESS)
      samples_of(i, d);
  }
  return 0;
}

static int f9(long stride) {
  nvmlDevice_t d, last;
  unsigned n = 0;
  if (nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS || n == 0 ||
      nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
      nvmlDeviceGetHandleByIndex_v2(n - 1, &last) != NVML_SUCCESS)
    return 1;
  for (unsigned l = 0; l < 6; l++) {
    nvmlPciInfo_t pci = {0};
    nvmlReturn_t rc = nvmlDeviceGetNvLinkRemotePciInfo(d, l, &pci);
    printf("link1 l=%u rc=%d bus=%s\n", l, (int)rc, pci.busId);
  }
  unsigned long long why = 99, thr = 99;
  nvmlReturn_t rw = nvmlDeviceGetCurrentClocksEventReasons(d, &why);
  nvmlReturn_t rt = nvmlDeviceGetCurrentClocksThrottleReasons(d, &thr);
  printf("clocks reasons=%d:%llu throttle=%d:%llu\n", (int)rw, why, (int)rt, thr);
  nvmlMemory_t m;
  printf("cc rc=%d\n", (int)nvmlDeviceGetConfComputeProtectedMemoryUsage(d, &m));
  nvmlEventSet_t set = NULL;
  nvmlEventData_t ev;
  nvmlReturn_t rcr = nvmlEventSetCreate(&set);
  nvmlReturn_t rreg = nvmlDeviceRegisterEvents(d, nvmlEventTypeXidCriticalError, set);
  nvmlReturn_t rwait = nvmlEventSetWait_v2(set, &ev, 50);
  printf("events create=%d reg=%d wait=%d\n", (int)rcr, (int)rreg, (int)rwait);
  if (stride) {
    nvmlDevice_t f = (nvmlDevice_t)((char *)last - stride);
    nvmlPciInfo_t pci;
    printf("forged link1=%d clocks=%d throttle=%d cc=%d reg=%d\n",
           (int)nvmlDeviceGetNvLinkRemotePciInfo(f, 0, &pci),
           (int)nvmlDeviceGetCurrentClocksEventReasons(f, &why),
           (int)nvmlDeviceGetCurrentClocksThrottleReasons(f, &thr),
           (int)nvmlDeviceGetConfComputeProtectedMemoryUsage(f, &m),
           (int)nvmlDeviceRegisterEvents(f, nvmlEventTypeXidCriticalError, set));
  }
  if (set)
    nvmlEventSetFree(set);
  return 0;
}

#define NULL_CALL(name, call) printf("null %s=%d\n", name, (int)(call))

/* The lookups and lists: NULL where the answer would go. */
static void null_lookups(nvmlDevice_t d) {
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "", serial[NVML_DEVICE_SERIAL_BUFFER_SIZE] = "";
  nvmlPciInfo_t pci = {0};
  nvmlDeviceGetUUID(d, uuid, sizeof(uuid));
  nvmlDeviceGetSerial(d, serial, sizeof(serial));
  nvmlDeviceGetPciInfo_v3(d, &pci);
  nvmlUUID_t u = {.version = nvmlUUID_v1, .type = NVML_UUID_TYPE_ASCII};
  snprintf(u.value.str, sizeof(u.value.str), "%s", uuid);
  NULL_CALL("count", nvmlDeviceGetCount_v2(NULL));
  NULL_CALL("count1", nvmlDeviceGetCount(NULL));
  NULL_CALL("handle", nvmlDeviceGetHandleByIndex_v2(0, NULL));
  NULL_CALL("handle1", nvmlDeviceGetHandleByIndex(0, NULL));
  NULL_CALL("index", nvmlDeviceGetIndex(d, NULL));
  NULL_CALL("byuuid", nvmlDeviceGetHandleByUUID(uuid, NULL));
  NULL_CALL("byuuidv", nvmlDeviceGetHandleByUUIDV(&u, NULL));
  NULL_CALL("byserial", nvmlDeviceGetHandleBySerial(serial, NULL));
  NULL_CALL("bybus", nvmlDeviceGetHandleByPciBusId_v2(pci.busId, NULL));
  NULL_CALL("bybus1", nvmlDeviceGetHandleByPciBusId(pci.busId, NULL));
  NULL_CALL("compute3", nvmlDeviceGetComputeRunningProcesses_v3(d, NULL, NULL));
  NULL_CALL("compute1", nvmlDeviceGetComputeRunningProcesses(d, NULL, NULL));
  NULL_CALL("graphics3", nvmlDeviceGetGraphicsRunningProcesses_v3(d, NULL, NULL));
  NULL_CALL("mps3", nvmlDeviceGetMPSComputeRunningProcesses_v3(d, NULL, NULL));
  NULL_CALL("detail", nvmlDeviceGetRunningProcessDetailList(d, NULL));
  NULL_CALL("putil", nvmlDeviceGetProcessUtilization(d, NULL, NULL, 0));
  NULL_CALL("putil2", nvmlDeviceGetProcessesUtilizationInfo(d, NULL));
  NULL_CALL("acct", nvmlDeviceGetAccountingPids(d, NULL, NULL));
  NULL_CALL("acctstats", nvmlDeviceGetAccountingStats(d, (unsigned)getpid(), NULL));
  NULL_CALL("enc", nvmlDeviceGetEncoderSessions(d, NULL, NULL));
  NULL_CALL("fbc", nvmlDeviceGetFBCSessions(d, NULL, NULL));
  NULL_CALL("nearest", nvmlDeviceGetTopologyNearestGpus(d, NVML_TOPOLOGY_SYSTEM, NULL, NULL));
  NULL_CALL("gpuset", nvmlSystemGetTopologyGpuSet(0, NULL, NULL));
  NULL_CALL("gis", nvmlDeviceGetGpuInstances(d, 0, NULL, NULL));
}

/* The per-device queries. */
static void null_queries(nvmlDevice_t d) {
  unsigned x;
  NULL_CALL("mem", nvmlDeviceGetMemoryInfo(d, NULL));
  NULL_CALL("mem2", nvmlDeviceGetMemoryInfo_v2(d, NULL));
  NULL_CALL("cc", nvmlDeviceGetConfComputeProtectedMemoryUsage(d, NULL));
  NULL_CALL("util", nvmlDeviceGetUtilizationRates(d, NULL));
  NULL_CALL("samples", nvmlDeviceGetSamples(d, NVML_GPU_UTILIZATION_SAMPLES, 0, NULL, NULL, NULL));
  NULL_CALL("fields", nvmlDeviceGetFieldValues(d, 1, NULL));
  NULL_CALL("encstats", nvmlDeviceGetEncoderStats(d, NULL, NULL, NULL));
  NULL_CALL("enccap", nvmlDeviceGetEncoderCapacity(d, NVML_ENCODER_QUERY_H264, NULL));
  NULL_CALL("encutil", nvmlDeviceGetEncoderUtilization(d, NULL, NULL));
  NULL_CALL("decutil", nvmlDeviceGetDecoderUtilization(d, NULL, &x));
  NULL_CALL("fbcstats", nvmlDeviceGetFBCStats(d, NULL));
  NULL_CALL("gpm", nvmlGpmQueryDeviceSupport(d, NULL));
  NULL_CALL("gpmmetrics", nvmlGpmMetricsGet(NULL));
  NULL_CALL("ancestor", nvmlDeviceGetTopologyCommonAncestor(d, d, NULL));
  NULL_CALL("p2p", nvmlDeviceGetP2PStatus(d, d, NVML_P2P_CAPS_INDEX_READ, NULL));
  NULL_CALL("board", nvmlDeviceOnSameBoard(d, d, NULL));
  NULL_CALL("mig", nvmlDeviceGetMigMode(d, NULL, NULL));
  NULL_CALL("maxmig", nvmlDeviceGetMaxMigDeviceCount(d, NULL));
  NULL_CALL("mighandle", nvmlDeviceGetMigDeviceHandleByIndex(d, 0, NULL));
  NULL_CALL("gi", nvmlDeviceGetGpuInstanceById(d, 1, NULL));
  NULL_CALL("ismig", nvmlDeviceIsMigDeviceHandle(d, NULL));
  NULL_CALL("parent", nvmlDeviceGetDeviceHandleFromMigDeviceHandle(d, NULL));
  NULL_CALL("giid", nvmlDeviceGetGpuInstanceId(d, NULL));
  NULL_CALL("ciid", nvmlDeviceGetComputeInstanceId(d, NULL));
  NULL_CALL("link", nvmlDeviceGetNvLinkRemotePciInfo_v2(d, 0, NULL));
  NULL_CALL("link1", nvmlDeviceGetNvLinkRemotePciInfo(d, 0, NULL));
  NULL_CALL("pcie", nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_TX_BYTES, NULL));
  NULL_CALL("clocks", nvmlDeviceGetCurrentClocksEventReasons(d, NULL));
  NULL_CALL("throttle", nvmlDeviceGetCurrentClocksThrottleReasons(d, NULL));
  NULL_CALL("events", nvmlDeviceRegisterEvents(d, nvmlEventTypeXidCriticalError, NULL));
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "hold") == 0)
    return hold(atoi(argv[2]));
  if (argc == 2 && strcmp(argv[1], "cuinit") == 0) {
    printf("cuinit rc=%d\n", (int)cuInit(0));
    return 0;
  }
  if (nvmlInit_v2() != NVML_SUCCESS) {
    fprintf(stderr, "nvml_closed: nvmlInit failed\n");
    return 1;
  }
  int rc = 0;
  nvmlDevice_t d;
  if ((argc == 2 || argc == 3) && strcmp(argv[1], "count") == 0)
    rc = count(argc == 3 ? argv[2] : NULL);
  else if (argc == 2 && strcmp(argv[1], "samples") == 0)
    rc = samples();
  else if ((argc == 2 || argc == 3) && strcmp(argv[1], "f9") == 0)
    rc = f9(argc == 3 ? strtol(argv[2], NULL, 10) : 0);
  else if (argc == 2 && strcmp(argv[1], "null") == 0) {
    rc = nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS ? 0 : 1;
    if (rc == 0) {
      null_lookups(d);
      null_queries(d);
    }
  } else {
    fprintf(stderr,
            "usage: nvml_closed hold N | cuinit | count [UUID] | samples | f9 [STRIDE] | null\n");
    rc = 2;
  }
  nvmlShutdown();
  return rc;
}
