/* SPDX-License-Identifier: Apache-2.0 */
/* The NVML calls nvidia-smi makes for its default view, --query-gpu and --query-compute-apps
 * (docs/nvml.md), made the way it makes them (linked to libnvidia-ml.so.1, two-call process
 * lists), printed as key=value lines for the tests:
 *   devices=N
 *   gpu index=I uuid=U total=.. used=.. free=.. total2=.. used2=.. free2=.. reserved2=..
 *       util=P|na memutil=P|na temp=C power=mW fan=P|na
 *   list gpu=I compute=N compute_v1=N graphics=N mps=N short=RC:NEED detail=N:PID/BYTES,...
 *   proc gpu=I pid=P used=B name=NAME
 *   putil gpu=I pid=P sm=S        (or "putil gpu=I none rc=RC")
 *   putil2 gpu=I pid=P sm=S       (nvmlDeviceGetProcessesUtilizationInfo; or none rc=RC)
 * `nvml_smi bus BUSID` and `nvml_smi uuid UUID` print "bus rc=RC" / "uuid rc=RC" (-i's lookups).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "nvml_min.h"

#define CK(call)                                                                                   \
  do {                                                                                             \
    nvmlReturn_t rc_ = (call);                                                                     \
    if (rc_ != NVML_SUCCESS) {                                                                     \
      fprintf(stderr, "nvml_smi: %s -> %s\n", #call, nvmlErrorString(rc_));                        \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* "na" for NOT_SUPPORTED, as nvidia-smi prints N/A; the value otherwise. */
static void value(const char *key, nvmlReturn_t rc, unsigned v) {
  if (rc == NVML_SUCCESS)
    printf(" %s=%u", key, v);
  else if (rc == NVML_ERROR_NOT_SUPPORTED)
    printf(" %s=na", key);
  else
    printf(" %s=error%d", key, (int)rc);
}

static int device(unsigned i) {
  nvmlDevice_t d;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  nvmlMemory_t m;
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  nvmlUtilization_t u = {0, 0};
  unsigned temp = 0, power = 0, fan = 0, index = 99;
  CK(nvmlDeviceGetHandleByIndex_v2(i, &d));
  CK(nvmlDeviceGetIndex(d, &index));
  CK(nvmlDeviceGetName(d, name, sizeof(name)));
  CK(nvmlDeviceGetUUID(d, uuid, sizeof(uuid)));
  CK(nvmlDeviceGetMemoryInfo(d, &m));
  CK(nvmlDeviceGetMemoryInfo_v2(d, &m2));
  printf("gpu index=%u uuid=%s total=%llu used=%llu free=%llu total2=%llu used2=%llu free2=%llu "
         "reserved2=%llu",
         index, uuid, m.total, m.used, m.free, m2.total, m2.used, m2.free, m2.reserved);
  nvmlReturn_t rc = nvmlDeviceGetUtilizationRates(d, &u);
  value("util", rc, u.gpu);
  value("memutil", rc, u.memory);
  rc = nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &temp);
  value("temp", rc, temp); /* the call first: an argument's order of evaluation is the compiler's */
  rc = nvmlDeviceGetPowerUsage(d, &power);
  value("power", rc, power);
  rc = nvmlDeviceGetFanSpeed(d, &fan);
  value("fan", rc, fan);
  printf("\n");
  return 0;
}

/* A process list as nvidia-smi reads it: the count first (0 and NULL), then the entries. */
static int count_of(nvmlReturn_t (*fn)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *),
                    nvmlDevice_t d, unsigned *ret) {
  unsigned n = 0;
  nvmlReturn_t rc = fn(d, &n, NULL);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) {
    fprintf(stderr, "nvml_smi: process count -> %s\n", nvmlErrorString(rc));
    return 1;
  }
  *ret = rc == NVML_SUCCESS ? 0 : n;
  return 0;
}

