/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's MIG queries, the R560 lookup by UUID, NVLink's far ends and the session lists, as a
 * slice's tools make them (docs/nvml.md, "MIG" and "Video engines, GPM, topology and MIG"),
 * printed for tests/integration/nvml_mig.sh; run with and without the hook:
 *   `nvml_mig mig [OFF]`: GPU 0 as shown, "mig mode=RC:CUR:PEND max=RC:N byindex=RC,RC,RC
 *     gis=RC:N gi1=RC gi9=RC ismig=RC:V util=RC"; then a MIG device handle, its first by index,
 *     else one forged OFF bytes past GPU 0's handle ("migoff=OFF" when got by index): "migdev
 *     got=index|forged|none ismig=RC:V index=RC:I mem=RC:TOTAL mem2=RC:TOTAL gi=RC:ID ci=RC:ID
 *     parent=RC procs=RC ancestor=RC" and "miglookup uuid=TEXT byuuid=RC byuuidv=RC
 *     byuuidvbin=RC" (its UUID, not wrapped, looked up again);
 *   `nvml_mig uuidv UUID`: "uuidv ascii=RC bin=RC badversion=RC badtype=RC unterminated=RC
 *     null=RC" (nvmlDeviceGetHandleByUUIDV of UUID, then its edge cases);
 *   `nvml_mig nvlink`: "nvlink link=L state=RC:V type=RC:T remote=RC:BUSID" for GPU 0's links
 *     0..6;
 *   `nvml_mig sessions`: "enc count=RC:N full=RC:N pids=P,..." and the same for "fbc" and
 *     "acct" (the accounting pids): the count call, then one with room for the count it gave. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "nvml_min.h"

static nvmlDevice_t gpu0(void) {
  nvmlDevice_t d = NULL;
  return nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS ? d : NULL;
}

static void mig_parent(nvmlDevice_t d) {
  unsigned cur = 9, pend = 9, max = 0, n = 0, is = 9;
  nvmlDevice_t h[3];
  nvmlGpuInstance_t gis[8], gi;
  nvmlUtilization_t u;
  nvmlReturn_t rc = nvmlDeviceGetMigMode(d, &cur, &pend);
  printf("mig mode=%d:%u:%u", (int)rc, cur, pend);
  rc = nvmlDeviceGetMaxMigDeviceCount(d, &max);
  printf(" max=%d:%u byindex=", (int)rc, max);
  for (unsigned i = 0; i < 3; i++)
    printf("%s%d", i ? "," : "", (int)nvmlDeviceGetMigDeviceHandleByIndex(d, i, &h[i]));
  rc = nvmlDeviceGetGpuInstances(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE, gis, &n);
  printf(" gis=%d:%u gi1=%d gi9=%d", (int)rc, n, (int)nvmlDeviceGetGpuInstanceById(d, 1, &gi),
         (int)nvmlDeviceGetGpuInstanceById(d, 9, &gi));
  rc = nvmlDeviceIsMigDeviceHandle(d, &is);
  printf(" ismig=%d:%u util=%d\n", (int)rc, is, (int)nvmlDeviceGetUtilizationRates(d, &u));
}

/* The UUID's 16 bytes from its text ("GPU-" or "MIG-" and 32 hex digits in 8-4-4-4-12). */
static int uuid_bytes(const char *text, unsigned char out[16]) {
  unsigned k = 0;
  for (const char *p = text + 4; *p && k < 32; p++) {
    if (*p == '-')
      continue;
    unsigned v;
    if (sscanf(p, "%1x", &v) != 1)
      return -1;
    out[k / 2] = (unsigned char)(k % 2 ? out[k / 2] | v : v << 4);
    k++;
  }
  return k == 32 ? 0 : -1;
}

static void lookups(const char *text, const char *prefix) {
  nvmlDevice_t got;
  nvmlUUID_t a = {.version = nvmlUUID_v1, .type = NVML_UUID_TYPE_ASCII};
  nvmlUUID_t b = {.version = nvmlUUID_v1, .type = NVML_UUID_TYPE_BINARY};
  snprintf(a.value.str, sizeof(a.value.str), "%s", text);
  int bin = uuid_bytes(text, b.value.bytes);
  printf("%s byuuid=%d byuuidv=%d byuuidvbin=%d", prefix,
         (int)nvmlDeviceGetHandleByUUID(text, &got), (int)nvmlDeviceGetHandleByUUIDV(&a, &got),
         bin < 0 ? -1 : (int)nvmlDeviceGetHandleByUUIDV(&b, &got));
}

static int mig(long off) {
  nvmlDevice_t d = gpu0(), m = NULL, parent = NULL;
  const char *got = "none";
  if (!d)
    return 1;
  mig_parent(d);
  if (nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &m) == NVML_SUCCESS) {
    got = "index";
    printf("migoff=%ld\n", (long)((char *)m - (char *)d));
  } else if (off) {
    got = "forged";
    m = (nvmlDevice_t)((char *)d + off);
  }
  if (!m) {
    printf("migdev got=none\n");
    return 0;
  }
  unsigned is = 9, idx = 99, gi = 99, ci = 99, n = 0;
  nvmlMemory_t mem = {0};
  nvmlMemory_v2_t mem2 = {.version = nvmlMemory_v2};
  nvmlGpuTopologyLevel_t level;
  /* Each call made before its outputs are read (argument order is unspecified). */
  int r_is = nvmlDeviceIsMigDeviceHandle(m, &is), r_idx = nvmlDeviceGetIndex(m, &idx);
  int r_mem = nvmlDeviceGetMemoryInfo(m, &mem), r_mem2 = nvmlDeviceGetMemoryInfo_v2(m, &mem2);
  int r_gi = nvmlDeviceGetGpuInstanceId(m, &gi), r_ci = nvmlDeviceGetComputeInstanceId(m, &ci);
  printf("migdev got=%s ismig=%d:%u index=%d:%u mem=%d:%llu mem2=%d:%llu gi=%d:%u ci=%d:%u", got,
         r_is, is, r_idx, idx, r_mem, mem.total, r_mem2, mem2.total, r_gi, gi, r_ci, ci);
  printf(" parent=%d", (int)nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m, &parent));
  printf(" procs=%d", (int)nvmlDeviceGetComputeRunningProcesses_v3(m, &n, NULL));
  printf(" ancestor=%d\n", (int)nvmlDeviceGetTopologyCommonAncestor(d, m, &level));
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
  nvmlDeviceGetUUID(m, text, sizeof(text));
  printf("miglookup uuid=%s", text);
  lookups(text, "");
  printf("\n");
  return 0;
}

