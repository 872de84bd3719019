/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the sim's cuGetProcAddress table: versions pick ABI variants, the
 * per-thread flag picks _ptsz/_ptds, unknown names and too-old versions are told apart. */
#include "procaddr.h"
#include "test.h"

static const char *abi(const char *name, int version, int per_thread) {
  const struct sim_procaddr_entry *e = NULL;
  if (sim_procaddr_find(name, version, per_thread, &e) != CU_GET_PROC_ADDRESS_SUCCESS)
    return "(none)";
  return per_thread && e->abi_ptds ? e->abi_ptds : e->abi;
}

int main(void) {
  CHECK_STR(abi("cuMemAlloc", 12000, 0), "cuMemAlloc_v2");
  CHECK_STR(abi("cuMemAlloc", 3020, 0), "cuMemAlloc_v2");
  CHECK_STR(abi("cuMemAlloc", 12000, 1), "cuMemAlloc_v2");
  CHECK_STR(abi("cuCtxCreate", 11000, 0), "cuCtxCreate_v2");
  CHECK_STR(abi("cuCtxCreate", 12000, 0), "cuCtxCreate_v3");
  CHECK_STR(abi("cuCtxCreate", 13000, 0), "cuCtxCreate_v4");
  CHECK_STR(abi("cuLaunchKernel", 12000, 0), "cuLaunchKernel");
  CHECK_STR(abi("cuLaunchKernel", 12000, 1), "cuLaunchKernel_ptsz");
  CHECK_STR(abi("cuMemcpyHtoD", 12000, 1), "cuMemcpyHtoD_v2_ptds");
  CHECK_STR(abi("cuMemcpyHtoDAsync", 12000, 1), "cuMemcpyHtoDAsync_v2_ptsz");
  CHECK_STR(abi("cuStreamBeginCapture", 10000, 0), "cuStreamBeginCapture");
  CHECK_STR(abi("cuStreamBeginCapture", 12000, 1), "cuStreamBeginCapture_v2_ptsz");
  CHECK_STR(abi("cuGraphInstantiate", 11000, 0), "cuGraphInstantiate_v2");
  CHECK_STR(abi("cuGraphInstantiate", 12000, 0), "cuGraphInstantiateWithFlags");
  CHECK_STR(abi("cuEventElapsedTime", 12000, 0), "cuEventElapsedTime");
  CHECK_STR(abi("cuEventElapsedTime", 13000, 0), "cuEventElapsedTime_v2");
  CHECK_STR(abi("cuDevicePrimaryCtxRelease", 12000, 0), "cuDevicePrimaryCtxRelease_v2");
  CHECK_STR(abi("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2");
  /* What libcudart 13 asks for (traced): the 13.0 forms of these two take a context. */
  CHECK_STR(abi("cuCtxGetDevice", 2000, 0), "cuCtxGetDevice");
  CHECK_STR(abi("cuCtxGetDevice", 13000, 0), "cuCtxGetDevice_v2");
  CHECK_STR(abi("cuCtxSynchronize", 13000, 0), "cuCtxSynchronize_v2");
  CHECK_STR(abi("cuGraphInstantiate", 10000, 0), "cuGraphInstantiate");
  CHECK_STR(abi("cuDevicePrimaryCtxRelease", 7000, 0), "cuDevicePrimaryCtxRelease");
  CHECK_STR(abi("cuMemcpyHtoD", 7000, 1), "cuMemcpyHtoD_v2_ptds");
  CHECK_STR(abi("cuLaunchHostFunc", 10000, 1), "cuLaunchHostFunc_ptsz");

  const struct sim_procaddr_entry *e = NULL;
  CHECK_EQ_INT(sim_procaddr_find("cuNoSuchThing", 12000, 0, &e),
               CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CHECK_EQ_INT(sim_procaddr_find("cuMemAlloc", 2000, 0, &e),
               CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  CHECK_EQ_INT(sim_procaddr_find("cuMemAllocAsync", 11000, 0, &e),
               CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

  /* Through the entry point itself: the pointer matches the exported symbol. */
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  CHECK_EQ_INT(cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000,
                                   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
               CUDA_SUCCESS);
  CHECK(fn == (void *)cuLaunchKernel_ptsz);
  CHECK_EQ_INT(st, CU_GET_PROC_ADDRESS_SUCCESS);
  CHECK_EQ_INT(
      cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st),
      CUDA_SUCCESS);
  CHECK(fn == (void *)cuLaunchKernel);
  CHECK_EQ_INT(cuGetProcAddress_v2("cuNope", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
  CHECK_EQ_INT(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CHECK(fn == NULL);
  CHECK_EQ_INT(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0), CUDA_SUCCESS);
  CHECK(fn == (void *)cuMemAlloc_v2);
  const void *tbl;
  CUuuid id = {{0}};
  CHECK_EQ_INT(cuGetExportTable(&tbl, &id), CUDA_ERROR_NOT_SUPPORTED);
  /* Nothing but cuInit/cuGetProcAddress works before cuInit. */
  int n;
  CHECK_EQ_INT(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  return test_done();
}
