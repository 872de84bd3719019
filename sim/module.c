/* SPDX-License-Identifier: Apache-2.0 */
/* Modules, libraries and functions: loading images (PTX text must contain the entry
 * asked for), looking functions up, their attributes. No device time is spent here. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- modules and functions ---- */

static int image_is_binary(const void *image) {
  const unsigned char *p = image;
  uint32_t magic;
  memcpy(&magic, p, sizeof(magic));
  /* ELF cubin, fatbin (0xBA55ED50) or the fatbin wrapper nvcc emits (0x466243B1). */
  return (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') || magic == 0xBA55ED50u ||
         magic == 0x466243B1u;
}

static CUresult module_new(const void *image, struct sim_module **ret) {
  if (!image)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_module *m = calloc(1, sizeof(*m));
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  m->magic = SIM_MODULE_MAGIC;
  if (!image_is_binary(image)) {
    const char *text = image;
    if (!strstr(text, ".version") && !strstr(text, ".entry")) {
      free(m);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    m->ptx = strdup(text);
    if (!m->ptx) {
      free(m);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  *ret = m;
  return CUDA_SUCCESS;
}

static CUresult module_load_data(CUmodule *module, const void *image) {
  SIM_REQUIRE_INIT();
  if (!module)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  struct sim_module *m;
  rc = module_new(image, &m);
  if (rc == CUDA_SUCCESS) {
    /* A module belongs to the context it was loaded in, and goes with it. */
    pthread_mutex_lock(&sim.mu);
    m->ctx = c;
    m->next = c->modules;
    if (c->modules)
      c->modules->prev = m;
    c->modules = m;
    pthread_mutex_unlock(&sim.mu);
    *module = (CUmodule)m;
  }
  return rc;
}

SIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return module_load_data(module, image);
}

SIM_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues) {
  return module_load_data(module, image);
}

SIM_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin) {
  return module_load_data(module, fatCubin);
}

static char *read_file(const char *fname) {
  int fd = open(fname, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0)
    return NULL;
  char *buf = NULL;
  if (fstat(fd, &sb) == 0 && sb.st_size >= 0 && sb.st_size < (1 << 30)) {
    buf = calloc(1, (size_t)sb.st_size + 1);
    if (buf && read(fd, buf, (size_t)sb.st_size) != sb.st_size) {
      free(buf);
      buf = NULL;
    }
  }
  close(fd);
  return buf;
}

SIM_API CUresult cuModuleLoad(CUmodule *module, const char *fname) {
  SIM_REQUIRE_INIT();
  if (!fname)
    return CUDA_ERROR_INVALID_VALUE;
  char *buf = read_file(fname);
  if (!buf)
    return CUDA_ERROR_FILE_NOT_FOUND;
  CUresult rc = module_load_data(module, buf);
  free(buf);
  return rc;
}

/* sim.mu held. */
static void module_free_locked(struct sim_module *m) {
  /* Functions stay allocated (magic cleared): a stale CUfunction is an error, not UB. */
  for (struct sim_func *f = m->funcs; f; f = f->next)
    f->magic = 0;
  m->magic = 0;
  free(m->ptx);
  m->ptx = NULL;
  if (m->ctx) {
    if (m->prev)
      m->prev->next = m->next;
    else if (m->ctx->modules == m)
      m->ctx->modules = m->next;
    if (m->next)
      m->next->prev = m->prev;
    m->ctx = NULL;
    m->prev = m->next = NULL;
  }
}

SIM_API CUresult cuModuleUnload(CUmodule hmod) {
  SIM_REQUIRE_INIT();
  struct sim_module *m = (struct sim_module *)hmod;
  pthread_mutex_lock(&sim.mu);
  int ok = m && m->magic == SIM_MODULE_MAGIC;
  if (ok)
    module_free_locked(m);
  pthread_mutex_unlock(&sim.mu);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void sim_ctx_modules_reset(struct sim_ctx *c) {
  while (c->modules)
    module_free_locked(c->modules);
}

static int ptx_has_entry(const char *ptx, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
    const char *q = p + 6;
    while (*q == ' ' || *q == '\t')
      q++;
    if (strncmp(q, name, n) == 0 &&
        (q[n] == '(' || q[n] == ' ' || q[n] == '\t' || q[n] == '\n' || q[n] == '\r'))
      return 1;
  }
  return 0;
}

static CUresult module_get_function(struct sim_func **ret, CUmodule hmod, const char *name) {
  SIM_REQUIRE_INIT();
  struct sim_module *m = (struct sim_module *)hmod;
  if (!ret || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!m || m->magic != SIM_MODULE_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  if (strlen(name) >= sizeof(((struct sim_func *)0)->name))
    return CUDA_ERROR_NOT_FOUND;
  pthread_mutex_lock(&sim.mu);
  struct sim_func *f;
  for (f = m->funcs; f; f = f->next)
    if (strcmp(f->name, name) == 0)
      break;
  CUresult rc = CUDA_SUCCESS;
  if (!f) {
    if (m->ptx && !ptx_has_entry(m->ptx, name)) {
      rc = CUDA_ERROR_NOT_FOUND;
    } else if (!(f = calloc(1, sizeof(*f)))) {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      f->magic = SIM_FUNC_MAGIC;
      f->mod = m;
      strcpy(f->name, name);
      f->spin = strcmp(name, "spin") == 0;
      uint64_t us = sim_config_kernel_us(&sim.cfg, name);
      f->fixed_ns = us > UINT64_MAX / 1000 ? UINT64_MAX / 2 : us * 1000;
      f->next = m->funcs;
      m->funcs = f;
    }
  }
  if (rc == CUDA_SUCCESS)
    *ret = f;
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

const char *sim_func_name(CUfunction hf) {
  struct sim_func *f = (struct sim_func *)hf;
  return f && f->magic == SIM_FUNC_MAGIC ? f->name : NULL;
}

SIM_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  return module_get_function((struct sim_func **)hfunc, hmod, name);
}

SIM_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                      const char *name) {
  SIM_REQUIRE_INIT();
  return CUDA_ERROR_NOT_FOUND; /* module globals are not modelled */
}

SIM_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                   unsigned int numLibraryOptions) {
  SIM_REQUIRE_INIT();
  if (!library)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_module *m;
  CUresult rc = module_new(code, &m);
  if (rc == CUDA_SUCCESS)
    *library = (CUlibrary)m;
  return rc;
}