static int uuidv(const char *text) {
  nvmlDevice_t got;
  nvmlUUID_t u = {.version = nvmlUUID_v1, .type = NVML_UUID_TYPE_ASCII};
  lookups(text, "uuidv");
  snprintf(u.value.str, sizeof(u.value.str), "%s", text);
  u.version = nvmlUUID_v1 + 1;
  printf(" badversion=%d", (int)nvmlDeviceGetHandleByUUIDV(&u, &got));
  u.version = nvmlUUID_v1;
  u.type = NVML_UUID_TYPE_NONE;
  printf(" badtype=%d", (int)nvmlDeviceGetHandleByUUIDV(&u, &got));
  u.type = NVML_UUID_TYPE_ASCII;
  memset(u.value.str, 'a', sizeof(u.value.str));
  printf(" unterminated=%d", (int)nvmlDeviceGetHandleByUUIDV(&u, &got));
  printf(" null=%d\n", (int)nvmlDeviceGetHandleByUUIDV(NULL, &got));
  return 0;
}

static int nvlink(void) {
  nvmlDevice_t d = gpu0();
  if (!d)
    return 1;
  for (unsigned l = 0; l < 7; l++) {
    nvmlEnableState_t on = 9;
    nvmlIntNvLinkDeviceType_t type = 99;
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof(pci));
    nvmlReturn_t s = nvmlDeviceGetNvLinkState(d, l, &on), t;
    t = nvmlDeviceGetNvLinkRemoteDeviceType(d, l, &type);
    nvmlReturn_t p = nvmlDeviceGetNvLinkRemotePciInfo_v2(d, l, &pci);
    printf("nvlink link=%u state=%d:%d type=%d:%d remote=%d:%s\n", l, (int)s, (int)on, (int)t,
           (int)type, (int)p, pci.busId[0] ? pci.busId : "-");
  }
  return 0;
}

/* One session list by its count protocol: the count, then a call with room for it. */
static void session_list(nvmlDevice_t d, int fbc) {
  unsigned n = 0;
  nvmlReturn_t rc =
      fbc ? nvmlDeviceGetFBCSessions(d, &n, NULL) : nvmlDeviceGetEncoderSessions(d, &n, NULL);
  printf("%s count=%d:%u", fbc ? "fbc" : "enc", (int)rc, n);
  unsigned room = n ? n : 1;
  nvmlEncoderSessionInfo_t *e = calloc(room, sizeof(*e));
  nvmlFBCSessionInfo_t *f = calloc(room, sizeof(*f));
  n = room;
  rc = fbc ? nvmlDeviceGetFBCSessions(d, &n, f) : nvmlDeviceGetEncoderSessions(d, &n, e);
  printf(" full=%d:%u pids=", (int)rc, n);
  for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++)
    printf("%s%u", i ? "," : "", fbc ? f[i].pid : e[i].pid);
  printf("\n");
  free(e);
  free(f);
}

/* The accounting pids by their count protocol: a count of 0, then room for what it said. */
static void accounting(nvmlDevice_t d) {
  unsigned n = 0, none[1];
  nvmlReturn_t rc = nvmlDeviceGetAccountingPids(d, &n, none);
  printf("acct count=%d:%u", (int)rc, n);
  unsigned room = n ? n : 1, *pids = calloc(room, sizeof(*pids));
  n = room;
  rc = nvmlDeviceGetAccountingPids(d, &n, pids);
  printf(" full=%d:%u pids=", (int)rc, n);
  for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++)
    printf("%s%u", i ? "," : "", pids[i]);
  printf("\n");
  free(pids);
}

int main(int argc, char **argv) {
  if (nvmlInit_v2() != NVML_SUCCESS) {
    fprintf(stderr, "nvml_mig: nvmlInit failed\n");
    return 1;
  }
  int rc = 0;
  nvmlDevice_t d;
  if ((argc == 2 || argc == 3) && strcmp(argv[1], "mig") == 0)
    rc = mig(argc == 3 ? strtol(argv[2], NULL, 10) : 0);
  else if (argc == 3 && strcmp(argv[1], "uuidv") == 0)
    rc = uuidv(argv[2]);
  else if (argc == 2 && strcmp(argv[1], "nvlink") == 0)
    rc = nvlink();
  else if (argc == 2 && strcmp(argv[1], "sessions") == 0 && (d = gpu0())) {
    session_list(d, 0);
    session_list(d, 1);
    accounting(d);
  } else {
    fprintf(stderr, "usage: nvml_mig [mig [OFF] | uuidv UUID | nvlink | sessions]\n");
    rc = 2;
  }
  nvmlShutdown();
  return rc;
}
