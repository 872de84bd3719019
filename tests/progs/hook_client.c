/* SPDX-License-Identifier: Apache-2.0 */
/* A CUDA client for the hook's tests: finds the driver one way (link, dlsym, cuGetProcAddress),
 * allocates by one path, and obeys commands (from --script or stdin) so scripts can drive it.
 *
 * usage: hook_client --lookup link|default|next|dlsym|procaddr [--ptsz] --path PATH [--chunk SIZE]
 *                    [--ctx primary|create] [--device N] [--script "cmd;cmd"]
 * PATH: alloc pitch managed async pool vmm array array3d mipmap
 * commands: fill (allocate chunks until one fails), alloc N, free, info, infos N (N cuMemGetInfo
 *           calls in a row: "infos n= err= ms=<elapsed>"), race THREADS,
 *           churn N (random alloc/free pairs), spawn (fork + exec self with --script "fill;info"),
 *           ctxdrop (destroy / release the context without freeing), ctxnew (a context again),
 *           export FILE (IPC handle of
 *           the first chunk), import FILE / unimport (open / close an IPC handle),
 *           huge (one allocation by the path sized near 2^64, so that size arithmetic overflows:
 *           "huge err=<CUresult>"), wait (block until stdin closes), quit
 * Output, one line per command: "<cmd> n=<chunks> err=<CUresult>" etc. on stdout. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT, also when tests/gpu builds it with nvcc */
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "size.h"

#define APIS(X)                                                                                    \
  X(cuInit, cuInit)                                                                                \
  X(cuDeviceGet, cuDeviceGet)                                                                      \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)                                            \
  X(cuCtxSetCurrent, cuCtxSetCurrent)                                                              \
  X(cuCtxCreate_v4, cuCtxCreate)                                                                   \
  X(cuCtxDestroy_v2, cuCtxDestroy)                                                                 \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease)                                       \
  X(cuIpcGetMemHandle, cuIpcGetMemHandle)                                                          \
  X(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle)                                                     \
  X(cuIpcCloseMemHandle, cuIpcCloseMemHandle)                                                      \
  X(cuMemAlloc_v2, cuMemAlloc)                                                                     \
  X(cuMemFree_v2, cuMemFree)                                                                       \
  X(cuMemAllocPitch_v2, cuMemAllocPitch)                                                           \
  X(cuMemAllocManaged, cuMemAllocManaged)                                                          \
  X(cuMemAllocAsync, cuMemAllocAsync)                                                              \
  X(cuMemFreeAsync, cuMemFreeAsync)                                                                \
  X(cuStreamSynchronize, cuStreamSynchronize)                                                      \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)                                              \
  X(cuMemPoolCreate, cuMemPoolCreate)                                                              \
  X(cuMemPoolTrimTo, cuMemPoolTrimTo)                                                              \
  X(cuMemCreate, cuMemCreate)                                                                      \
  X(cuMemRelease, cuMemRelease)                                                                    \
  X(cuArrayCreate_v2, cuArrayCreate)                                                               \
  X(cuArray3DCreate_v2, cuArray3DCreate)                                                           \
  X(cuArrayDestroy, cuArrayDestroy)                                                                \
  X(cuMipmappedArrayCreate, cuMipmappedArrayCreate)                                                \
  X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy)                                              \
  X(cuMemGetInfo_v2, cuMemGetInfo)                                                                 \
  X(cuDeviceTotalMem_v2, cuDeviceTotalMem)

static struct {
#define MEMBER(abi, pub) __typeof__(&abi) abi;
  APIS(MEMBER)
#undef MEMBER
} api;

static const char *lookup = "link", *path = "alloc", *ctx_mode = "primary";
static int ordinal; /* --device */
static int ptsz;
static uint64_t chunk = 256ull << 20;
static char **self_argv;
static CUmemoryPool pool;
static CUcontext ctx;
static CUdeviceptr ipc_ptr;