SIM_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                       CUjit_option *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues, unsigned int numLibraryOptions) {
  SIM_REQUIRE_INIT();
  if (!fileName)
    return CUDA_ERROR_INVALID_VALUE;
  char *buf = read_file(fileName);
  if (!buf)
    return CUDA_ERROR_FILE_NOT_FOUND;
  CUresult rc = cuLibraryLoadData(library, buf, NULL, NULL, 0, NULL, NULL, 0);
  free(buf);
  return rc;
}

SIM_API CUresult cuLibraryUnload(CUlibrary library) {
  return cuModuleUnload((CUmodule)library);
}

SIM_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name) {
  return module_get_function((struct sim_func **)pKernel, (CUmodule)library, name);
}

SIM_API CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library) {
  SIM_REQUIRE_INIT();
  if (!pMod)
    return CUDA_ERROR_INVALID_VALUE;
  *pMod = (CUmodule)library;
  return CUDA_SUCCESS;
}

/* A CUkernel and the CUfunction it gives in a context are the same object here. */
SIM_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
  SIM_REQUIRE_INIT();
  struct sim_func *f = (struct sim_func *)kernel;
  if (!pFunc)
    return CUDA_ERROR_INVALID_VALUE;
  if (!f || f->magic != SIM_FUNC_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  *pFunc = (CUfunction)f;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc) {
  SIM_REQUIRE_INIT();
  if (!pi)
    return CUDA_ERROR_INVALID_VALUE;
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 16; break;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION:
  case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
  default: *pi = 0;
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

/* ---- the legacy launch's state (cuda.h: deprecated, still exported) ---- */

/* f locked (sim.mu held) when it is a live function, else CUDA_ERROR_INVALID_HANDLE. */
static CUresult func_lock(CUfunction hf, struct sim_func **ret) {
  struct sim_func *f = (struct sim_func *)hf;
  pthread_mutex_lock(&sim.mu);
  if (!f || f->magic != SIM_FUNC_MAGIC) {
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *ret = f;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z) {
  SIM_REQUIRE_INIT();
  struct sim_func *f;
  if (x <= 0 || y <= 0 || z <= 0 || (long long)x * y * z > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = func_lock(hfunc, &f);
  if (rc == CUDA_SUCCESS) {
    f->block[0] = x;
    f->block[1] = y;
    f->block[2] = z;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

SIM_API CUresult cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes) {
  SIM_REQUIRE_INIT();
  struct sim_func *f;
  CUresult rc = func_lock(hfunc, &f);
  if (rc == CUDA_SUCCESS) {
    f->shared = bytes;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

SIM_API CUresult cuParamSetSize(CUfunction hfunc, unsigned int numbytes) {
  SIM_REQUIRE_INIT();
  struct sim_func *f;
  if (numbytes > SIM_PARAM_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = func_lock(hfunc, &f);
  if (rc == CUDA_SUCCESS) {
    f->param_size = numbytes;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

SIM_API CUresult cuParamSetv(CUfunction hfunc, int offset, void *ptr, unsigned int numbytes) {
  SIM_REQUIRE_INIT();
  struct sim_func *f;
  if (offset < 0 || numbytes > SIM_PARAM_MAX || (unsigned)offset > SIM_PARAM_MAX - numbytes ||
      (!ptr && numbytes))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = func_lock(hfunc, &f);
  if (rc == CUDA_SUCCESS) {
    if (numbytes)
      memcpy(f->params + offset, ptr, numbytes);
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

SIM_API CUresult cuParamSeti(CUfunction hfunc, int offset, unsigned int value) {
  return cuParamSetv(hfunc, offset, &value, sizeof(value));
}

SIM_API CUresult cuParamSetf(CUfunction hfunc, int offset, float value) {
  return cuParamSetv(hfunc, offset, &value, sizeof(value));
}

CUresult sim_func_legacy_params(CUfunction hf, unsigned char buf[SIM_PARAM_MAX], size_t *size) {
  struct sim_func *f;
  CUresult rc = func_lock(hf, &f);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!f->block[0])
    rc = CUDA_ERROR_INVALID_VALUE; /* no cuFuncSetBlockShape: nothing to launch */
  memcpy(buf, f->params, SIM_PARAM_MAX);
  *size = f->param_size;
  pthread_mutex_unlock(&sim.mu);
  return rc;
}
