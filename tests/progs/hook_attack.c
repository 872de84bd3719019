/* SPDX-License-Identifier: Apache-2.0 */
/* Ways a program could get device memory past the hook, one per command, for hook_attack.sh.
 * Each allocates 256 MiB chunks until the driver refuses (at most 12) and prints
 * "<cmd> n=<chunks> err=<CUresult>" on stdout; 0 chunks with err=-1 means the entry point was
 * not handed out at all.
 *
 * usage: hook_attack vmm-release-mapped | dlvsym | dlmopen | pool-other-device |
 *                    async-other-device | pool-destroy-held | accounting | many-pools |
 *                    forkstorm | wide-array | cancel
 *   vmm-release-mapped: cuMemCreate, map, cuMemRelease while mapped; then unmap everything and
 *                       fill again with cuMemAlloc ("after-unmap n=...").
 *   dlvsym:             cuMemAlloc_v2 found with dlvsym on libcuda.so.1 (glibc finds nothing
 *                       in a library with version information: n=0 err=-1).
 *   dlmopen:            cuMemAlloc_v2 from a second copy of libcuda.so.1 in a new link-map
 *                       namespace, where LD_PRELOAD does not reach.
 *   pool-other-device:  cuMemAllocFromPoolAsync from a pool on device 1 while device 0's context
 *                       is current (the pool may be on another device than the stream).
 *   async-other-device: cuMemAllocAsync on a stream of device 1's context while device 0's
 *                       context is current (memory comes from the stream's device's pool).
 *   many-pools:         64 pools each keep 2 MiB (allocated, freed, release threshold at the
 *                       maximum: the pool keeps it), then more pools each keep a chunk the same
 *                       way: "many-pools n=<chunks kept> err=<CUresult>".
 *   pool-destroy-held:  a pool is destroyed while one of its chunks is still allocated (the
 *                       driver keeps that memory until it is freed), over and over; then every
 *                       chunk is freed and the slice filled again with cuMemAlloc
 *                       ("after-free n=...").
 *   accounting:         double free, a free of a pointer never allocated, a free from another
 *                       thread, a free after the allocating context was destroyed, a primary
 *                       context reset with memory in it; then "accounting free=<cuMemGetInfo
 *                       free>" (the slice holds only the context) and a fill ("after n=...").
 *   forkstorm:          3 threads allocate and free through the hook while the main thread forks
 *                       60 children that each ask NVML's memory view (the hook's locks, the
 *                       region's) and exit: "forkstorm n=<children fine> err=<children not>";
 *                       a child stuck on a lock copied held dies of SIGALRM after 10 s.
 *   wide-array:         cuArrayCreate 2^62 texels wide, whose size wraps around 2^64
 *                       ("wide-array err=<CUresult>").
 *   cancel:             threads refused at the cap (the hook's slowest locked path) are
 *                       pthread_cancel'ed, 40 times; then the main thread still allocates and
 *                       frees ("cancel n=<rounds> err=<its CUresult>"). A thread cancelled inside
 *                       the hook's locks would leave them held and this would hang. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nvml_min.h"

#define CHUNK (256ull << 20)
#define MAX_CHUNKS 12

static void *lib;

static void *get(const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "hook_attack: dlsym %s failed\n", name);
    exit(2);
  }
  return p;
}

#define GET(name) ((__typeof__(&name))get(#name))

static void context(int ordinal) {
  CUdevice dev;
  CUcontext ctx;
  if (GET(cuInit)(0) != CUDA_SUCCESS || GET(cuDeviceGet)(&dev, ordinal) != CUDA_SUCCESS ||
      GET(cuDevicePrimaryCtxRetain)(&ctx, dev) != CUDA_SUCCESS ||
      GET(cuCtxSetCurrent)(ctx) != CUDA_SUCCESS) {
    fprintf(stderr, "hook_attack: no context\n");
    exit(2);
  }
}

static void fill_with(const char *what, __typeof__(&cuMemAlloc_v2) alloc) {
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  CUdeviceptr p;
  while (n < MAX_CHUNKS && (rc = alloc(&p, CHUNK)) == CUDA_SUCCESS)
    n++;
  printf("%s n=%d err=%d\n", what, n, rc);
}

static void vmm_release_mapped(void) {
  context(0);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUdeviceptr va[MAX_CHUNKS];
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  while (n < MAX_CHUNKS) {
    CUmemGenericAllocationHandle h;
    if ((rc = GET(cuMemCreate)(&h, CHUNK, &prop, 0)) != CUDA_SUCCESS)
      break;
    if (GET(cuMemAddressReserve)(&va[n], CHUNK, 0, 0, 0) != CUDA_SUCCESS ||
        GET(cuMemMap)(va[n], CHUNK, 0, h, 0) != CUDA_SUCCESS ||
        GET(cuMemRelease)(h) != CUDA_SUCCESS) {
      fprintf(stderr, "hook_attack: reserve/map/release failed\n");
      exit(2);
    }
    n++;
  }
  printf("vmm-release-mapped n=%d err=%d\n", n, rc);
  fflush(stdout);
  for (int i = 0; i < n; i++)
    if (GET(cuMemUnmap)(va[i], CHUNK) != CUDA_SUCCESS ||
        GET(cuMemAddressFree)(va[i], CHUNK) != CUDA_SUCCESS) {
      fprintf(stderr, "hook_attack: unmap failed\n");
      exit(2);
    }
  fill_with("after-unmap", GET(cuMemAlloc_v2));
}

static void by_dlvsym(void) {
  context(0);
  void *p = dlvsym(lib, "cuMemAlloc_v2", "GLIBC_2.2.5");
  if (!p) {
    printf("dlvsym n=0 err=-1\n");
    return;
  }
  fill_with("dlvsym", (__typeof__(&cuMemAlloc_v2))p);
}

static void by_dlmopen(void) {
  lib = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "hook_attack: dlmopen failed: %s\n", dlerror());
    exit(2);
  }
  void *alloc = dlsym(lib, "cuMemAlloc_v2");
  if (!alloc) {
    printf("dlmopen n=0 err=-1\n");
    return;
  }
  context(0);
  fill_with("dlmopen", (__typeof__(&cuMemAlloc_v2))alloc);
}

static void pool_other_device(void) {
  context(0);
  CUmemPoolProps props;
  memset(&props, 0, sizeof(props));
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  CUmemoryPool pool;
  if (GET(cuMemPoolCreate)(&pool, &props) != CUDA_SUCCESS) {
    fprintf(stderr, "hook_attack: cuMemPoolCreate failed\n");
    exit(2);
  }
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  CUdeviceptr p;
  while (n < MAX_CHUNKS &&
         (rc = GET(cuMemAllocFromPoolAsync)(&p, CHUNK, pool, NULL)) == CUDA_SUCCESS &&
         (rc = GET(cuStreamSynchronize)(NULL)) == CUDA_SUCCESS)
    n++;
  printf("pool-other-device n=%d err=%d\n", n, rc);
}

static void async_other_device(void) {
  context(0);
  CUcontext here, there;
  CUdevice dev1;
  CUstream stream;
  GET(cuCtxGetCurrent)(&here);
  if (GET(cuDeviceGet)(&dev1, 1) != CUDA_SUCCESS ||
      GET(cuCtxCreate_v4)(&there, NULL, 0, dev1) != CUDA_SUCCESS ||
      GET(cuStreamCreate)(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      GET(cuCtxSetCurrent)(here) != CUDA_SUCCESS) {
    fprintf(stderr, "hook_attack: no stream on device 1\n");
    exit(2);
  }
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  CUdeviceptr p;
  while (n < MAX_CHUNKS && (rc = GET(cuMemAllocAsync)(&p, CHUNK, stream)) == CUDA_SUCCESS &&
         (rc = GET(cuStreamSynchronize)(stream)) == CUDA_SUCCESS)
    n++;
  printf("async-other-device n=%d err=%d\n", n, rc);
}

static __typeof__(&cuMemAlloc_v2) cancel_alloc;
static CUcontext cancel_ctx;
static volatile int storm_over;

static void *churn(void *arg) {
  (void)arg;
  GET(cuCtxSetCurrent)(cancel_ctx);
  CUdeviceptr p;
  while (!storm_over)
    if (cancel_alloc(&p, 1 << 20) == CUDA_SUCCESS)
      GET(cuMemFree_v2)(p);
  return NULL;
}

static void forkstorm(void) {
  context(0);
  GET(cuCtxGetCurrent)(&cancel_ctx);
  cancel_alloc = GET(cuMemAlloc_v2);
  void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!nvml) {
    fprintf(stderr, "hook_attack: no libnvidia-ml.so.1\n");
    exit(2);
  }
  __typeof__(&nvmlInit_v2) init = (__typeof__(init))dlsym(nvml, "nvmlInit_v2");
  __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index =
      (__typeof__(by_index))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
  __typeof__(&nvmlDeviceGetMemoryInfo) meminfo =
      (__typeof__(meminfo))dlsym(nvml, "nvmlDeviceGetMemoryInfo");
  if (!init || !by_index || !meminfo || init() != NVML_SUCCESS) {
    fprintf(stderr, "hook_attack: NVML unusable\n");
    exit(2);
  }
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    pthread_create(&t[i], NULL, churn, NULL);
  int fine = 0, not_fine = 0;
  for (int i = 0; i < 60; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(10);
      nvmlDevice_t d;
      nvmlMemory_t m;
      _exit(by_index(0, &d) == NVML_SUCCESS && meminfo(d, &m) == NVML_SUCCESS ? 0 : 1);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      fine++;
    else
      not_fine++;
  }
  storm_over = 1;
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  printf("forkstorm n=%d err=%d\n", fine, not_fine);
}

static CUresult keep_in_new_pool(uint64_t bytes) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof(props));
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  cuuint64_t keep = UINT64_MAX;
  CUdeviceptr p;
  CUresult rc;
  if ((rc = GET(cuMemPoolCreate)(&pool, &props)) != CUDA_SUCCESS ||
      (rc = GET(cuMemPoolSetAttribute)(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep)) !=
          CUDA_SUCCESS ||
      (rc = GET(cuMemAllocFromPoolAsync)(&p, bytes, pool, NULL)) != CUDA_SUCCESS)
    return rc;
  if ((rc = GET(cuMemFreeAsync)(p, NULL)) != CUDA_SUCCESS)
    return rc;
  return GET(cuStreamSynchronize)(NULL);
}

static void pool_destroy_held(void) {
  context(0);
  CUdeviceptr kept[MAX_CHUNKS];
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  while (n < MAX_CHUNKS) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    if ((rc = GET(cuMemPoolCreate)(&pool, &props)) != CUDA_SUCCESS ||
        (rc = GET(cuMemAllocFromPoolAsync)(&kept[n], CHUNK, pool, NULL)) != CUDA_SUCCESS ||
        (rc = GET(cuStreamSynchronize)(NULL)) != CUDA_SUCCESS ||
        (rc = GET(cuMemPoolDestroy)(pool)) != CUDA_SUCCESS)
      break;
    n++;
  }
  printf("pool-destroy-held n=%d err=%d\n", n, rc);
  fflush(stdout);
  for (int i = 0; i < n; i++)
    if (GET(cuMemFreeAsync)(kept[i], NULL) != CUDA_SUCCESS) {
      fprintf(stderr, "hook_attack: free after the pool went failed\n");
      exit(2);
    }
  GET(cuStreamSynchronize)(NULL);
  fill_with("after-free", GET(cuMemAlloc_v2));
}

static CUdeviceptr thread_ptr;

static void *free_it(void *arg) {
  (void)arg;
  GET(cuMemFree_v2)(thread_ptr); /* no context current in this thread */
  return NULL;
}

