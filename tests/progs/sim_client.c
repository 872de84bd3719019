/* SPDX-License-Identifier: Apache-2.0 */
/* A CUDA driver API client used by the sim's tests and, unchanged, on a real GPU
 * (tests/gpu/run.sh): built linked with -lcuda, or (SIM_CLIENT_DLOPEN) resolving the
 * driver the way libcudart does: dlopen("libcuda.so.1") + cuGetProcAddress for all. */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Every entry point the client uses, by public name (one a line, kept out of
   clang-format, which folds a long X-macro list into a staircase). */
/* clang-format off */
#define API(X) \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuDeviceGetCount) \
  X(cuDeviceGet) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) \
  X(cuCtxSetCurrent) \
  X(cuCtxSynchronize) \
  X(cuMemAlloc) \
  X(cuMemAllocPitch) \
  X(cuMemFree) \
  X(cuMemGetInfo) \
  X(cuMemcpyHtoD) \
  X(cuMemcpyDtoH) \
  X(cuMemcpyDtoD) \
  X(cuMemsetD8) \
  X(cuMemsetD32) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoHAsync) \
  X(cuMemcpyDtoDAsync) \
  X(cuMemsetD32Async) \
  X(cuStreamCreate) \
  X(cuStreamSynchronize) \
  X(cuStreamDestroy) \
  X(cuEventCreate) \
  X(cuEventRecord) \
  X(cuEventSynchronize) \
  X(cuEventElapsedTime) \
  X(cuEventDestroy) \
  X(cuModuleLoadData) \
  X(cuModuleGetFunction) \
  X(cuModuleUnload) \
  X(cuLaunchKernel) \
  X(cuMemAllocAsync) \
  X(cuMemFreeAsync) \
  X(cuDeviceGetDefaultMemPool) \
  X(cuMemPoolGetAttribute) \
  X(cuMemPoolSetAttribute) \
  X(cuMemPoolTrimTo) \
  X(cuMemGetAllocationGranularity) \
  X(cuMemCreate) \
  X(cuMemRelease) \
  X(cuMemAddressReserve) \
  X(cuMemAddressFree) \
  X(cuMemMap) \
  X(cuMemUnmap) \
  X(cuMemSetAccess) \
  X(cuGetErrorName) \
  X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) \
  X(cuGraphInstantiate) \
  X(cuGraphLaunch) \
  X(cuGraphExecDestroy) \
  X(cuGraphDestroy) \
  X(cuStreamQuery)
/* clang-format on */

#define FIELD(name) __typeof__(name) *name;
static struct { API(FIELD) } cu;

static const char *mode_name;

static void resolve(void) {
#ifdef SIM_CLIENT_DLOPEN
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
    exit(2);
  }
  __typeof__(cuGetProcAddress_v2) *gpa =
      (__typeof__(cuGetProcAddress_v2) *)dlsym(lib, "cuGetProcAddress_v2");
  if (!gpa) {
    fprintf(stderr, "no cuGetProcAddress_v2 in libcuda.so.1\n");
    exit(2);
  }
  const char *v = getenv("SIM_CLIENT_CUDA_VERSION");
  int version = v ? atoi(v) : 12000;
  const char *pt = getenv("SIM_CLIENT_PER_THREAD");
  cuuint64_t flags = pt && *pt == '1' ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                      : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
  CUdriverProcAddressQueryResult st;
