/* SPDX-License-Identifier: Apache-2.0 */
/* The lists of driver and NVML entry points the hook wraps or calls (X-macros): the one place
 * both the real table (hook.h) and the export list (exports.map.c) come from. No includes. */
#pragma once

/* Entry points the hook exports and wraps: (name). Each one's real address is also recognized
 * in dlsym and cuGetProcAddress results and swapped for the wrapper. */
#define GS_CUDA_WRAPPED(X)                                                                         \
  X(cuInit)                                                                                        \
  X(cuGetProcAddress)                                                                              \
  X(cuGetProcAddress_v2)                                                                           \
  X(cuMemAlloc_v2)                                                                                 \
  X(cuMemAllocPitch_v2)                                                                            \
  X(cuMemAllocManaged)                                                                             \
  X(cuMemFree_v2)                                                                                  \
  X(cuMemAllocAsync)                                                                               \
  X(cuMemAllocAsync_ptsz)                                                                          \
  X(cuMemAllocFromPoolAsync)                                                                       \
  X(cuMemAllocFromPoolAsync_ptsz)                                                                  \
  X(cuMemFreeAsync)                                                                                \
  X(cuMemFreeAsync_ptsz)                                                                           \
  X(cuMemPoolTrimTo)                                                                               \
  X(cuMemPoolDestroy)                                                                              \
  X(cuMemPoolCreate)                                                                               \
  X(cuDeviceGetDefaultMemPool)                                                                     \
  X(cuDeviceGetMemPool)                                                                            \
  X(cuMemCreate)                                                                                   \
  X(cuMemRelease)                                                                                  \
  X(cuMemMap)                                                                                      \
  X(cuMemUnmap)                                                                                    \
  X(cuMemImportFromShareableHandle)                                                                \
  X(cuArrayCreate_v2)                                                                              \
  X(cuArray3DCreate_v2)                                                                            \
  X(cuArrayDestroy)                                                                                \
  X(cuMipmappedArrayCreate)                                                                        \
  X(cuMipmappedArrayDestroy)                                                                       \
  X(cuIpcOpenMemHandle)                                                                            \
  X(cuIpcOpenMemHandle_v2)                                                                         \
  X(cuIpcCloseMemHandle)                                                                           \
  X(cuCtxCreate)                                                                                   \
  X(cuCtxCreate_v2)                                                                                \
  X(cuCtxCreate_v3)                                                                                \
  X(cuCtxCreate_v4)                                                                                \
  X(cuCtxDestroy)                                                                                  \
  X(cuCtxDestroy_v2)                                                                               \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuDevicePrimaryCtxRelease)                                                                     \
  X(cuDevicePrimaryCtxRelease_v2)                                                                  \
  X(cuDevicePrimaryCtxReset)                                                                       \
  X(cuDevicePrimaryCtxReset_v2)                                                                    \
  X(cuMemGetInfo_v2)                                                                               \
  X(cuDeviceTotalMem_v2)                                                                           \
  X(cuLaunchKernel)                                                                                \
  X(cuLaunchKernel_ptsz)                                                                           \
  X(cuLaunchKernelEx)                                                                              \
  X(cuLaunchKernelEx_ptsz)                                                                         \
  X(cuLaunchCooperativeKernel)                                                                     \
  X(cuLaunchCooperativeKernel_ptsz)                                                                \
  X(cuGraphLaunch)                                                                                 \
  X(cuGraphLaunch_ptsz)                                                                            \
  X(cuCtxSynchronize)                                                                              \
  X(cuStreamSynchronize)                                                                           \
  X(cuStreamSynchronize_ptsz)                                                                      \
  X(cuEventSynchronize)                                                                            \
  X(cuStreamBeginCapture)                                                                          \
  X(cuStreamBeginCapture_ptsz)                                                                     \
  X(cuStreamBeginCapture_v2)                                                                       \
  X(cuStreamBeginCapture_v2_ptsz)                                                                  \
  X(cuStreamBeginCaptureToGraph)                                                                   \
  X(cuStreamBeginCaptureToGraph_ptsz)                                                              \
  X(cuStreamEndCapture)                                                                            \
  X(cuStreamEndCapture_ptsz)                                                                       \
  X(cuStreamDestroy)                                                                               \
  X(cuStreamDestroy_v2)

/* Real entry points the hook (and the compute gate) call but do not wrap. */
#define GS_CUDA_CALLED(X)                                                                          \
  X(cuDriverGetVersion)                                                                            \
  X(cuGetErrorString)                                                                              \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetCount)                                                                              \
  X(cuDeviceGetUuid)                                                                               \
  X(cuDeviceGetUuid_v2)                                                                            \
  X(cuDeviceGetAttribute)                                                                          \
  X(cuDevicePrimaryCtxGetState)                                                                    \
  X(cuCtxGetCurrent)                                                                               \
  X(cuCtxSetCurrent)                                                                               \
  X(cuCtxGetDevice)                                                                                \
  X(cuCtxPushCurrent_v2)                                                                           \
  X(cuCtxPopCurrent_v2)                                                                            \
  X(cuStreamGetCtx)                                                                                \
  X(cuStreamGetDevice)                                                                             \
  X(cuStreamQuery)                                                                                 \
  X(cuStreamQuery_ptsz)                                                                            \
  X(cuStreamIsCapturing)                                                                           \
  X(cuThreadExchangeStreamCaptureMode)                                                             \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy_v2)                                                                             \
  X(cuEventRecord)                                                                                 \
  X(cuEventRecord_ptsz)                                                                            \
  X(cuEventQuery)                                                                                  \
  X(cuEventElapsedTime)                                                                            \
  X(cuEventElapsedTime_v2)                                                                         \
  X(cuMemPoolGetAttribute)                                                                         \
  X(cuMemGetAllocationPropertiesFromHandle)                                                        \
  X(cuMemGetAddressRange_v2)