static void accounting(void) {
  context(0);
  __typeof__(&cuMemAlloc_v2) alloc = GET(cuMemAlloc_v2);
  __typeof__(&cuMemFree_v2) mfree = GET(cuMemFree_v2);
  CUdeviceptr p, q;
  CUcontext primary, other;
  CUdevice dev;
  GET(cuCtxGetCurrent)(&primary);
  GET(cuDeviceGet)(&dev, 0);
  int bad = 0;
  /* Twice: the second is the driver's error, and gives nothing back. */
  bad |= alloc(&p, CHUNK) != CUDA_SUCCESS || mfree(p) != CUDA_SUCCESS || mfree(p) == CUDA_SUCCESS;
  bad |= mfree((CUdeviceptr)0xdead0000) == CUDA_SUCCESS;
  /* From another thread. */
  bad |= alloc(&thread_ptr, CHUNK) != CUDA_SUCCESS;
  pthread_t t;
  pthread_create(&t, NULL, free_it, NULL);
  pthread_join(t, NULL);
  /* After its context went (the driver freed it with the context). */
  bad |= GET(cuCtxCreate_v4)(&other, NULL, 0, dev) != CUDA_SUCCESS ||
         alloc(&q, CHUNK) != CUDA_SUCCESS || GET(cuCtxDestroy_v2)(other) != CUDA_SUCCESS;
  GET(cuCtxSetCurrent)(primary);
  bad |= mfree(q) == CUDA_SUCCESS;
  /* A reset of the primary context with memory in it, then the context again. */
  bad |= alloc(&p, CHUNK) != CUDA_SUCCESS || GET(cuDevicePrimaryCtxReset_v2)(dev) != CUDA_SUCCESS;
  bad |= GET(cuDevicePrimaryCtxRetain)(&primary, dev) != CUDA_SUCCESS ||
         GET(cuCtxSetCurrent)(primary) != CUDA_SUCCESS;
  bad |= mfree(p) == CUDA_SUCCESS;
  size_t f = 0, total = 0;
  GET(cuMemGetInfo_v2)(&f, &total);
  printf("accounting free=%zu bad=%d\n", f, bad);
  fill_with("after", alloc);
}