#define RESOLVE(name)                                                                              \
  if (gpa(#name, (void **)&cu.name, version, flags, &st) != CUDA_SUCCESS || !cu.name) {            \
    fprintf(stderr, "cuGetProcAddress(%s, %d) failed, status %d\n", #name, version, (int)st);      \
    exit(2);                                                                                       \
  }
  API(RESOLVE)
  mode_name = "cuGetProcAddress";
#else
#define ASSIGN(name) cu.name = name;
  API(ASSIGN)
  mode_name = "linked";
#endif
}

static void die_cu(CUresult rc, const char *what, int line) {
  const char *name = "?";
  if (cu.cuGetErrorName)
    cu.cuGetErrorName(rc, &name);
  fprintf(stderr, "FAIL [%s] line %d: %s -> %s (%d)\n", mode_name, line, what, name, (int)rc);
  exit(1);
}

#define CK(call)                                                                                   \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS)                                                                       \
      die_cu(rc_, #call, __LINE__);                                                                \
  } while (0)

#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL [%s] line %d: %s\n", mode_name, __LINE__, #cond);                      \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static CUcontext ctx;
static CUdevice dev;

static void setup(void) {
  resolve();
  CK(cu.cuInit(0));
  const char *d = getenv("SIM_CLIENT_DEVICE");
  CK(cu.cuDeviceGet(&dev, d ? atoi(d) : 0));
  CK(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cu.cuCtxSetCurrent(ctx));
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rbe");
  if (!f) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = calloc(1, (size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
    exit(2);
  fclose(f);
  return buf;
}

static CUfunction load_spin(const char *ptx_path, CUmodule *mod) {
  char *ptx = read_file(ptx_path);
  CUfunction f;
  CK(cu.cuModuleLoadData(mod, ptx));
  free(ptx);
  CK(cu.cuModuleGetFunction(&f, *mod, "spin"));
  return f;
}

static void launch_spin(CUfunction f, uint64_t us, CUstream s) {
  void *params[] = {&us};
  CK(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* basic PTX: init, devices, memory round trips, a spin kernel timed by events. */
static int cmd_basic(const char *ptx_path) {
  setup();
  int ver = 0, count = 0, sms = 0, major = 0, minor = 0;
  char name[128];
  size_t total = 0, free_b = 0;
  CK(cu.cuDriverGetVersion(&ver));
  CK(cu.cuDeviceGetCount(&count));
  CK(cu.cuDeviceGetName(name, sizeof(name), dev));
  CK(cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CK(cu.cuDeviceTotalMem(&total, dev));
  EXPECT(count >= 1 && sms > 0 && total > 0 && ver >= 12000);
  printf("[%s] driver %d, %d device(s); device 0: %s, sm_%d%d, %d SMs, %zu bytes\n", mode_name, ver,
         count, name, major, minor, sms, total);

  /* Memory: sync and async round trips through device memory. */
  enum { N = 1 << 20 };
  unsigned char *h = malloc(N), *back = malloc(N);
  for (int i = 0; i < N; i++)
    h[i] = (unsigned char)(i * 7 + 3);
  CUdeviceptr a, b;
  CK(cu.cuMemGetInfo(&free_b, &total));
  size_t free_before = free_b;
  CK(cu.cuMemAlloc(&a, N));
  CK(cu.cuMemAlloc(&b, N));
  EXPECT(a != b);
  CK(cu.cuMemGetInfo(&free_b, &total));
  EXPECT(free_b <= free_before - 2 * (size_t)N);
  CK(cu.cuMemcpyHtoD(a, h, N));
  CK(cu.cuMemcpyDtoD(b, a, N));
  memset(back, 0, N);
  CK(cu.cuMemcpyDtoH(back, b, N));
  EXPECT(memcmp(h, back, N) == 0);
  CK(cu.cuMemsetD8(a, 0x5a, N));
  CK(cu.cuMemcpyDtoH(back, a, N));
  EXPECT(back[0] == 0x5a && back[N - 1] == 0x5a);
  CK(cu.cuMemsetD32(a, 0x01020304u, N / 4));
  CK(cu.cuMemcpyDtoH(back, a, N));
  uint32_t w;
  memcpy(&w, back + N - 4, 4);
  EXPECT(w == 0x01020304u);
  CUstream s;
  CK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cu.cuMemcpyHtoDAsync(a, h, N, s));
  CK(cu.cuMemcpyDtoDAsync(b, a, N, s));
  CK(cu.cuMemsetD32Async(a, 0, N / 4, s));
  memset(back, 0, N);
  CK(cu.cuMemcpyDtoHAsync(back, b, N, s));
  CK(cu.cuStreamSynchronize(s));
  EXPECT(memcmp(h, back, N) == 0);
  CK(cu.cuMemFree(a));
  CK(cu.cuMemFree(b));
  printf("[%s] memory round trips ok\n", mode_name);

  /* Pitched allocation: rows padded to the device's pitch. */
  size_t pitch = 0;
  CK(cu.cuMemAllocPitch(&a, &pitch, 1000, 10, 4));
  EXPECT(pitch >= 1000);
  CK(cu.cuMemFree(a));

  /* Kernels: a 20 ms spin, timed with events on the device clock. */
  CUmodule mod;
  CUfunction spin = load_spin(ptx_path, &mod);
  CUevent e0, e1;
  CK(cu.cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cu.cuEventCreate(&e1, CU_EVENT_DEFAULT));
  launch_spin(spin, 1000, s); /* warm-up (JIT on a real GPU) */
  CK(cu.cuStreamSynchronize(s));
  CK(cu.cuEventRecord(e0, s));
  launch_spin(spin, 20000, s);
  CK(cu.cuEventRecord(e1, s));
  CK(cu.cuEventSynchronize(e1));
  float ms = 0;
  CK(cu.cuEventElapsedTime(&ms, e0, e1));
  printf("[%s] spin(20000us) took %.3f ms by events\n", mode_name, ms);
  /* At least the device time asked; the upper bound only catches unit mistakes (a
   * preempted host thread may launch late after its first event). */
  EXPECT(ms >= 19.9f && ms < 200.0f);

  /* The same on the default stream, in a captured graph run twice. */
  CUstream cs;
  CK(cu.cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
  CUgraph g;
  CUgraphExec ge;
  CUdeviceptr gbuf;
  uint32_t gword = 0;
  CK(cu.cuMemAlloc(&gbuf, 4096));
  CK(cu.cuMemsetD32(gbuf, 0, 1024));
  CK(cu.cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
  launch_spin(spin, 5000, cs);
  CK(cu.cuMemsetD32Async(gbuf, 0xABCD1234u, 1024, cs));
  launch_spin(spin, 5000, cs);
  CK(cu.cuStreamEndCapture(cs, &g));
  /* Captured work is recorded, not run. */
  CK(cu.cuMemcpyDtoH(&gword, gbuf, 4));
  EXPECT(gword == 0);
  CK(cu.cuGraphInstantiate(&ge, g, 0));
  CK(cu.cuEventRecord(e0, cs));
  CK(cu.cuGraphLaunch(ge, cs));
  CK(cu.cuGraphLaunch(ge, cs));
  CK(cu.cuEventRecord(e1, cs));
  CK(cu.cuStreamSynchronize(cs));
  CK(cu.cuEventElapsedTime(&ms, e0, e1));
  printf("[%s] graph of 2x spin(5000us) + memset, launched twice: %.3f ms\n", mode_name, ms);
  EXPECT(ms >= 19.9f && ms < 200.0f);
  CK(cu.cuMemcpyDtoH(&gword, gbuf, 4));
  EXPECT(gword == 0xABCD1234u);
  CK(cu.cuMemFree(gbuf));
  CK(cu.cuGraphExecDestroy(ge));
  CK(cu.cuGraphDestroy(g));
  CK(cu.cuStreamDestroy(cs));

  /* Default stream: launch then a synchronous copy waits for the kernel. */
  CK(cu.cuMemAlloc(&a, 4096));
  double t0 = mono_ms();
  launch_spin(spin, 10000, 0);
  CK(cu.cuMemcpyDtoH(back, a, 16));
  EXPECT(mono_ms() - t0 >= 9.9);
  EXPECT(cu.cuStreamQuery(0) == CUDA_SUCCESS);
  CK(cu.cuMemFree(a));

  CK(cu.cuEventDestroy(e0));
  CK(cu.cuEventDestroy(e1));
  CK(cu.cuModuleUnload(mod));
  CK(cu.cuStreamDestroy(s));
  CK(cu.cuDevicePrimaryCtxRelease(dev));
  free(h);
  free(back);
  printf("[%s] PASS basic\n", mode_name);
  return 0;
}

/* hold BYTES: allocate (0: just the context), say so, then wait to be killed. */
static int cmd_hold(const char *bytes) {
  setup();
  CUdeviceptr p;
  size_t n = strtoull(bytes, NULL, 0);
  if (n)
    CK(cu.cuMemAlloc(&p, n));
  printf("holding\n");
  fflush(stdout);
  for (;;)
    pause();
  return 0;
}

/* fill CHUNK: allocate chunks until the device says out of memory; print the total. */
static int cmd_fill(const char *chunk_s) {
  setup();
  size_t chunk = strtoull(chunk_s, NULL, 0), total = 0;
  CUdeviceptr p;
  CUresult rc;
  while ((rc = cu.cuMemAlloc(&p, chunk)) == CUDA_SUCCESS)
    total += chunk;
  EXPECT(rc == CUDA_ERROR_OUT_OF_MEMORY);
  size_t free_b, tot;
  CK(cu.cuMemGetInfo(&free_b, &tot));
  printf("allocated=%zu free=%zu total=%zu\n", total, free_b, tot);
  return 0;
}

/* spin PTX US COUNT [BYTES]: holding BYTES of device memory, COUNT spin kernels, an
 * event after each; prints each kernel's
 * run [end - US, end] in ms on a shared time base (host monotonic clock at a
 * synchronized reference event). The end event, not one recorded before the launch,
 * bounds the run: a kernel may wait for the device after its stream reached it. */
static int cmd_spin(const char *ptx_path, const char *us_s, const char *count_s,
                    const char *hold_s) {
  setup();
  size_t hold = hold_s ? strtoull(hold_s, NULL, 0) : 0;
  CUdeviceptr held = 0;
  if (hold)
    CK(cu.cuMemAlloc(&held, hold));
  uint64_t us = strtoull(us_s, NULL, 0);
  int count = atoi(count_s);
  CUmodule mod;
  CUfunction spin = load_spin(ptx_path, &mod);
  CUstream s;
  CK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent ref, *ev = calloc((size_t)count * 2, sizeof(CUevent));
  CK(cu.cuEventCreate(&ref, CU_EVENT_DEFAULT));
  for (int i = 0; i < 2 * count; i++)
    CK(cu.cuEventCreate(&ev[i], CU_EVENT_DEFAULT));
  /* The reference event completes between a and b on the host clock; retry until
   * nothing (a busy CPU) stretched that window, so the shared time base is good to
   * 0.2 ms whatever the load. */
  double before = 0, after = 1e9;
  for (int i = 0; i < 1000 && after - before > 0.2; i++) {
    before = mono_ms();
    CK(cu.cuEventRecord(ref, s));
    CK(cu.cuEventSynchronize(ref));
    after = mono_ms();
  }
  EXPECT(after - before <= 0.2);
  double base = before;
  for (int i = 0; i < count; i++) {
    CK(cu.cuEventRecord(ev[2 * i], s));
    launch_spin(spin, us, s);
    CK(cu.cuEventRecord(ev[2 * i + 1], s));
  }
  CK(cu.cuStreamSynchronize(s));
  double busy = 0;
  for (int i = 0; i < count; i++) {
    float a, b;
    CK(cu.cuEventElapsedTime(&a, ref, ev[2 * i]));
    CK(cu.cuEventElapsedTime(&b, ref, ev[2 * i + 1]));
    double run = (double)us / 1000.0;
    EXPECT(b - a >= run - 0.01);
    /* elapsed: between the events around it, the time it waited or was preempted too */
    printf("interval %.3f %.3f elapsed %.3f\n", base + b - run, base + b, b - a);
    busy += run;
  }
  printf("busy_ms %.3f\n", busy);
  if (held)
    CK(cu.cuMemFree(held));
  return 0;
}

/* pool: stream-ordered allocations grow the default pool; sync trims it to its
 * release threshold. Prints the pool's reservation and device free memory. */
static int cmd_pool(void) {
  setup();
  CUmemoryPool pool;
  CUstream s;
  CK(cu.cuDeviceGetDefaultMemPool(&pool, dev));
  CK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  cuuint64_t reserved = 0, used = 0, thr = 0;
  size_t free0, free1, total;
  CK(cu.cuMemGetInfo(&free0, &total));
  CUdeviceptr p;
  CK(cu.cuMemAllocAsync(&p, 64 << 20, s));
  CK(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  CK(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  CK(cu.cuMemGetInfo(&free1, &total));
  printf("after alloc: reserved=%llu used=%llu device_delta=%zu\n", (unsigned long long)reserved,
         (unsigned long long)used, free0 - free1);
  EXPECT(reserved >= (64u << 20) && used == (64u << 20) && free0 - free1 == reserved);
  CK(cu.cuMemFreeAsync(p, s));
  CK(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  printf("after free: reserved=%llu\n", (unsigned long long)reserved);
  EXPECT(reserved >= (64u << 20));
  CK(cu.cuStreamSynchronize(s));
  CK(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  CK(cu.cuMemGetInfo(&free1, &total));
  printf("after sync: reserved=%llu device_delta=%zu\n", (unsigned long long)reserved,
         free0 - free1);
  EXPECT(reserved == 0 && free1 == free0);
  /* A release threshold keeps memory reserved across synchronize. */
  thr = 32 << 20;
  CK(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  CK(cu.cuMemAllocAsync(&p, 64 << 20, s));
  CK(cu.cuMemFreeAsync(p, s));
  CK(cu.cuStreamSynchronize(s));
  CK(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  printf("threshold 32MiB, after sync: reserved=%llu\n", (unsigned long long)reserved);
  EXPECT(reserved >= (32u << 20) && reserved < (64u << 20));
  CK(cu.cuMemPoolTrimTo(pool, 0));
  CK(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  CK(cu.cuMemGetInfo(&free1, &total));
  EXPECT(reserved == 0 && free1 == free0);
  printf("PASS pool\n");
  return 0;
}

/* vmm: physical memory counts when created; reserved address space does not. */
static int cmd_vmm(void) {
  setup();
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0, free0, free1, total;
  CK(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t size = 16 * gran;
  CK(cu.cuMemGetInfo(&free0, &total));
  CUdeviceptr va;
  CK(cu.cuMemAddressReserve(&va, 4 * size, 0, 0, 0));
  CK(cu.cuMemGetInfo(&free1, &total));
  printf("reserve: device_delta=%zu\n", free0 - free1);
  EXPECT(free1 == free0);
  CUmemGenericAllocationHandle hnd;
  CK(cu.cuMemCreate(&hnd, size, &prop, 0));
  CK(cu.cuMemGetInfo(&free1, &total));
  printf("create: device_delta=%zu\n", free0 - free1);
  EXPECT(free0 - free1 == size);
  CK(cu.cuMemMap(va, size, 0, hnd, 0));
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof(acc));
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cu.cuMemSetAccess(va, size, &acc, 1));
  char hbuf[64] = "through a VMM mapping", back[64] = {0};
  CK(cu.cuMemcpyHtoD(va + gran, hbuf, sizeof(hbuf)));
  CK(cu.cuMemcpyDtoH(back, va + gran, sizeof(back)));
  EXPECT(strcmp(back, hbuf) == 0);
  /* Released while mapped: the memory lives until unmapped. */
  CK(cu.cuMemRelease(hnd));
  CK(cu.cuMemGetInfo(&free1, &total));
  EXPECT(free0 - free1 == size);
  CK(cu.cuMemUnmap(va, size));
  CK(cu.cuMemGetInfo(&free1, &total));
  printf("unmapped+released: device_delta=%zu\n", free0 - free1);
  EXPECT(free1 == free0);
  CK(cu.cuMemAddressFree(va, 4 * size));
  printf("PASS vmm\n");
  return 0;
}

#ifndef SIM_CLIENT_DLOPEN
#include <pthread.h>

static size_t dev_free(void) {
  size_t f, t;
  CK(cuMemGetInfo(&f, &t));
  return f;
}

static void *thread_main(void *arg) {
  CUcontext cur = (CUcontext)1;
  /* A new thread starts with no current context. */
  CK(cuCtxGetCurrent(&cur));
  EXPECT(cur == NULL);
  CK(cuCtxSetCurrent(ctx));
  CK(cuCtxGetCurrent(&cur));
  EXPECT(cur == ctx);
  return arg;
}

static double host_fn_ran_after = -1;
static void host_fn(void *arg) {
  host_fn_ran_after = mono_ms() - *(double *)arg;
}

/* misc PTX: single-process semantics checked linked against the driver. */
static int cmd_misc(const char *ptx_path) {
  setup();
  /* Freeing what was never allocated, or twice, is an invalid value. */
  CUdeviceptr p, base;
  size_t sz;
  EXPECT(cuMemFree((CUdeviceptr)0x1234) == CUDA_ERROR_INVALID_VALUE);
  CK(cuMemAlloc(&p, 1 << 20));
  CK(cuMemGetAddressRange(&base, &sz, p + 4096));
  EXPECT(base == p && sz == 1 << 20);
  unsigned mt = 0;
  CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 16));
  EXPECT(mt == CU_MEMORYTYPE_DEVICE);
  CK(cuMemFree(p));
  EXPECT(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE);
  printf("invalid frees refused\n");

  /* What counts: pitch x height, managed memory, arrays; all of it comes back. */
  size_t f0 = dev_free(), pitch;
  CK(cuMemAllocPitch(&p, &pitch, 1000, 100, 4));
  printf("pitch=%zu counted=%zu\n", pitch, f0 - dev_free());
  EXPECT(f0 - dev_free() >= pitch * 100);
  CK(cuMemFree(p));
  CK(cuMemAllocManaged(&p, 8 << 20, CU_MEM_ATTACH_GLOBAL));
  printf("managed counted=%zu\n", f0 - dev_free());
  CK(cuMemFree(p));
  CUDA_ARRAY_DESCRIPTOR ad = {
      .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
  CUarray arr;
  CK(cuArrayCreate(&arr, &ad));
  printf("array 1024x1024 float4 counted=%zu\n", f0 - dev_free());
  EXPECT(f0 - dev_free() >= (size_t)16 << 20);
  CK(cuArrayDestroy(arr));
  EXPECT(dev_free() == f0);

  /* A created context costs device memory while it lives. */
  CUcontext c2;
  CK(cuCtxCreate(&c2, NULL, 0, dev));
  size_t f1 = dev_free();
  printf("context counted=%zu\n", f0 - f1);
  EXPECT(f1 < f0);
  CK(cuCtxDestroy(c2));
  CK(cuCtxSetCurrent(ctx));
  EXPECT(dev_free() == f0);

  /* Every thread has its own current context. */
  pthread_t th;
  pthread_create(&th, NULL, thread_main, NULL);
  pthread_join(th, NULL);

  /* Streams: the legacy default stream waits for blocking streams, a non-blocking
   * one does not; queries see work in flight. */
  CUmodule mod;
  CUfunction spin = load_spin(ptx_path, &mod);
  CUstream blocking, nonblocking;
  CUevent ea, eb, en;
  CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&ea, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&eb, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&en, CU_EVENT_DISABLE_TIMING));
  launch_spin(spin, 1000, blocking);
  CK(cuCtxSynchronize());
  launch_spin(spin, 200000, blocking);
  CK(cuEventRecord(eb, nonblocking));
  CK(cuEventRecord(ea, CU_STREAM_LEGACY));
  EXPECT(cuStreamQuery(blocking) == CUDA_ERROR_NOT_READY);
  EXPECT(cuEventQuery(ea) == CUDA_ERROR_NOT_READY);
  float ms = 0;
  EXPECT(cuEventElapsedTime(&ms, eb, ea) == CUDA_ERROR_NOT_READY);
  CK(cuEventSynchronize(ea));
  CK(cuEventElapsedTime(&ms, eb, ea));
  printf("legacy stream waited %.3f ms for the blocking stream\n", ms);
  EXPECT(ms >= 199.0f);
  CK(cuEventRecord(en, blocking));
  CK(cuEventSynchronize(en));
  EXPECT(cuEventElapsedTime(&ms, ea, en) == CUDA_ERROR_INVALID_HANDLE);
  /* The per-thread default stream is a blocking stream too. */
  launch_spin(spin, 20000, CU_STREAM_PER_THREAD);
  CK(cuEventRecord(ea, CU_STREAM_PER_THREAD));
  CK(cuEventRecord(eb, nonblocking));
  CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  CK(cuEventElapsedTime(&ms, eb, ea));
  EXPECT(ms >= 19.0f);
  /* A host function runs after the stream's earlier work. */
  launch_spin(spin, 20000, blocking);
  double t0 = mono_ms();
  CK(cuLaunchHostFunc(blocking, host_fn, &t0));
  CK(cuStreamSynchronize(blocking));
  EXPECT(host_fn_ran_after >= 19.0);
  printf("PASS misc\n");
  return 0;
}

/* kernel-ms PTX NAME: device time of one launch of NAME (no parameters). */
static int cmd_kernel_ms(const char *ptx_path, const char *name) {
  setup();
  char *ptx = read_file(ptx_path);
  CUmodule mod;
  CUfunction fn;
  CK(cuModuleLoadData(&mod, ptx));
  free(ptx);
  CUresult rc = cuModuleGetFunction(&fn, mod, "no_such_kernel");
  EXPECT(rc == CUDA_ERROR_NOT_FOUND);
  CK(cuModuleGetFunction(&fn, mod, name));
  CUevent a, b;
  CK(cuEventCreate(&a, 0));
  CK(cuEventCreate(&b, 0));
  CK(cuEventRecord(a, 0));
  CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
  CK(cuEventRecord(b, 0));
  CK(cuEventSynchronize(b));
  float ms;
  CK(cuEventElapsedTime(&ms, a, b));
  printf("kernel_ms %.3f\n", ms);
  return 0;
}

static void *hold_thread(void *arg) {
  printf("holding\n");
  fflush(stdout);
  for (;;)
    pause();
  return arg;
}

/* hold-thread BYTES: allocate, then the main thread exits and another one holds on:
 * the process (and its memory) is alive though its leader is a zombie. */
static int cmd_hold_thread(const char *bytes) {
  setup();
  CUdeviceptr p;
  CK(cuMemAlloc(&p, strtoull(bytes, NULL, 0)));
  pthread_t th;
  pthread_create(&th, NULL, hold_thread, NULL);
  pthread_exit(NULL);
}

/* churn PTX: allocate, launch, copy, free and synchronize in a loop until killed:
 * something to SIGKILL at any instant, the machine lock included. */
static int cmd_churn(const char *ptx_path) {
  setup();
  CUmodule mod;
  CUfunction spin = load_spin(ptx_path, &mod);
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr keep;
  CK(cuMemAlloc(&keep, 64 << 20));
  printf("churning\n");
  fflush(stdout);
  unsigned seed = (unsigned)getpid();
  char host[4096];
  memset(host, 0x5a, sizeof(host));
  for (;;) {
    CUdeviceptr p, q;
    size_t n = 4096 + (size_t)(rand_r(&seed) % (8 << 20));
    if (cuMemAlloc(&p, n) == CUDA_SUCCESS) {
      CK(cuMemcpyHtoDAsync(p, host, sizeof(host), s));
      launch_spin(spin, (uint64_t)(rand_r(&seed) % 200), s);
      CK(cuMemAllocAsync(&q, 1 << 20, s));
      CK(cuMemFreeAsync(q, s));
      CK(cuStreamSynchronize(s));
      CK(cuMemFree(p));
    }
  }
  return 0;
}

/* ipc-export BYTES FILE: allocate, fill with a pattern, write the IPC handle to FILE,
 * then wait to be killed. */
static int cmd_ipc_export(const char *bytes_s, const char *file) {
  setup();
  size_t n = strtoull(bytes_s, NULL, 0);
  CUdeviceptr p;
  CK(cuMemAlloc(&p, n));
  CK(cuMemsetD32(p, 0xC0FFEE00u, n / 4));
  CUipcMemHandle h;
  CK(cuIpcGetMemHandle(&h, p));
  char tmp[512];
  snprintf(tmp, sizeof(tmp), "%s.tmp", file);
  FILE *f = fopen(tmp, "wbe");
  EXPECT(f && fwrite(&h, sizeof(h), 1, f) == 1);
  fclose(f);
  EXPECT(rename(tmp, file) == 0);
  printf("exported\n");
  for (;;)
    pause();
  return 0;
}

/* ipc-import FILE: open the handle, check the bytes, and that no memory was added. */
static int cmd_ipc_import(const char *file) {
  setup();
  CUipcMemHandle h;
  FILE *f = fopen(file, "rbe");
  EXPECT(f && fread(&h, sizeof(h), 1, f) == 1);
  fclose(f);
  size_t f0 = dev_free();
  CUdeviceptr p;
  CK(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  EXPECT(dev_free() == f0);
  uint32_t w[4];
  CK(cuMemcpyDtoH(w, p, sizeof(w)));
  EXPECT(w[0] == 0xC0FFEE00u && w[3] == 0xC0FFEE00u);
  CK(cuMemsetD32(p, 0x12345678u, 1));
  CK(cuIpcCloseMemHandle(p));
  printf("PASS ipc-import (no memory added)\n");
  return 0;
}

static void launch_spin_rc_expect_fail(CUfunction f) {
  uint64_t us = 1;
  void *params[] = {&us};
  EXPECT(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, params, NULL) != CUDA_SUCCESS);
}

/* Everything one context can own, and what belongs to no context (pool, VMM). */
struct owned {
  CUdeviceptr plain, pitched, managed, pooled;
  CUarray arr;
  CUmodule mod;
  CUfunction spin;
  CUevent ev;
  CUstream st;
  CUmemGenericAllocationHandle vmm;
  size_t vmm_size;
};

static void make_owned(const char *ptx_path, struct owned *o) {
  size_t pitch;
  CUdevice d;
  CK(cuCtxGetDevice(&d));
  CK(cuMemAlloc(&o->plain, 64 << 20));
  CK(cuMemAllocPitch(&o->pitched, &pitch, 1000, 1000, 4));
  CK(cuMemAllocManaged(&o->managed, 8 << 20, CU_MEM_ATTACH_GLOBAL));
  CUDA_ARRAY_DESCRIPTOR ad = {
      .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
  CK(cuArrayCreate(&o->arr, &ad));
  o->spin = load_spin(ptx_path, &o->mod);
  CK(cuEventCreate(&o->ev, 0));
  CK(cuStreamCreate(&o->st, CU_STREAM_NON_BLOCKING));
  CK(cuMemAllocAsync(&o->pooled, 4 << 20, o->st));
  CK(cuStreamSynchronize(o->st));
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = d;
  size_t gran;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  o->vmm_size = 4 * gran;
  CK(cuMemCreate(&o->vmm, o->vmm_size, &prop, 0));
}

/* After the context went (called in another, live context): its allocations are gone;
 * pool memory and the VMM handle were no context's and are still there to free. f0: the
 * device's free memory before the context's things were made. */
static void check_gone(struct owned *o, size_t f0, int stale) {
  EXPECT(cuMemFree(o->plain) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuMemFree(o->pitched) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuMemFree(o->managed) == CUDA_ERROR_INVALID_VALUE);
  char b[16];
  EXPECT(cuMemcpyDtoH(b, o->plain, sizeof(b)) != CUDA_SUCCESS);
  if (stale) {
    /* Using a destroyed object's handle is undefined on a GPU; the sim refuses it. */
    EXPECT(cuArrayDestroy(o->arr) == CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventDestroy(o->ev) == CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamDestroy(o->st) == CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuModuleUnload(o->mod) == CUDA_ERROR_INVALID_HANDLE);
    launch_spin_rc_expect_fail(o->spin);
  }
  CUmemoryPool pool;
  cuuint64_t reserved = 0;
  CK(cuDeviceGetDefaultMemPool(&pool, dev));
  CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  size_t f1 = dev_free();
  printf("context gone: device holds %zu more (pool %llu + vmm %zu)\n", f0 - f1,
         (unsigned long long)reserved, o->vmm_size);
  EXPECT(f0 - f1 == reserved + o->vmm_size);
  CK(cuMemFree(o->pooled));
  CK(cuMemRelease(o->vmm));
  CK(cuMemPoolTrimTo(pool, 0));
  EXPECT(dev_free() == f0);
}

struct other_thread {
  CUcontext ctx;
  pthread_barrier_t set, destroyed;
  CUresult alloc_rc;
};

static void *current_elsewhere(void *arg) {
  struct other_thread *t = arg;
  CK(cuCtxSetCurrent(t->ctx));
  pthread_barrier_wait(&t->set);
  pthread_barrier_wait(&t->destroyed);
  CUdeviceptr p;
  t->alloc_rc = cuMemAlloc(&p, 4096);
  return NULL;
}

/* teardown PTX [stale]: what goes with a context — at cuCtxDestroy, at the last
 * cuDevicePrimaryCtxRelease and at cuDevicePrimaryCtxReset — and what stays; a destroyed
 * context still current elsewhere says CUDA_ERROR_CONTEXT_IS_DESTROYED. With "stale",
 * also the handles of destroyed objects (undefined on a GPU, refused by the sim). */
static int cmd_teardown(const char *ptx_path, int stale) {
  setup();
  size_t f0 = dev_free();
  struct owned o;

  /* cuCtxCreate + cuCtxDestroy, with work queued and the context current in a thread. */
  CUcontext c2;
  CK(cuCtxCreate(&c2, NULL, 0, dev));
  make_owned(ptx_path, &o);
  struct other_thread t = {.ctx = c2};
  pthread_t th;
  pthread_barrier_init(&t.set, NULL, 2);
  pthread_barrier_init(&t.destroyed, NULL, 2);
  pthread_create(&th, NULL, current_elsewhere, &t);
  pthread_barrier_wait(&t.set);
  launch_spin(o.spin, 50000, o.st);
  double t0 = mono_ms();
  CK(cuCtxDestroy(c2));
  /* The context's queued work ran to its end first. */
  EXPECT(mono_ms() - t0 >= 49.0);
  pthread_barrier_wait(&t.destroyed);
  pthread_join(th, NULL);
  printf("cuMemAlloc in a thread where the destroyed context is current: %d\n", t.alloc_rc);
  EXPECT(t.alloc_rc == CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUcontext cur;
  CK(cuCtxGetCurrent(&cur));
  EXPECT(cur == ctx); /* popped: the primary context is current again */
  check_gone(&o, f0, stale);
  printf("cuCtxDestroy ok\n");

  /* The primary context released to zero: destroyed, but not popped. */
  make_owned(ptx_path, &o);
  CK(cuDevicePrimaryCtxRelease(dev));
  unsigned flags;
  int active = 1;
  CK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  EXPECT(!active);
  CUdeviceptr p;
  EXPECT(cuMemAlloc(&p, 4096) == CUDA_ERROR_CONTEXT_IS_DESTROYED);
  size_t fr, tot;
  EXPECT(cuMemGetInfo(&fr, &tot) == CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  check_gone(&o, f0, stale);
  printf("last cuDevicePrimaryCtxRelease ok\n");

  /* cuDevicePrimaryCtxReset: the same, whatever the retain count, which it leaves for the
   * retainers to give back. */
  make_owned(ptx_path, &o);
  CK(cuDevicePrimaryCtxReset(dev));
  CK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  EXPECT(!active);
  EXPECT(cuMemAlloc(&p, 4096) == CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CK(cuDevicePrimaryCtxRetain(&ctx, dev)); /* alive again; two retains to give back */
  CK(cuCtxSetCurrent(ctx));
  check_gone(&o, f0, stale);
  CK(cuDevicePrimaryCtxRelease(dev));
  CK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  EXPECT(active);
  printf("cuDevicePrimaryCtxReset ok\n");

  if (stale) {
    /* Destroyed while deeper in this thread's stack: it stays there, and surfaces dead. */
    CK(cuCtxCreate(&c2, NULL, 0, dev)); /* pushed: stack is ctx, c2 */
    CK(cuCtxPushCurrent(ctx));          /* ctx, c2, ctx */
    CK(cuCtxDestroy(c2));               /* not current: not popped */
    CUcontext popped;
    CK(cuCtxPopCurrent(&popped));
    EXPECT(cuMemAlloc(&p, 4096) == CUDA_ERROR_CONTEXT_IS_DESTROYED);
    EXPECT(cuEventCreate(&o.ev, 0) == CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CK(cuCtxPopCurrent(&popped));
    EXPECT(popped == c2);
    CK(cuCtxGetCurrent(&cur));
    EXPECT(cur == ctx);
    /* Destroying twice, freeing twice. */
    EXPECT(cuCtxDestroy(c2) == CUDA_ERROR_INVALID_CONTEXT);
    CK(cuMemAlloc(&p, 4096));
    CK(cuMemFree(p));
    EXPECT(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE);
  }
  CK(cuDevicePrimaryCtxRelease(dev));
  EXPECT(cuDevicePrimaryCtxRelease(dev) == CUDA_ERROR_INVALID_CONTEXT);
  printf("PASS teardown\n");
  return 0;
}

/* errors: refusals the hook's wrappers pass through and rely on, for calls a GPU refuses:
 * before cuInit, without a context, twice, on handles already gone, outside a reservation.
 * (Handles already gone are undefined on a GPU; the sim refuses them, never crashes.) */
static int cmd_errors(void) {
  resolve();
  CUdeviceptr p;
  int n;
  CUcontext cur;
  int ver = 0;
  EXPECT(cuMemAlloc(&p, 4096) == CUDA_ERROR_NOT_INITIALIZED);
  EXPECT(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
  EXPECT(cuCtxGetCurrent(&cur) == CUDA_ERROR_NOT_INITIALIZED);
  EXPECT(cuMemFree(0x1000) == CUDA_ERROR_NOT_INITIALIZED);
  CK(cuDriverGetVersion(&ver));
  EXPECT(cuInit(1) == CUDA_ERROR_INVALID_VALUE);
  CK(cuInit(0));

  /* No context current. */
  CUstream st;
  CUevent ev;
  size_t fr, tot;
  EXPECT(cuMemAlloc(&p, 4096) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuMemGetInfo(&fr, &tot) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuStreamCreate(&st, 0) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuEventCreate(&ev, 0) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuCtxSynchronize() == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuStreamSynchronize(0) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuMemAllocAsync(&p, 4096, 0) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuCtxPopCurrent(&cur) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuDevicePrimaryCtxRelease(0) == CUDA_ERROR_INVALID_CONTEXT); /* never retained */

  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  size_t f0 = dev_free();

  /* Twice. */
  CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CK(cuMemAllocAsync(&p, 1 << 20, st));
  CK(cuMemFreeAsync(p, st));
  EXPECT(cuMemFreeAsync(p, st) == CUDA_ERROR_INVALID_VALUE);
  CK(cuStreamDestroy(st));
  EXPECT(cuStreamDestroy(st) == CUDA_ERROR_INVALID_HANDLE);
  EXPECT(cuStreamSynchronize(st) == CUDA_ERROR_INVALID_HANDLE);
  CK(cuEventCreate(&ev, 0));
  CK(cuEventDestroy(ev));
  EXPECT(cuEventDestroy(ev) == CUDA_ERROR_INVALID_HANDLE);
  EXPECT(cuEventRecord(ev, 0) == CUDA_ERROR_INVALID_HANDLE);
  CUDA_ARRAY_DESCRIPTOR ad = {
      .Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
  CUarray arr;
  CK(cuArrayCreate(&arr, &ad));
  CK(cuArrayDestroy(arr));
  EXPECT(cuArrayDestroy(arr) == CUDA_ERROR_INVALID_HANDLE);
  CUgraph g;
  CUgraphExec ge;
  CK(cuGraphCreate(&g, 0));
  CK(cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(cuGraphExecDestroy(ge));
  EXPECT(cuGraphExecDestroy(ge) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuGraphLaunch(ge, 0) == CUDA_ERROR_INVALID_VALUE);
  CK(cuGraphDestroy(g));
  EXPECT(cuGraphDestroy(g) == CUDA_ERROR_INVALID_VALUE);
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof(pp));
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pp.location.id = dev;
  CUmemoryPool pool;
  CK(cuMemPoolCreate(&pool, &pp));
  CK(cuMemPoolDestroy(pool));
  EXPECT(cuMemPoolDestroy(pool) == CUDA_ERROR_INVALID_VALUE);

  static char host[1 << 23];
  /* An event records only on a stream of its own context (cuda.h, cuEventRecord); memory
   * says which context it was allocated in. */
  CUcontext c2, owner = NULL, popped;
  CUdeviceptr p2;
  CK(cuCtxCreate(&c2, NULL, 0, dev));
  CK(cuMemAlloc(&p2, 4096));
  CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p2));
  EXPECT(owner == c2);
  CK(cuEventCreate(&ev, 0));
  CK(cuEventRecord(ev, 0));
  void *hp;
  CK(cuMemAllocHost(&hp, 4096));
  memset(hp, 1, 4096);
  CK(cuMemFreeHost(hp));
  EXPECT(cuMemFreeHost(hp) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuMemFreeHost(host) == CUDA_ERROR_INVALID_VALUE);
  CK(cuMemAllocHost(&hp, 4096)); /* goes with c2 */
  CK(cuCtxPopCurrent(&popped));
  EXPECT(popped == c2);
  EXPECT(cuEventRecord(ev, 0) == CUDA_ERROR_INVALID_HANDLE);
  CK(cuCtxDestroy(c2));
  CK(cuCtxGetCurrent(&cur));
  EXPECT(cur == ctx);
  EXPECT(cuMemFreeHost(hp) == CUDA_ERROR_INVALID_VALUE); /* went with c2 */

  /* VMM: released twice; mapped outside a reservation, over a mapping; freed unreserved. */
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  CK(cuMemCreate(&h, 2 * gran, &prop, 0));
  CK(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
  CUdeviceptr outside = ((CUdeviceptr)(uintptr_t)host + gran - 1) / gran * gran;
  EXPECT(cuMemMap(outside, gran, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuMemMap(va + 3 * gran, 2 * gran, 0, h, 0) == CUDA_ERROR_INVALID_VALUE); /* past it */
  CK(cuMemMap(va, 2 * gran, 0, h, 0));
  EXPECT(cuMemMap(va + gran, gran, 0, h, 0) == CUDA_ERROR_INVALID_VALUE); /* over a mapping */
  EXPECT(cuMemAddressFree(va, 4 * gran) == CUDA_ERROR_INVALID_VALUE);     /* still mapped */
  CK(cuMemUnmap(va, 2 * gran));
  EXPECT(cuMemUnmap(va, 2 * gran) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuMemAddressFree(va, 2 * gran) == CUDA_ERROR_INVALID_VALUE); /* not as reserved */
  EXPECT(cuMemAddressFree(outside, gran) == CUDA_ERROR_INVALID_VALUE);
  CK(cuMemAddressFree(va, 4 * gran));
  EXPECT(cuMemAddressFree(va, 4 * gran) == CUDA_ERROR_INVALID_VALUE);
  CK(cuMemRelease(h));
  EXPECT(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
  host[0] = 1;            /* still ours: nothing was mapped over it */
  CK(cuCtxSynchronize()); /* the default pool trims what the async allocation reserved */
  EXPECT(dev_free() == f0);
  CK(cuDevicePrimaryCtxRelease(dev));
  printf("PASS errors\n");
  return 0;
}

/* devices: what cuInit and the device queries say (CUDA_VISIBLE_DEVICES applied). */
static int cmd_devices(void) {
  resolve();
  CUresult rc = cuInit(0);
  if (rc != CUDA_SUCCESS) {
    int n = -1;
    printf("init err=%d count_err=%d\n", rc, cuDeviceGetCount(&n));
    return 0;
  }
  int n = 0;
  CK(cuDeviceGetCount(&n));
  printf("count=%d\n", n);
  for (int i = 0; i < n; i++) {
    CUdevice d;
    CUuuid u;
    char bus[32];
    CK(cuDeviceGet(&d, i));
    CK(cuDeviceGetUuid(&u, d));
    CK(cuDeviceGetPCIBusId(bus, sizeof(bus), d));
    CUdevice back = -1;
    CK(cuDeviceGetByPCIBusId(&back, bus));
    EXPECT(back == d);
    const unsigned char *b = (const unsigned char *)u.bytes;
    printf(
        "device %d uuid=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x "
        "bus=%s\n",
        i, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15], bus);
  }
  CUdevice d;
  EXPECT(cuDeviceGet(&d, n) == CUDA_ERROR_INVALID_DEVICE);
  return 0;
}
#endif

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "basic") == 0)
    return cmd_basic(argv[2]);
  if (argc == 3 && strcmp(argv[1], "hold") == 0)
    return cmd_hold(argv[2]);
  if (argc == 3 && strcmp(argv[1], "fill") == 0)
    return cmd_fill(argv[2]);
  if ((argc == 5 || argc == 6) && strcmp(argv[1], "spin") == 0)
    return cmd_spin(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : NULL);
  if (argc == 2 && strcmp(argv[1], "pool") == 0)
    return cmd_pool();
  if (argc == 2 && strcmp(argv[1], "vmm") == 0)
    return cmd_vmm();
#ifndef SIM_CLIENT_DLOPEN
  if (argc == 3 && strcmp(argv[1], "misc") == 0)
    return cmd_misc(argv[2]);
  if (argc == 4 && strcmp(argv[1], "kernel-ms") == 0)
    return cmd_kernel_ms(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "ipc-export") == 0)
    return cmd_ipc_export(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "ipc-import") == 0)
    return cmd_ipc_import(argv[2]);
  if (argc == 3 && strcmp(argv[1], "hold-thread") == 0)
    return cmd_hold_thread(argv[2]);
  if (argc == 3 && strcmp(argv[1], "churn") == 0)
    return cmd_churn(argv[2]);
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "teardown") == 0)
    return cmd_teardown(argv[2], argc == 4 && strcmp(argv[3], "stale") == 0);
  if (argc == 2 && strcmp(argv[1], "devices") == 0)
    return cmd_devices();
  if (argc == 2 && strcmp(argv[1], "errors") == 0)
    return cmd_errors();
#endif
  fprintf(stderr,
          "usage: %s basic SPIN.ptx | hold BYTES | fill CHUNK | spin SPIN.ptx US COUNT [BYTES] | "
          "pool | "
          "vmm\n"
          "       (linked only) misc SPIN.ptx | kernel-ms PTX NAME | ipc-export BYTES FILE | "
          "ipc-import FILE | hold-thread BYTES | churn SPIN.ptx | teardown SPIN.ptx [stale] | "
          "devices | errors\n",
          argv[0]);
  return 2;
}