#define MAX_HELD 65536
static struct held {
  uint64_t h;
  size_t bytes;
} held[MAX_HELD];
static int nheld;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *what) {
  fprintf(stderr, "hook_client: %s\n", what);
  exit(2);
}

static void resolve(void) {
  if (strcmp(lookup, "link") == 0) {
#ifdef HOOK_CLIENT_LINKED
#define LINKED(abi, pub) api.abi = abi;
    APIS(LINKED)
#else
    die("this binary is not linked with -lcuda; use hook_client_linked");
#endif
    return;
  }
  void *h = strcmp(lookup, "next") == 0 ? RTLD_NEXT : RTLD_DEFAULT;
  if (strcmp(lookup, "default") != 0 && strcmp(lookup, "next") != 0) {
    h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
      die("dlopen libcuda.so.1 failed");
  }
  if (strcmp(lookup, "dlsym") == 0 || strcmp(lookup, "default") == 0 ||
      strcmp(lookup, "next") == 0) {
#define DLSYM(abi, pub)                                                                            \
  if (!(api.abi = (__typeof__(api.abi))dlsym(h, #abi)))                                            \
    die("dlsym " #abi " failed");
    APIS(DLSYM)
    return;
  }
  if (strcmp(lookup, "procaddr") != 0)
    die("--lookup wants link, default, next, dlsym or procaddr");
  /* As libcudart does: the one symbol it looks up by name, then everything through it. */
  __typeof__(&cuGetProcAddress_v2) gpa =
      (__typeof__(&cuGetProcAddress_v2))dlsym(h, "cuGetProcAddress_v2");
  if (!gpa)
    die("dlsym cuGetProcAddress_v2 failed");
  /* The first lookup is of cuGetProcAddress itself, as libcudart does; use what it returns. */
  void *self = NULL;
  CUdriverProcAddressQueryResult st;
  if (gpa("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS || !self)
    die("cuGetProcAddress(cuGetProcAddress) failed");
  gpa = (__typeof__(gpa))self;
  cuuint64_t flags =
      ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
#define PROCADDR(abi, pub)                                                                         \
  {                                                                                                \
    void *p = NULL;                                                                                \
    if (gpa(#pub, &p, 13000, flags, &st) != CUDA_SUCCESS || !p)                                    \
      die("cuGetProcAddress " #pub " failed");                                                     \
    api.abi = (__typeof__(api.abi))p;                                                              \
  }
  APIS(PROCADDR)
}

static CUresult make_context(CUdevice dev) {
  if (strcmp(ctx_mode, "create") == 0)
    return api.cuCtxCreate_v4(&ctx, NULL, 0, dev);
  CUresult rc = api.cuDevicePrimaryCtxRetain(&ctx, dev);
  return rc == CUDA_SUCCESS ? api.cuCtxSetCurrent(ctx) : rc;
}

static void setup_cuda(void) {
  CUdevice dev;
  if (api.cuInit(0) != CUDA_SUCCESS || api.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS)
    die("cuInit/cuDeviceGet failed");
  CUresult rc = make_context(dev);
  if (rc != CUDA_SUCCESS) {
    printf("context err=%d\n", rc);
    fflush(stdout);
    exit(3);
  }
  if (strcmp(path, "pool") == 0) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    if (api.cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS)
      die("cuMemPoolCreate failed");
  }
}

/* One allocation of about `bytes` by the chosen path; its handle in *ret. */
static CUresult alloc_one(uint64_t bytes, uint64_t *ret) {
  CUresult rc;
  CUdeviceptr p = 0;
  if (strcmp(path, "alloc") == 0) {
    rc = api.cuMemAlloc_v2(&p, bytes);
  } else if (strcmp(path, "pitch") == 0) {
    size_t pitch = 0;
    /* 1000-byte rows: the driver pads them, the hook must count the padding. */
    rc = api.cuMemAllocPitch_v2(&p, &pitch, 1000, bytes / 1024, 4);
  } else if (strcmp(path, "managed") == 0) {
    rc = api.cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
  } else if (strcmp(path, "async") == 0) {
    rc = api.cuMemAllocAsync(&p, bytes, NULL);
    if (rc == CUDA_SUCCESS)
      rc = api.cuStreamSynchronize(NULL);
  } else if (strcmp(path, "pool") == 0) {
    rc = api.cuMemAllocFromPoolAsync(&p, bytes, pool, NULL);
    if (rc == CUDA_SUCCESS)
      rc = api.cuStreamSynchronize(NULL);
  } else if (strcmp(path, "vmm") == 0) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    CUmemGenericAllocationHandle h = 0;
    rc = api.cuMemCreate(&h, (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20), &prop, 0);
    p = (CUdeviceptr)h;
  } else if (strcmp(path, "array") == 0) {
    CUDA_ARRAY_DESCRIPTOR d = {
        .Width = 4096, .Height = bytes / 16384, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUarray a = NULL;
    rc = api.cuArrayCreate_v2(&a, &d);
    p = (CUdeviceptr)(uintptr_t)a;
  } else if (strcmp(path, "array3d") == 0) {
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 1024,
                                 .Height = 1024,
                                 .Depth = bytes / (1024 * 1024 * 4),
                                 .Format = CU_AD_FORMAT_FLOAT,
                                 .NumChannels = 1,
                                 .Flags = 0};
    CUarray a = NULL;
    rc = api.cuArray3DCreate_v2(&a, &d);
    p = (CUdeviceptr)(uintptr_t)a;
  } else if (strcmp(path, "mipmap") == 0) {
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 4096,
                                 .Height = bytes / 16384 * 3 / 4,
                                 .Depth = 0,
                                 .Format = CU_AD_FORMAT_FLOAT,
                                 .NumChannels = 1,
                                 .Flags = 0};
    CUmipmappedArray m = NULL;
    rc = api.cuMipmappedArrayCreate(&m, &d, 4);
    p = (CUdeviceptr)(uintptr_t)m;
  } else {
    die("unknown --path");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (rc == CUDA_SUCCESS)
    *ret = p;
  return rc;
}

static CUresult free_one(uint64_t h) {
  if (strcmp(path, "async") == 0 || strcmp(path, "pool") == 0) {
    CUresult rc = api.cuMemFreeAsync((CUdeviceptr)h, NULL);
    return rc == CUDA_SUCCESS ? api.cuStreamSynchronize(NULL) : rc;
  }
  if (strcmp(path, "vmm") == 0)
    return api.cuMemRelease((CUmemGenericAllocationHandle)h);
  if (strcmp(path, "array") == 0 || strcmp(path, "array3d") == 0)
    return api.cuArrayDestroy((CUarray)(uintptr_t)h);
  if (strcmp(path, "mipmap") == 0)
    return api.cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)h);
  return api.cuMemFree_v2((CUdeviceptr)h);
}

static void hold(uint64_t h, size_t bytes) {
  pthread_mutex_lock(&held_lock);
  if (nheld < MAX_HELD)
    held[nheld++] = (struct held){h, bytes};
  pthread_mutex_unlock(&held_lock);
}

/* Allocates chunks until one fails (or `max` succeeded); the count, the first error in *err. */
static int fill(int max, CUresult *err) {
  int n = 0;
  *err = CUDA_SUCCESS;
  while (max < 0 || n < max) {
    uint64_t h;
    CUresult rc = alloc_one(chunk, &h);
    if (rc != CUDA_SUCCESS) {
      *err = rc;
      break;
    }
    hold(h, chunk);
    n++;
  }
  return n;
}

static void free_all(void) {
  pthread_mutex_lock(&held_lock);
  for (int i = 0; i < nheld; i++)
    if (free_one(held[i].h) != CUDA_SUCCESS)
      die("free failed");
  nheld = 0;
  if (pool)
    api.cuMemPoolTrimTo(pool, 0);
  pthread_mutex_unlock(&held_lock);
}

struct racer {
  pthread_t t;
  int n;
  CUresult err;
};

static void *race_thread(void *arg) {
  struct racer *r = arg;
  api.cuCtxSetCurrent(ctx);
  r->n = fill(-1, &r->err);
  return NULL;
}

static void info(void) {
  size_t f = 0, t = 0, dt = 0;
  CUresult rc = api.cuMemGetInfo_v2(&f, &t);
  CUdevice dev;
  api.cuDeviceGet(&dev, ordinal);
  api.cuDeviceTotalMem_v2(&dt, dev);
  printf("info err=%d free=%zu total=%zu devtotal=%zu\n", rc, f, t, dt);
}

static void infos(int n) {
  struct timespec t0, t1;
  CUresult rc = CUDA_SUCCESS;
  int i;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < n && rc == CUDA_SUCCESS; i++) {
    size_t f, t;
    rc = api.cuMemGetInfo_v2(&f, &t);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  printf("infos n=%d err=%d ms=%ld\n", i, rc, ms);
}

static void run(char *cmd) {
  char *arg = strchr(cmd, ' ');
  if (arg)
    *arg++ = 0;
  CUresult err = CUDA_SUCCESS;
  if (strcmp(cmd, "fill") == 0) {
    int n = fill(-1, &err);
    printf("fill n=%d err=%d\n", n, err);
  } else if (strcmp(cmd, "alloc") == 0) {
    int n = fill(arg ? atoi(arg) : 1, &err);
    printf("alloc n=%d err=%d\n", n, err);
  } else if (strcmp(cmd, "free") == 0) {
    free_all();
    printf("free ok\n");
  } else if (strcmp(cmd, "huge") == 0) {
    uint64_t h;
    CUresult rc = alloc_one(UINT64_MAX - (4ull << 20), &h);
    if (rc == CUDA_SUCCESS)
      hold(h, 0);
    printf("huge err=%d\n", rc);
  } else if (strcmp(cmd, "info") == 0) {
    info();
  } else if (strcmp(cmd, "infos") == 0) {
    infos(arg ? atoi(arg) : 100);
  } else if (strcmp(cmd, "race") == 0) {
    int k = arg ? atoi(arg) : 4, total = 0, all_oom = 1;
    struct racer *r = calloc((size_t)k, sizeof(*r));
    for (int i = 0; i < k; i++)
      pthread_create(&r[i].t, NULL, race_thread, &r[i]);
    for (int i = 0; i < k; i++) {
      pthread_join(r[i].t, NULL);
      total += r[i].n;
      all_oom &= r[i].err == CUDA_ERROR_OUT_OF_MEMORY;
    }
    free(r);
    printf("race n=%d err=%d\n", total, all_oom ? CUDA_ERROR_OUT_OF_MEMORY : -1);
  } else if (strcmp(cmd, "churn") == 0) {
    int rounds = arg ? atoi(arg) : 1000, ok = 0;
    unsigned seed = (unsigned)getpid();
    for (int i = 0; i < rounds; i++) {
      uint64_t h, bytes = ((uint64_t)(rand_r(&seed) % 64) + 1) << 20;
      uint64_t saved = chunk;
      chunk = bytes;
      if (alloc_one(bytes, &h) == CUDA_SUCCESS) {
        ok++;
        if (rand_r(&seed) % 4 == 0)
          hold(h, bytes);
        else if (free_one(h) != CUDA_SUCCESS)
          die("free failed");
      }
      chunk = saved;
    }
    printf("churn n=%d err=0\n", ok);
  } else if (strcmp(cmd, "spawn") == 0) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      int argc = 0;
      while (self_argv[argc])
        argc++;
      char **argv = calloc((size_t)argc + 3, sizeof(char *));
      memcpy(argv, self_argv, (size_t)argc * sizeof(char *));
      argv[argc] = "--script";
      argv[argc + 1] = arg ? arg : "fill;info";
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("spawn status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
  } else if (strcmp(cmd, "ctxdrop") == 0) {
    CUresult rc;
    if (strcmp(ctx_mode, "create") == 0) {
      rc = api.cuCtxDestroy_v2(ctx);
    } else {
      CUdevice dev;
      api.cuDeviceGet(&dev, ordinal);
      rc = api.cuDevicePrimaryCtxRelease_v2(dev);
    }
    nheld = 0; /* went with the context */
    printf("ctxdrop err=%d\n", rc);
  } else if (strcmp(cmd, "ctxnew") == 0) {
    CUdevice dev;
    api.cuDeviceGet(&dev, ordinal);
    printf("ctxnew err=%d\n", make_context(dev));
  } else if (strcmp(cmd, "export") == 0 && arg) {
    CUipcMemHandle h;
    CUresult rc =
        nheld ? api.cuIpcGetMemHandle(&h, (CUdeviceptr)held[0].h) : CUDA_ERROR_INVALID_VALUE;
    FILE *f = rc == CUDA_SUCCESS ? fopen(arg, "w") : NULL;
    if (f) {
      fwrite(&h, sizeof(h), 1, f);
      fclose(f);
    }
    printf("export err=%d\n", rc);
  } else if (strcmp(cmd, "import") == 0 && arg) {
    CUipcMemHandle h;
    FILE *f = fopen(arg, "r");
    CUresult rc = f && fread(&h, sizeof(h), 1, f) == 1
                      ? api.cuIpcOpenMemHandle_v2(&ipc_ptr, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
                      : CUDA_ERROR_INVALID_VALUE;
    if (f)
      fclose(f);
    printf("import err=%d\n", rc);
  } else if (strcmp(cmd, "unimport") == 0) {
    printf("unimport err=%d\n", api.cuIpcCloseMemHandle(ipc_ptr));
  } else if (strcmp(cmd, "wait") == 0) {
    printf("waiting\n");
    fflush(stdout);
    char buf[64];
    while (fgets(buf, sizeof(buf), stdin))
      ;
  } else if (strcmp(cmd, "quit") == 0) {
    exit(0);
  } else if (cmd[0]) {
    die("unknown command");
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *script = NULL;
  self_argv = argv;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--ptsz") == 0) {
      ptsz = 1;
      continue;
    }
    if (!v)
      die("missing value");
    if (strcmp(a, "--lookup") == 0)
      lookup = v;
    else if (strcmp(a, "--path") == 0)
      path = v;
    else if (strcmp(a, "--ctx") == 0)
      ctx_mode = v;
    else if (strcmp(a, "--device") == 0)
      ordinal = atoi(v);
    else if (strcmp(a, "--chunk") == 0) {
      if (gs_size_parse(v, &chunk) < 0)
        die("bad --chunk");
    } else if (strcmp(a, "--script") == 0)
      script = v;
    else if (strcmp(a, "--setenv") == 0 && strchr(v, '=')) {
      /* As a program changes its environment in main, after the hook's constructor. */
      char *name = strdup(v);
      char *eq = strchr(name, '=');
      *eq = 0;
      if (setenv(name, eq + 1, 1) < 0)
        die("setenv");
      free(name);
    } else if (strcmp(a, "--unsetenv") == 0)
      unsetenv(v);
    else
      die("unknown option");
    i++;
  }
  resolve();
  setup_cuda();
  if (script) {
    char *copy = strdup(script), *save = NULL;
    for (char *c = strtok_r(copy, ";", &save); c; c = strtok_r(NULL, ";", &save))
      run(c);
    free(copy);
    return 0;
  }
  char line[256];
  while (fgets(line, sizeof(line), stdin)) {
    line[strcspn(line, "\n")] = 0;
    run(line);
  }
  return 0;
}
