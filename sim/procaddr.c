/* SPDX-License-Identifier: Apache-2.0 */
/* How programs find entry points: cuGetProcAddress and cuGetProcAddress_v2 over one table
 * mapping public names and CUDA versions to the ABI variants this driver exports, and
 * cuGetExportTable's refusal. */
#include "procaddr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define E(pub, ver, abi)                                                                           \
  { #pub, ver, #abi, (void *)abi, NULL, NULL }
#define S(pub, ver, abi, pt)                                                                       \
  { #pub, ver, #abi, (void *)abi, #pt, (void *)pt }

static const struct sim_procaddr_entry table[] = {
    E(cuInit, 2000, cuInit),
    E(cuDriverGetVersion, 2020, cuDriverGetVersion),
    E(cuGetProcAddress, 11030, cuGetProcAddress),
    E(cuGetProcAddress, 12000, cuGetProcAddress_v2),
    E(cuGetExportTable, 3000, cuGetExportTable),
    E(cuGetErrorString, 6000, cuGetErrorString),
    E(cuGetErrorName, 6000, cuGetErrorName),
    E(cuDeviceGet, 2000, cuDeviceGet),
    E(cuDeviceGetCount, 2000, cuDeviceGetCount),
    E(cuDeviceGetName, 2000, cuDeviceGetName),
    E(cuDeviceGetUuid, 9020, cuDeviceGetUuid),
    E(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
    E(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
    E(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    E(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId),
    E(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    E(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    E(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    E(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    E(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    E(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
    E(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
    E(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
    E(cuCtxCreate, 3020, cuCtxCreate_v2),
    E(cuCtxCreate, 11040, cuCtxCreate_v3),
    E(cuCtxCreate, 12050, cuCtxCreate_v4),
    E(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    E(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    E(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    E(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    E(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    E(cuCtxGetDevice, 2000, cuCtxGetDevice),
    E(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
    E(cuCtxGetFlags, 7000, cuCtxGetFlags),
    E(cuCtxGetApiVersion, 3020, cuCtxGetApiVersion),
    E(cuCtxGetId, 12000, cuCtxGetId),
    E(cuCtxGetLimit, 3010, cuCtxGetLimit),
    E(cuCtxSetLimit, 3010, cuCtxSetLimit),
    E(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange),
    E(cuCtxGetCacheConfig, 3020, cuCtxGetCacheConfig),
    E(cuCtxSetCacheConfig, 3020, cuCtxSetCacheConfig),
    E(cuCtxSynchronize, 2000, cuCtxSynchronize),
    E(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    E(cuMemAlloc, 3020, cuMemAlloc_v2),
    E(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    E(cuMemAllocManaged, 6000, cuMemAllocManaged),
    E(cuMemFree, 3020, cuMemFree_v2),
    E(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    E(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
    E(cuMemAllocHost, 3020, cuMemAllocHost_v2),
    E(cuMemFreeHost, 2000, cuMemFreeHost),
    E(cuMemHostAlloc, 2020, cuMemHostAlloc),
    E(cuMemHostRegister, 6050, cuMemHostRegister_v2),
    E(cuMemHostUnregister, 4000, cuMemHostUnregister),
    S(cuMemcpy, 4000, cuMemcpy, cuMemcpy_ptds),
    S(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
    S(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
    S(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
    S(cuMemcpyAsync, 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
    S(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
    S(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
    S(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
    S(cuMemsetD8, 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
    S(cuMemsetD16, 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
    S(cuMemsetD32, 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
    S(cuMemsetD8Async, 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz),
    S(cuMemsetD16Async, 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
    S(cuMemsetD32Async, 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
    S(cuMemsetD2D8, 3020, cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds),
    S(cuMemsetD2D16, 3020, cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds),
    S(cuMemsetD2D32, 3020, cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds),
    S(cuMemsetD2D8Async, 3020, cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz),
    S(cuMemsetD2D16Async, 3020, cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz),
    S(cuMemsetD2D32Async, 3020, cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz),
    S(cuMemAllocAsync, 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
    S(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
    S(cuMemFreeAsync, 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
    E(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
    E(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
    E(cuDeviceSetMemPool, 11020, cuDeviceSetMemPool),
    E(cuMemPoolCreate, 11020, cuMemPoolCreate),
    E(cuMemPoolDestroy, 11020, cuMemPoolDestroy),
    E(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo),
    E(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute),
    E(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute),
    E(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    E(cuMemCreate, 10020, cuMemCreate),
    E(cuMemRelease, 10020, cuMemRelease),
    E(cuMemAddressReserve, 10020, cuMemAddressReserve),
    E(cuMemAddressFree, 10020, cuMemAddressFree),
    E(cuMemMap, 10020, cuMemMap),
    E(cuMemUnmap, 10020, cuMemUnmap),
    E(cuMemSetAccess, 10020, cuMemSetAccess),
    E(cuMemGetAllocationPropertiesFromHandle, 10020, cuMemGetAllocationPropertiesFromHandle),
    E(cuMemExportToShareableHandle, 10020, cuMemExportToShareableHandle),
    E(cuMemImportFromShareableHandle, 10020, cuMemImportFromShareableHandle),
    E(cuIpcGetMemHandle, 4010, cuIpcGetMemHandle),
    E(cuIpcOpenMemHandle, 4010, cuIpcOpenMemHandle),
    E(cuIpcOpenMemHandle, 11000, cuIpcOpenMemHandle_v2),
    E(cuIpcCloseMemHandle, 4010, cuIpcCloseMemHandle),
    E(cuArrayCreate, 3020, cuArrayCreate_v2),
    E(cuArray3DCreate, 3020, cuArray3DCreate_v2),
    E(cuArrayDestroy, 2000, cuArrayDestroy),
    E(cuMipmappedArrayCreate, 5000, cuMipmappedArrayCreate),
    E(cuMipmappedArrayDestroy, 5000, cuMipmappedArrayDestroy),
    E(cuStreamCreate, 2000, cuStreamCreate),
    E(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    E(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    S(cuStreamQuery, 2000, cuStreamQuery, cuStreamQuery_ptsz),
    S(cuStreamSynchronize, 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    S(cuStreamGetFlags, 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
    S(cuStreamGetPriority, 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz),
    S(cuStreamGetCtx, 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz),
    S(cuStreamGetId, 12000, cuStreamGetId, cuStreamGetId_ptsz),
    S(cuStreamWaitEvent, 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    S(cuStreamBeginCapture, 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
    S(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
    S(cuStreamEndCapture, 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
    S(cuStreamIsCapturing, 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
    S(cuStreamGetCaptureInfo, 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz),
    S(cuStreamGetCaptureInfo, 11030, cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz),
    S(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz),
    E(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
    E(cuEventCreate, 2000, cuEventCreate),
    E(cuEventDestroy, 4000, cuEventDestroy_v2),
    S(cuEventRecord, 2000, cuEventRecord, cuEventRecord_ptsz),
    S(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz),
    E(cuEventQuery, 2000, cuEventQuery),
    E(cuEventSynchronize, 2000, cuEventSynchronize),
    E(cuEventElapsedTime, 2000, cuEventElapsedTime),
    E(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),
    E(cuModuleLoad, 2000, cuModuleLoad),
    E(cuModuleLoadData, 2000, cuModuleLoadData),
    E(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
    E(cuModuleLoadFatBinary, 2000, cuModuleLoadFatBinary),
    E(cuModuleUnload, 2000, cuModuleUnload),
    E(cuModuleGetFunction, 2000, cuModuleGetFunction),
    E(cuModuleGetGlobal, 3020, cuModuleGetGlobal_v2),
    E(cuLibraryLoadData, 12000, cuLibraryLoadData),
    E(cuLibraryLoadFromFile, 12000, cuLibraryLoadFromFile),
    E(cuLibraryUnload, 12000, cuLibraryUnload),
    E(cuLibraryGetKernel, 12000, cuLibraryGetKernel),
    E(cuLibraryGetModule, 12000, cuLibraryGetModule),
    E(cuKernelGetFunction, 12000, cuKernelGetFunction),
    E(cuFuncGetAttribute, 2020, cuFuncGetAttribute),
    E(cuFuncSetAttribute, 9000, cuFuncSetAttribute),
    E(cuFuncSetCacheConfig, 3000, cuFuncSetCacheConfig),
    S(cuLaunchKernel, 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
    S(cuLaunchKernelEx, 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
    S(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz),
    E(cuLaunchCooperativeKernelMultiDevice, 9000, cuLaunchCooperativeKernelMultiDevice),
    E(cuFuncSetBlockShape, 2000, cuFuncSetBlockShape),
    E(cuFuncSetSharedSize, 2000, cuFuncSetSharedSize),
    E(cuParamSetSize, 2000, cuParamSetSize),
    E(cuParamSeti, 2000, cuParamSeti),
    E(cuParamSetf, 2000, cuParamSetf),
    E(cuParamSetv, 2000, cuParamSetv),
    E(cuLaunch, 2000, cuLaunch),
    E(cuLaunchGrid, 2000, cuLaunchGrid),
    E(cuLaunchGridAsync, 2000, cuLaunchGridAsync),
    E(cuGraphCreate, 10000, cuGraphCreate),
    E(cuGraphDestroy, 10000, cuGraphDestroy),
    E(cuGraphAddKernelNode, 10000, cuGraphAddKernelNode),
    E(cuGraphAddKernelNode, 12000, cuGraphAddKernelNode_v2),
    E(cuGraphInstantiate, 10000, cuGraphInstantiate),
    E(cuGraphInstantiate, 11000, cuGraphInstantiate_v2),
    E(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags),
    E(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    E(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
    S(cuGraphLaunch, 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
    S(cuGraphUpload, 11010, cuGraphUpload, cuGraphUpload_ptsz),
    S(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams,
      cuGraphInstantiateWithParams_ptsz),
    E(cuGraphExecGetFlags, 12000, cuGraphExecGetFlags),
    E(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    E(cuPointerGetAttributes, 7000, cuPointerGetAttributes),
    E(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2),
    E(cuDeviceCanAccessPeer, 4000, cuDeviceCanAccessPeer),
    E(cuDeviceGetByPCIBusId, 4010, cuDeviceGetByPCIBusId),
    E(cuModuleGetLoadingMode, 11070, cuModuleGetLoadingMode),
    E(cuFuncGetName, 12030, cuFuncGetName),
    E(cuKernelGetName, 12030, cuKernelGetName),
    E(cuKernelGetAttribute, 12000, cuKernelGetAttribute),
    E(cuKernelSetAttribute, 12000, cuKernelSetAttribute),
    E(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050,
      cuOccupancyMaxActiveBlocksPerMultiprocessor),
    E(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000,
      cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
    E(cuOccupancyMaxPotentialBlockSize, 6050, cuOccupancyMaxPotentialBlockSize),
    S(cuStreamGetDevice, 12080, cuStreamGetDevice, cuStreamGetDevice_ptsz),
    S(cuLaunchHostFunc, 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
    S(cuStreamAddCallback, 5000, cuStreamAddCallback, cuStreamAddCallback_ptsz),
};

CUdriverProcAddressQueryResult sim_procaddr_find(const char *name, int cudaVersion, int per_thread,
                                                 const struct sim_procaddr_entry **ret) {
  const struct sim_procaddr_entry *best = NULL;
  int known = 0;
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
    const struct sim_procaddr_entry *e = &table[i];
    if (strcmp(e->name, name) != 0)
      continue;
    known = 1;
    if (e->version <= cudaVersion && (!best || e->version > best->version))
      best = e;
  }
  if (!known)
    return CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (!best)
    return CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  *ret = best; /* both forms travel together; the caller picks by per_thread */
  return CU_GET_PROC_ADDRESS_SUCCESS;
}

SIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus) {
  if (!symbol || !pfn)
    return CUDA_ERROR_INVALID_VALUE;
  const struct sim_procaddr_entry *e = NULL;
  int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  CUdriverProcAddressQueryResult st = sim_procaddr_find(symbol, cudaVersion, per_thread, &e);
  if (secure_getenv("GSLICE_SIM_TRACE"))
    fprintf(stderr, "gslice-sim: cuGetProcAddress(%s, %d, %llu) -> %d\n", symbol, cudaVersion,
            (unsigned long long)flags, (int)st);
  if (symbolStatus)
    *symbolStatus = st;
  if (st != CU_GET_PROC_ADDRESS_SUCCESS) {
    *pfn = NULL;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = per_thread && e->fn_ptds ? e->fn_ptds : e->fn;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                  cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* The runtime asks for private export tables through here; they are undocumented, so the
 * sim refuses them (GSLICE_SIM_TRACE shows which one was asked for). */
SIM_API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId) {
  if (secure_getenv("GSLICE_SIM_TRACE") && pExportTableId) {
    const unsigned char *u = (const unsigned char *)pExportTableId->bytes;
    fprintf(stderr, "gslice-sim: cuGetExportTable(");
    for (int i = 0; i < 16; i++)
      fprintf(stderr, "%02x", u[i]);
    fprintf(stderr, ")\n");
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}
