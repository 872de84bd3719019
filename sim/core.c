/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated driver's core: cuInit (configuration, the shared machine, this process's
 * slot), device queries, memory charges on the machine and the wait for a device time.
 * Contexts are context.c's; memory of any kind is the memory files'. */
#include "driver.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct sim_driver sim = {.mu = PTHREAD_MUTEX_INITIALIZER, .slot = -1};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_primary(int d) {
  struct sim_ctx *c = &sim.primary[d];
  c->magic = SIM_CTX_MAGIC;
  c->dev = d;
  c->primary = 1;
  c->legacy.magic = SIM_STREAM_MAGIC;
  c->legacy.kind = SIM_STREAM_LEGACY;
  c->legacy.ctx = c;
}

static void do_init(void) {
  char err[512], note[512];
  int r = sim_config_parse(secure_getenv, &sim.cfg, err, sizeof(err));
  if (r < 0) {
    fprintf(stderr, "%s\n", err);
    sim.init_rc = CUDA_ERROR_INVALID_VALUE;
    return;
  }
  r = sim_state_open(&sim.cfg, &sim.st, note, sizeof(note));
  if (note[0])
    fprintf(stderr, "%s\n", note);
  if (r < 0) {
    fprintf(stderr, "gslice-sim: cannot open the simulated machine %s: %s\n", sim.cfg.state_path,
            strerror(-r));
    sim.init_rc = CUDA_ERROR_OPERATING_SYSTEM;
    return;
  }
  /* The driver applies CUDA_VISIBLE_DEVICES once, here; NVML never does. */
  char uuids[SIM_MAX_DEVICES][48];
  const char *uuid_text[SIM_MAX_DEVICES];
  unsigned ndev = sim.st.m->devices;
  for (unsigned d = 0; d < ndev && d < SIM_MAX_DEVICES; d++) {
    sim_uuid_text(sim.st.m, d, uuids[d], sizeof(uuids[d]));
    uuid_text[d] = uuids[d];
  }
  /* Its indices, and its absence, in CUDA's enumeration order (CUDA_DEVICE_ORDER). */
  unsigned order[SIM_MAX_DEVICES];
  sim_device_order(&sim.cfg, ndev, sim.st.m->sms, secure_getenv("CUDA_DEVICE_ORDER"), order);
  sim.ndev = sim_visible_parse_order(secure_getenv("CUDA_VISIBLE_DEVICES"), ndev, uuid_text, order,
                                     sim.pdev);
  if (sim.ndev == 0) {
    sim_state_close(&sim.st);
    sim.init_rc = CUDA_ERROR_NO_DEVICE;
    return;
  }
  sim_lock(sim.st.m);
  r = sim_proc_attach(sim.st.m, getpid());
  sim_unlock(sim.st.m);
  if (r < 0) {
    fprintf(stderr, "gslice-sim: %s has no free process slot (%d in use)\n", sim.cfg.state_path,
            SIM_MAX_PROCS);
    sim.init_rc = CUDA_ERROR_OPERATING_SYSTEM;
    return;
  }
  sim.slot = r;
  for (unsigned d = 0; d < sim.ndev; d++)
    init_primary((int)d);
  sim_pools_init();
  sim.init_rc = CUDA_SUCCESS;
  __atomic_store_n(&sim.ready, 1, __ATOMIC_RELEASE);
}

SIM_API CUresult cuInit(unsigned int flags) {
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_once(&init_once, do_init);
  return sim.init_rc;
}

SIM_API CUresult cuDriverGetVersion(int *driverVersion) {
  if (!driverVersion)
    return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

int sim_dev_ok(CUdevice d) {
  return d >= 0 && (unsigned)d < sim.ndev;
}

SIM_API CUresult cuDeviceGetCount(int *count) {
  SIM_REQUIRE_INIT();
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = (int)sim.ndev;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  SIM_REQUIRE_INIT();
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(ordinal))
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "gslice simulated GPU");
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!uuid)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  sim_uuid(sim.st.m, sim_pdev(dev), (unsigned char *)uuid->bytes);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = sim.st.m->memory;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pciBusId || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  snprintf(pciBusId, (size_t)len, "00000000:%02X:00.0", sim_pdev(dev) + 1);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pi)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  int v;
  /* An H100-like device; numbers a program sizes its launches or buffers by. */
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    v = (int)sim_config_sms(&sim.cfg, sim_pdev(dev), sim.st.m->sms);
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 50 << 20; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = 232448; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = 233472; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 2; break;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = (int)sim_pdev(dev) + 1; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
  case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: v = 1; break; /* the engine slices */
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: v = 0; break;
  default:
    /* Any other valid attribute reads 0 (unsupported feature), as a real driver
     * answers every attribute it knows. */
    if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
      return CUDA_ERROR_INVALID_VALUE;
    v = 0;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

/* ---- memory charged on the shared machine ---- */

CUresult sim_charge(int dev, uint64_t bytes) {
  struct sim_machine *m = sim.st.m;
  if (bytes == 0)
    return CUDA_SUCCESS;
  sim_lock(m);
  sim_reap(m, 0);
  int r = sim_mem_charge(m, sim.slot, sim_pdev(dev), bytes);
  sim_unlock(m);
  return r < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

void sim_uncharge(int dev, uint64_t bytes) {
  struct sim_machine *m = sim.st.m;
  if (bytes == 0)
    return;
  sim_lock(m);
  sim_mem_uncharge(m, sim.slot, sim_pdev(dev), bytes);
  sim_unlock(m);
}

void sim_count_context(int dev, int delta) {
  struct sim_machine *m = sim.st.m;
  sim_lock(m);
  m->proc[sim.slot].contexts[sim_pdev(dev)] += (uint32_t)delta;
  sim_unlock(m);
}

/* Sleeps most of the way (timer slack makes a sleep overshoot by ~50-70 us), then
 * yields the last stretch, so a synchronize returns within a few us of the device
 * time, as on a GPU, at the price of at most SPIN_NS of polling. */
#define SPIN_NS 80000ull
void sim_wait_until(uint64_t t) {
  uint64_t now = sim_now_ns();
  if (now + SPIN_NS < t) {
    uint64_t wake = t - SPIN_NS;
    struct timespec ts = {(time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
      ;
  }
  while (sim_now_ns() < t)
    sched_yield();
}
