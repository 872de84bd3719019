/* SPDX-License-Identifier: Apache-2.0 */
/* What a slice's process can do on its GPUs and with its copies, for hook_gpus.sh:
 *   devices      CUDA's count and each device's UUID, as the program sees them
 *   raw K        a context on CUDA device number K without cuDeviceGet (any int is a CUdevice),
 *                then a memset there: each call's result
 *   managed N    N cuMemcpy and N cuMemcpy2D (CU_MEMORYTYPE_UNIFIED) between two managed
 *                buffers attached to the host (CU_MEM_ATTACH_HOST), then waits for stdin to close
 *   race MS      once a line comes on stdin, a device-to-device cuMemcpy2D whose descriptor
 *                another thread turns into a device-to-host one MS ms after the call began; how
 *                long the call took, and where the bytes landed */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progs_common.h"

#define CK(call)                                                                                   \
  do {                                                                                             \
    if (progs_check("hook_gpus", (call), #call))                                                   \
      return 1;                                                                                    \
  } while (0)

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void uuid_text(const CUuuid *u, char *buf) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  sprintf(buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
          b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
          b[15]);
}

static int cmd_devices(void) {
  int n = -1;
  CK(cuInit(0));
  CUresult rc = cuDeviceGetCount(&n);
  printf("count rc=%d n=%d\n", (int)rc, n);
  for (int i = 0; i < n; i++) {
    CUdevice d;
    CUuuid u;
    char text[48];
    CK(cuDeviceGet(&d, i));
    CK(cuDeviceGetUuid_v2(&u, d));
    uuid_text(&u, text);
    printf("device %d uuid=%s\n", i, text);
  }
  return 0;
}

static int cmd_raw(int k) {
  CUdevice d = -1;
  CUcontext ctx = NULL, c2 = NULL;
  CUdeviceptr p = 0;
  CK(cuInit(0));
  printf("get rc=%d\n", (int)cuDeviceGet(&d, k));
  CUresult rc = cuDevicePrimaryCtxRetain(&ctx, (CUdevice)k);
  printf("retain rc=%d\n", (int)rc);
  printf("create rc=%d\n", (int)cuCtxCreate(&c2, NULL, 0, (CUdevice)k));
  if (rc == CUDA_SUCCESS) {
    CK(cuCtxSetCurrent(ctx));
    rc = cuMemAlloc(&p, 1 << 20);
    printf("alloc rc=%d\n", (int)rc);
    if (rc == CUDA_SUCCESS)
      printf("memset rc=%d\n", (int)cuMemsetD8(p, 1, 1 << 20));
  }
  return 0;
}

static int cmd_managed(int n) {
  CUdevice d;
  CUcontext ctx;
  CUdeviceptr a, b;
  unsigned type = 0, managed = 0;
  const size_t bytes = 1 << 20;
  CK(cuInit(0));
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, d));
  CK(cuCtxSetCurrent(ctx));
  CK(cuMemAllocManaged(&a, bytes, CU_MEM_ATTACH_HOST));
  CK(cuMemAllocManaged(&b, bytes, CU_MEM_ATTACH_HOST));
  CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
  CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
  printf("type=%s managed=%u\n", type == CU_MEMORYTYPE_HOST ? "host" : "device", managed);
  CUDA_MEMCPY2D desc = {.srcMemoryType = CU_MEMORYTYPE_UNIFIED,
                        .srcDevice = a,
                        .srcPitch = 4096,
                        .dstMemoryType = CU_MEMORYTYPE_UNIFIED,
                        .dstDevice = b,
                        .dstPitch = 4096,
                        .WidthInBytes = 4096,
                        .Height = bytes / 4096};
  for (int i = 0; i < n; i++) {
    CK(cuMemcpy(b, a, bytes));
    CK(cuMemcpy2D(&desc));
  }
  CK(cuCtxSynchronize());
  printf("copied %d\n", 2 * n);
  fflush(stdout);
  while (getchar() != EOF) {
  }
  return 0;
}

struct flip {
  CUDA_MEMCPY2D *desc;
  void *host;
  int after_ms;
};

static void *flipper(void *arg) {
  struct flip *f = arg;
  usleep((useconds_t)f->after_ms * 1000);
  volatile CUDA_MEMCPY2D *d = f->desc;
  d->dstHost = f->host;
  d->dstMemoryType = CU_MEMORYTYPE_HOST;
  return NULL;
}

/* The copy waits in the gate while the test holds the daemon stopped (no grant comes): the
 * flip falls in that wait, between the hook's look at the descriptor and the driver's read. */
static int cmd_race(int after_ms) {
  CUdevice d;
  CUcontext ctx;
  CUdeviceptr a, b;
  enum { N = 4096 };
  static unsigned char host[N], back[N];
  pthread_t t;
  CK(cuInit(0));
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, d));
  CK(cuCtxSetCurrent(ctx));
  CK(cuMemAlloc(&a, N));
  CK(cuMemAlloc(&b, N));
  CK(cuMemsetD8(a, 0xab, N));
  CK(cuMemsetD8(b, 0, N));
  CK(cuCtxSynchronize());
  printf("ready\n");
  fflush(stdout);
  while (getchar() != '\n') {
  }
  CUDA_MEMCPY2D desc = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                        .srcDevice = a,
                        .srcPitch = N,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                        .dstDevice = b,
                        .dstPitch = N,
                        .WidthInBytes = N,
                        .Height = 1};
  struct flip f = {&desc, host, after_ms};
  double t0 = mono_ms();
  if (pthread_create(&t, NULL, flipper, &f) != 0)
    return 1;
  CUresult rc = cuMemcpy2D(&desc);
  double waited = mono_ms() - t0;
  pthread_join(t, NULL);
  CK(cuCtxSynchronize());
  CK(cuMemcpyDtoH(back, b, N));
  printf("race rc=%d waited_ms=%.0f landed=%s\n", (int)rc, waited,
         back[0] == 0xab && host[0] != 0xab   ? "device"
         : host[0] == 0xab && back[0] != 0xab ? "host"
                                              : "nowhere");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "devices"))
    return cmd_devices();
  if (argc == 3 && !strcmp(argv[1], "raw"))
    return cmd_raw(atoi(argv[2]));
  if (argc == 3 && !strcmp(argv[1], "managed"))
    return cmd_managed(atoi(argv[2]));
  if (argc == 3 && !strcmp(argv[1], "race"))
    return cmd_race(atoi(argv[2]));
  fprintf(stderr, "usage: hook_gpus devices | raw K | managed N | race FLIP_MS\n");
  return 2;
}