static void many_pools(void) {
  context(0);
  for (int i = 0; i < 64; i++)
    if (keep_in_new_pool(2 << 20) != CUDA_SUCCESS) {
      fprintf(stderr, "hook_attack: 64 small pools failed\n");
      exit(2);
    }
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  while (n < MAX_CHUNKS && (rc = keep_in_new_pool(CHUNK)) == CUDA_SUCCESS)
    n++;
  printf("many-pools n=%d err=%d\n", n, rc);
}

static void wide_array(void) {
  context(0);
  CUDA_ARRAY_DESCRIPTOR d = {
      .Width = 1ull << 62, .Height = 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
  CUarray a;
  printf("wide-array err=%d\n", GET(cuArrayCreate_v2)(&a, &d));
}

static void *refused_forever(void *arg) {
  (void)arg;
  GET(cuCtxSetCurrent)(cancel_ctx);
  CUdeviceptr p;
  for (;;)
    if (cancel_alloc(&p, CHUNK) == CUDA_SUCCESS)
      GET(cuMemFree_v2)(p);
  return NULL;
}

static void cancel_in_flight(void) {
  context(0);
  GET(cuCtxGetCurrent)(&cancel_ctx);
  cancel_alloc = GET(cuMemAlloc_v2);
  /* Fill the slice so that every further allocation takes the refusal path. */
  CUdeviceptr p;
  while (cancel_alloc(&p, CHUNK) == CUDA_SUCCESS)
    ;
  int rounds = 0;
  for (; rounds < 40; rounds++) {
    pthread_t t;
    if (pthread_create(&t, NULL, refused_forever, NULL) != 0)
      break;
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
    pthread_cancel(t);
    pthread_join(t, NULL);
  }
  /* Room for one more chunk, then one allocation that must go through. */
  GET(cuMemFree_v2)(p);
  CUresult rc = cancel_alloc(&p, 1 << 20);
  printf("cancel n=%d err=%d\n", rounds, rc);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: hook_attack "
                    "vmm-release-mapped|dlvsym|dlmopen|pool-other-device|async-other-device|wide-"
                    "array|cancel\n");
    return 2;
  }
  if (strcmp(argv[1], "dlmopen") == 0) {
    by_dlmopen();
    return 0;
  }
  lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "hook_attack: dlopen libcuda.so.1 failed\n");
    return 2;
  }
  if (strcmp(argv[1], "vmm-release-mapped") == 0)
    vmm_release_mapped();
  else if (strcmp(argv[1], "dlvsym") == 0)
    by_dlvsym();
  else if (strcmp(argv[1], "pool-other-device") == 0)
    pool_other_device();
  else if (strcmp(argv[1], "async-other-device") == 0)
    async_other_device();
  else if (strcmp(argv[1], "pool-destroy-held") == 0)
    pool_destroy_held();
  else if (strcmp(argv[1], "accounting") == 0)
    accounting();
  else if (strcmp(argv[1], "many-pools") == 0)
    many_pools();
  else if (strcmp(argv[1], "forkstorm") == 0)
    forkstorm();
  else if (strcmp(argv[1], "wide-array") == 0)
    wide_array();
  else if (strcmp(argv[1], "cancel") == 0)
    cancel_in_flight();
  else
    return 2;
  return 0;
}