/* NVML as nvidia-smi reads it (docs/nvml.md): memory, the device list, the process lists and
 * utilization answer for the slice; samples, accounting and field values too (nvml_more.c); video
 * engines and GPM (nvml_engines.c), topology and MIG (nvml_topo.c). */
#define GS_NVML_WRAPPED(X)                                                                         \
  X(nvmlDeviceGetMemoryInfo)                                                                       \
  X(nvmlDeviceGetMemoryInfo_v2)                                                                    \
  X(nvmlDeviceGetCount)                                                                            \
  X(nvmlDeviceGetCount_v2)                                                                         \
  X(nvmlDeviceGetHandleByIndex)                                                                    \
  X(nvmlDeviceGetHandleByIndex_v2)                                                                 \
  X(nvmlDeviceGetHandleByUUID)                                                                     \
  X(nvmlDeviceGetHandleByPciBusId_v2)                                                              \
  X(nvmlDeviceGetIndex)                                                                            \
  X(nvmlDeviceGetComputeRunningProcesses)                                                          \
  X(nvmlDeviceGetComputeRunningProcesses_v2)                                                       \
  X(nvmlDeviceGetComputeRunningProcesses_v3)                                                       \
  X(nvmlDeviceGetGraphicsRunningProcesses)                                                         \
  X(nvmlDeviceGetGraphicsRunningProcesses_v2)                                                      \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3)                                                      \
  X(nvmlDeviceGetMPSComputeRunningProcesses)                                                       \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v2)                                                    \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v3)                                                    \
  X(nvmlDeviceGetRunningProcessDetailList)                                                         \
  X(nvmlDeviceGetUtilizationRates)                                                                 \
  X(nvmlDeviceGetProcessUtilization)                                                               \
  X(nvmlDeviceGetProcessesUtilizationInfo)                                                         \
  X(nvmlDeviceGetHandleBySerial)                                                                   \
  X(nvmlDeviceGetHandleByPciBusId)                                                                 \
  X(nvmlDeviceGetSamples)                                                                          \
  X(nvmlDeviceGetAccountingPids)                                                                   \
  X(nvmlDeviceGetAccountingStats)                                                                  \
  X(nvmlDeviceGetFieldValues)                                                                      \
  X(nvmlDeviceGetEncoderSessions)                                                                  \
  X(nvmlDeviceGetEncoderStats)                                                                     \
  X(nvmlDeviceGetEncoderCapacity)                                                                  \
  X(nvmlDeviceGetEncoderUtilization)                                                               \
  X(nvmlDeviceGetDecoderUtilization)                                                               \
  X(nvmlDeviceGetJpgUtilization)                                                                   \
  X(nvmlDeviceGetOfaUtilization)                                                                   \
  X(nvmlDeviceGetFBCSessions)                                                                      \
  X(nvmlDeviceGetFBCStats)                                                                         \
  X(nvmlGpmQueryDeviceSupport)                                                                     \
  X(nvmlGpmSampleGet)                                                                              \
  X(nvmlGpmMigSampleGet)                                                                           \
  X(nvmlGpmMetricsGet)                                                                             \
  X(nvmlDeviceGetTopologyCommonAncestor)                                                           \
  X(nvmlDeviceGetTopologyNearestGpus)                                                              \
  X(nvmlSystemGetTopologyGpuSet)                                                                   \
  X(nvmlDeviceGetP2PStatus)                                                                        \
  X(nvmlDeviceOnSameBoard)                                                                         \
  X(nvmlDeviceGetMigMode)                                                                          \
  X(nvmlDeviceGetMaxMigDeviceCount)                                                                \
  X(nvmlDeviceGetMigDeviceHandleByIndex)                                                           \
  X(nvmlDeviceGetGpuInstances)                                                                     \
  X(nvmlDeviceGetGpuInstanceById)                                                                  \
  X(nvmlDeviceIsMigDeviceHandle)                                                                   \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)                                                  \
  X(nvmlDeviceGetGpuInstanceId)                                                                    \
  X(nvmlDeviceGetComputeInstanceId)                                                                \
  X(nvmlDeviceGetHandleByUUIDV)                                                                    \
  X(nvmlDeviceGetNvLinkRemotePciInfo_v2)                                                           \
  X(nvmlDeviceGetPcieThroughput)                                                                   \
  X(nvmlDeviceGetNvLinkRemotePciInfo)                                                              \
  X(nvmlDeviceGetCurrentClocksEventReasons)                                                        \
  X(nvmlDeviceGetCurrentClocksThrottleReasons)                                                     \
  X(nvmlDeviceGetConfComputeProtectedMemoryUsage)                                                  \
  X(nvmlDeviceRegisterEvents)

#define GS_NVML_CALLED(X)                                                                          \
  X(nvmlInit_v2)                                                                                   \
  X(nvmlShutdown)                                                                                  \
  X(nvmlDeviceGetUUID)
