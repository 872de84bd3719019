/* The node's GPUs as NVML reports them (loaded with dlopen: a node without a driver still runs the daemon). */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "nvml_min.h"
#include "region.h"

struct nvml {
  void *lib;
  __typeof__(nvmlInit_v2) *init;
  __typeof__(nvmlShutdown) *shutdown;
  __typeof__(nvmlDeviceGetCount_v2) *count;
  __typeof__(nvmlDeviceGetHandleByIndex_v2) *handle;
  __typeof__(nvmlDeviceGetName) *name;
  __typeof__(nvmlDeviceGetUUID) *uuid;
  __typeof__(nvmlDeviceGetMemoryInfo) *memory;
};

static struct nvml *nvml_open(void) {
  struct nvml *n = calloc(1, sizeof(*n));

  if (!n)
    return NULL;
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib)
    goto fail;
  n->init = (__typeof__(n->init))dlsym(n->lib, "nvmlInit_v2");
  n->shutdown = (__typeof__(n->shutdown))dlsym(n->lib, "nvmlShutdown");
  n->count = (__typeof__(n->count))dlsym(n->lib, "nvmlDeviceGetCount_v2");
  n->handle = (__typeof__(n->handle))dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
  n->name = (__typeof__(n->name))dlsym(n->lib, "nvmlDeviceGetName");
  n->uuid = (__typeof__(n->uuid))dlsym(n->lib, "nvmlDeviceGetUUID");
  n->memory = (__typeof__(n->memory))dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
  if (!n->init || !n->shutdown || !n->count || !n->handle || !n->name || !n->uuid || !n->memory ||
      n->init() != NVML_SUCCESS)
    goto fail;
  return n;
fail:
  if (n->lib)
    dlclose(n->lib);
  free(n);
  return NULL;
}

int gpus_discover(struct daemon *d) {
  unsigned count = 0;

  d->nvml = nvml_open();
  if (d->nvml && d->nvml->count(&count) != NVML_SUCCESS)
    count = 0;
  if (!d->nvml)
    dlog("warning", "NVML (libnvidia-ml.so.1) not available: scheduling %u unnamed GPU(s); "
         "memory caps come from the slices' environment only",
         d->cfg.gpus ? (unsigned)d->cfg.gpus : 1u);
  if (d->cfg.gpus && (!d->nvml || d->cfg.gpus < count))
    count = (unsigned)d->cfg.gpus;
  if (!d->nvml && !count)
    count = 1;
  if (count > GS_MAX_GPUS)
    count = GS_MAX_GPUS;
  d->ngpus = count;
  for (unsigned i = 0; i < count; i++) {
    struct gpu *g = &d->gpus[i];
    struct sched_cfg sc;
    nvmlDevice_t h;
    g->d = d;
    g->index = i;
    daemon_sched_cfg(&d->cfg, &sc);
    sched_init(&g->s, &sc, loop_now());
    snprintf(g->name, sizeof(g->name), "GPU %u", i);
    if (d->nvml && d->nvml->handle(i, &h) == NVML_SUCCESS) {
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
      d->nvml->name(h, g->name, sizeof(g->name));
      if (d->nvml->uuid(h, uuid, sizeof(uuid)) == NVML_SUCCESS) {
        snprintf(g->uuid, sizeof(g->uuid), "%.47s", uuid);
        g->has_uuid = gs_uuid_parse(uuid, g->uuid_bin) == 0;
      }
    }
  }
  gpus_refresh_memory(d);
  return 0;
}

void gpus_refresh_memory(struct daemon *d) {
  for (uint32_t i = 0; d->nvml && i < d->ngpus; i++) {
    nvmlDevice_t h;
    nvmlMemory_t m;
    if (d->nvml->handle(i, &h) == NVML_SUCCESS && d->nvml->memory(h, &m) == NVML_SUCCESS) {
      d->gpus[i].memory_total = m.total;
      d->gpus[i].memory_used = m.used;
    }
  }
}

void gpus_close(struct daemon *d) {
  for (uint32_t i = 0; i < d->ngpus; i++)
    sched_fini(&d->gpus[i].s);
  if (d->nvml) {
    d->nvml->shutdown();
    dlclose(d->nvml->lib);
    free(d->nvml);
    d->nvml = NULL;
  }
}