static int processes(unsigned i) {
  nvmlDevice_t d;
  unsigned n, graphics, mps, n1 = 64;
  CK(nvmlDeviceGetHandleByIndex_v2(i, &d));
  if (count_of(nvmlDeviceGetComputeRunningProcesses_v3, d, &n) ||
      count_of(nvmlDeviceGetGraphicsRunningProcesses_v3, d, &graphics) ||
      count_of(nvmlDeviceGetMPSComputeRunningProcesses_v3, d, &mps))
    return 1;
  nvmlProcessInfo_t *p = calloc(n + 1, sizeof(*p));
  nvmlProcessInfo_v1_t v1[64];
  if (!p)
    return 1;
  unsigned short_n = n ? n - 1 : 0;
  nvmlReturn_t short_rc = n ? nvmlDeviceGetComputeRunningProcesses_v3(d, &short_n, p) : 0;
  unsigned got = n;
  CK(nvmlDeviceGetComputeRunningProcesses_v3(d, &got, p));
  CK(nvmlDeviceGetComputeRunningProcesses(d, &n1, v1));
  printf("list gpu=%u compute=%u compute_v1=%u graphics=%u mps=%u short=%d:%u", i, got, n1,
         graphics, mps, (int)short_rc, short_n);
  /* NVML 12.4's call for the same list: count, then entries; its pids in order. */
  nvmlProcessDetail_v1_t dp[64];
  nvmlProcessDetailList_t dl = {.version = nvmlProcessDetailList_v1,
                                .mode = NVML_PROCESS_MODE_COMPUTE};
  nvmlReturn_t drc = nvmlDeviceGetRunningProcessDetailList(d, &dl);
  unsigned dcount = dl.numProcArrayEntries;
  dl.procArray = dp;
  dl.numProcArrayEntries = 64;
  if ((drc == NVML_SUCCESS || drc == NVML_ERROR_INSUFFICIENT_SIZE) &&
      nvmlDeviceGetRunningProcessDetailList(d, &dl) == NVML_SUCCESS) {
    printf(" detail=%u:", dcount);
    for (unsigned j = 0; j < dl.numProcArrayEntries && j < 64; j++)
      printf("%s%u/%llu", j ? "," : "", dp[j].pid, dp[j].usedGpuMemory);
  } else {
    printf(" detail=error%d", (int)drc);
  }
  printf("\n");
  for (unsigned j = 0; j < got; j++) {
    char name[256] = "";
    if (nvmlSystemGetProcessName(p[j].pid, name, sizeof(name)) != NVML_SUCCESS)
      snprintf(name, sizeof(name), "?");
    char *slash = strrchr(name, '/');
    printf("proc gpu=%u pid=%u used=%llu name=%s\n", i, p[j].pid, p[j].usedGpuMemory,
           slash ? slash + 1 : name);
  }
  free(p);
  return 0;
}

/* nvidia-smi pmon's call: samples since a second ago, buffer sized by the size call. */
static int process_util(unsigned i) {
  nvmlDevice_t d;
  unsigned need = 0;
  CK(nvmlDeviceGetHandleByIndex_v2(i, &d));
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long since = (unsigned long long)ts.tv_sec * 1000000ull +
                             (unsigned long long)ts.tv_nsec / 1000 - 1000000ull;
  nvmlReturn_t rc = nvmlDeviceGetProcessUtilization(d, NULL, &need, since);
  nvmlProcessUtilizationSample_t *s =
      rc == NVML_ERROR_INSUFFICIENT_SIZE ? calloc(need, sizeof(*s)) : NULL;
  if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
    printf("putil gpu=%u none rc=%d\n", i, (int)rc);
  else
    rc = s ? nvmlDeviceGetProcessUtilization(d, s, &need, since) : NVML_ERROR_MEMORY;
  if (s && rc != NVML_SUCCESS)
    printf("putil gpu=%u none rc=%d\n", i, (int)rc);
  for (unsigned j = 0; rc == NVML_SUCCESS && j < need; j++)
    printf("putil gpu=%u pid=%u sm=%u\n", i, s[j].pid, s[j].smUtil);
  free(s);
  /* The newer call (the one Blackwell answers): count, then samples. */
  nvmlProcessUtilizationInfo_v1_t a[64];
  nvmlProcessesUtilizationInfo_t info = {.version = nvmlProcessesUtilizationInfo_v1,
                                         .lastSeenTimeStamp = since};
  rc = nvmlDeviceGetProcessesUtilizationInfo(d, &info);
  if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
    info.procUtilArray = a;
    info.processSamplesCount = 64;
    rc = nvmlDeviceGetProcessesUtilizationInfo(d, &info);
  }
  if (rc != NVML_SUCCESS)
    printf("putil2 gpu=%u none rc=%d\n", i, (int)rc);
  for (unsigned j = 0; rc == NVML_SUCCESS && j < info.processSamplesCount && j < 64; j++)
    printf("putil2 gpu=%u pid=%u sm=%u\n", i, a[j].pid, a[j].smUtil);
  return 0;
}

/* `nvml_smi bus BUSID` / `nvml_smi uuid UUID`: what looking a device up by it answers. */
static int lookup(const char *how, const char *key) {
  nvmlDevice_t d;
  CK(nvmlInit_v2());
  nvmlReturn_t rc = strcmp(how, "bus") == 0 ? nvmlDeviceGetHandleByPciBusId_v2(key, &d)
                                            : nvmlDeviceGetHandleByUUID(key, &d);
  printf("%s rc=%d\n", how, (int)rc);
  CK(nvmlShutdown());
  return 0;
}

int main(int argc, char **argv) {
  unsigned n;
  if (argc == 3)
    return lookup(argv[1], argv[2]);
  CK(nvmlInit_v2());
  CK(nvmlDeviceGetCount_v2(&n));
  printf("devices=%u\n", n);
  for (unsigned i = 0; i < n; i++)
    if (device(i) || processes(i) || process_util(i))
      return 1;
  CK(nvmlShutdown());
  return 0;
}
