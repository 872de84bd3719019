/* SPDX-License-Identifier: Apache-2.0 */
/* The part of NVML gslice uses (types, values, ABI-named prototypes), declared from
 * NVIDIA's NVML reference because no nvml.h ships with the toolkit here; the sim
 * implements it and the hook intercepts it, so both agree on one layout. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes: the values are NVML's ABI, never renumber them. */
typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* nvmlInitWithFlags flags. */
#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

/* Versioned structs carry (size | version << 24) in their first field. */
#define NVML_STRUCT_VERSION(data, ver)                                                             \
  (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

typedef struct nvmlMemory_st {
  unsigned long long total; /* bytes */
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

/* v1's used is reserved + allocated; v2 gives the driver's reservation apart and its used is
 * only what is allocated (0 on an idle GPU): reserved + used + free = total. */
typedef struct nvmlMemory_v2_st {
  unsigned int version; /* must be nvmlMemory_v2 */
  unsigned long long total;
  unsigned long long reserved; /* held by the driver/firmware */
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)
#ifndef __cplusplus
/* The driver checks the version word against its own: 0x2000028 on an H200, driver 580. */
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t is NVML's 40-byte layout");
#endif

typedef struct nvmlUtilization_st {
  unsigned int gpu;    /* percent of the sample period a kernel was running */
  unsigned int memory; /* percent of the sample period memory was read or written */
} nvmlUtilization_t;

/* Layout taken by the unsuffixed nvmlDeviceGetComputeRunningProcesses (v1 ABI). */
typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory; /* bytes; NVML_VALUE_NOT_AVAILABLE if unknown */
} nvmlProcessInfo_v1_t;

/* Layout taken by the _v2 and _v3 entry points. */
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;     /* 0xFFFFFFFF when not in MIG mode */
  unsigned int computeInstanceId; /* 0xFFFFFFFF when not in MIG mode */
} nvmlProcessInfo_t;
typedef nvmlProcessInfo_t nvmlProcessInfo_v2_t;

#define NVML_VALUE_NOT_AVAILABLE (-1)
/* gpuInstanceId / computeInstanceId of a process on a GPU not in MIG mode. */
#define NVML_NO_INSTANCE 0xFFFFFFFFu

typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp; /* CPU timestamp in microseconds */
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlDeviceGetRunningProcessDetailList (NVML 12.4+): one list per mode, entries in the caller's
 * array, the version word checked. */
typedef enum nvmlProcessMode_enum {
  NVML_PROCESS_MODE_COMPUTE = 0,
  NVML_PROCESS_MODE_GRAPHICS = 1,
  NVML_PROCESS_MODE_MPS = 2
} nvmlProcessMode_t;
typedef struct nvmlProcessDetail_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory; /* confidential computing's; 0 otherwise */
} nvmlProcessDetail_v1_t;
typedef struct nvmlProcessDetailList_v1_st {
  unsigned int version; /* nvmlProcessDetailList_v1 */
  unsigned int mode;    /* nvmlProcessMode_t */
  unsigned int numProcArrayEntries;
  nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_v1_t;
typedef nvmlProcessDetailList_v1_t nvmlProcessDetailList_t;
#define nvmlProcessDetailList_v1 NVML_STRUCT_VERSION(ProcessDetailList, 1)
#ifndef __cplusplus
_Static_assert(sizeof(nvmlProcessDetail_v1_t) == 32, "nvmlProcessDetail_v1_t is NVML's layout");
_Static_assert(sizeof(nvmlProcessDetailList_v1_t) == 24, "its version word is 0x1000018");
#endif

/* nvmlDeviceGetProcessesUtilizationInfo (NVML 12.4+, driver 550+): the per-process samples in
 * a versioned list; Blackwell has only this one. */
typedef struct nvmlProcessUtilizationInfo_v1_st {
  unsigned long long timeStamp; /* CPU timestamp in microseconds */
  unsigned int pid;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
  unsigned int jpgUtil;
  unsigned int ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;
typedef struct nvmlProcessesUtilizationInfo_v1_st {
  unsigned int version;             /* nvmlProcessesUtilizationInfo_v1 */
  unsigned int processSamplesCount; /* in: the array's entries; out: those written or needed */
  unsigned long long lastSeenTimeStamp;
  nvmlProcessUtilizationInfo_v1_t *procUtilArray;
} nvmlProcessesUtilizationInfo_v1_t;
typedef nvmlProcessesUtilizationInfo_v1_t nvmlProcessesUtilizationInfo_t;
#define nvmlProcessesUtilizationInfo_v1 NVML_STRUCT_VERSION(ProcessesUtilizationInfo, 1)
#ifndef __cplusplus
_Static_assert(sizeof(nvmlProcessUtilizationInfo_v1_t) == 40, "NVML strides its array by 40");
_Static_assert(sizeof(nvmlProcessesUtilizationInfo_v1_t) == 24, "its version word is 0x1000018");
#endif

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "domain:bus:device.0", 8+ digits */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId; /* device id << 16 | vendor id */
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:01:00.0" */
} nvmlPciInfo_t;

/* What nvidia-smi's default view reads beside memory, processes and utilization (the values are
 * NVML's ABI). */
typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;
typedef enum nvmlComputeMode_enum {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3
} nvmlComputeMode_t;
typedef enum nvmlPStates_enum { NVML_PSTATE_0 = 0, NVML_PSTATE_UNKNOWN = 32 } nvmlPstates_t;

/* nvmlDeviceGetSamples: what the driver's sample buffers hold (the values are NVML's ABI). */
typedef enum nvmlSamplingType_enum {
  NVML_TOTAL_POWER_SAMPLES = 0,
  NVML_GPU_UTILIZATION_SAMPLES = 1,
  NVML_MEMORY_UTILIZATION_SAMPLES = 2,
  NVML_ENC_UTILIZATION_SAMPLES = 3,
  NVML_DEC_UTILIZATION_SAMPLES = 4,
  NVML_PROCESSOR_CLK_SAMPLES = 5,
  NVML_MEMORY_CLK_SAMPLES = 6,
  NVML_MODULE_POWER_SAMPLES = 7,
  NVML_JPG_UTILIZATION_SAMPLES = 8,
  NVML_OFA_UTILIZATION_SAMPLES = 9,
  NVML_SAMPLINGTYPE_COUNT
} nvmlSamplingType_t;
typedef enum nvmlValueType_enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5
} nvmlValueType_t;
typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;
typedef struct nvmlSample_st {
  unsigned long long timeStamp; /* CPU timestamp in microseconds */
  nvmlValue_t sampleValue;
} nvmlSample_t;
/* Accounting (nvmlDeviceGetAccountingPids/Stats): per process, kept by the driver while
 * accounting mode is on, for running and finished processes alike. */
typedef struct nvmlAccountingStats_st {
  unsigned int gpuUtilization;       /* percent of the process's lifetime a kernel of it ran */
  unsigned int memoryUtilization;    /* percent of it memory was read or written */
  unsigned long long maxMemoryUsage; /* bytes */
  unsigned long long time;           /* ms the process ran */
  unsigned long long startTime;      /* CPU timestamp, us */
  unsigned int isRunning;
  unsigned int reserved[5];
} nvmlAccountingStats_t;
typedef struct nvmlBAR1Memory_st {
  unsigned long long bar1Total; /* bytes of the BAR1 aperture */
  unsigned long long bar1Free;
  unsigned long long bar1Used;
} nvmlBAR1Memory_t;
/* nvmlDeviceGetFieldValues: each value carries its own nvmlReturn. The field ids gslice names
 * (NVML's ABI, nvml.h's NVML_FI_*). */
typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId; /* the link, or 0 */
  long long timestamp;  /* CPU timestamp, us */
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;
#ifndef __cplusplus
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t is NVML's 40-byte layout");
_Static_assert(sizeof(nvmlAccountingStats_t) == 56, "nvmlAccountingStats_t is NVML's layout");
#endif
#define NVML_FI_DEV_ECC_CURRENT 1
#define NVML_FI_DEV_NVLINK_BANDWIDTH_C0_L0 60 /* ..73: NVLink traffic counters */
#define NVML_FI_DEV_NVLINK_BANDWIDTH_C1_TOTAL 73
#define NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION 78
#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83
#define NVML_FI_DEV_NVLINK_BANDWIDTH_C0_L6 120 /* ..131: NVLink traffic counters */
#define NVML_FI_DEV_NVLINK_BANDWIDTH_C1_L11 131
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138 /* ..141: NVLink throughput (KiB) */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX 141
#define NVML_FI_DEV_POWER_INSTANT 186
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197 /* and 198 (RX): PCIe bytes since load (R555) */
#define NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198
#define NVML_FI_DEV_IS_MIG_MODE_INDEPENDENT_MIG_QUERY_CAPABLE 199 /* the last NVML 12.4 names */
/* Prototypes under their ABI (exported) names. nvml.h maps the unsuffixed names to
 * the newest versions with macros; we do the same unless the includer defines
 * NVML_NO_UNVERSIONED_FUNC_DEFS, e.g. to define the old unsuffixed entry points. */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
/* The process lists' ABI versions, one exported entry point each (X-macro): (name, the list's
 * nvmlProcessMode_t, the ABI version, the entry's type). v1 takes nvmlProcessInfo_v1_t, _v2 and
 * _v3 nvmlProcessInfo_t; all have the compute list's count protocol. Their prototypes (below),
 * the sim's definitions and the hook's wrappers all come from this one list. */
#define NVML_PROCESS_LISTS(X)                                                                      \
  X(nvmlDeviceGetComputeRunningProcesses_v3, NVML_PROCESS_MODE_COMPUTE, 3, nvmlProcessInfo_t)      \
  X(nvmlDeviceGetComputeRunningProcesses_v2, NVML_PROCESS_MODE_COMPUTE, 2, nvmlProcessInfo_v2_t)   \
  X(nvmlDeviceGetComputeRunningProcesses, NVML_PROCESS_MODE_COMPUTE, 1, nvmlProcessInfo_v1_t)      \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3, NVML_PROCESS_MODE_GRAPHICS, 3, nvmlProcessInfo_t)    \
  X(nvmlDeviceGetGraphicsRunningProcesses_v2, NVML_PROCESS_MODE_GRAPHICS, 2, nvmlProcessInfo_v2_t) \
  X(nvmlDeviceGetGraphicsRunningProcesses, NVML_PROCESS_MODE_GRAPHICS, 1, nvmlProcessInfo_v1_t)    \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v3, NVML_PROCESS_MODE_MPS, 3, nvmlProcessInfo_t)       \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v2, NVML_PROCESS_MODE_MPS, 2, nvmlProcessInfo_v2_t)    \
  X(nvmlDeviceGetMPSComputeRunningProcesses, NVML_PROCESS_MODE_MPS, 1, nvmlProcessInfo_v1_t)
#define NVML_PROCESS_LIST_PROTOTYPE(fn, mode, abi, type)                                           \
  nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos);
NVML_PROCESS_LISTS(NVML_PROCESS_LIST_PROTOTYPE)
#undef NVML_PROCESS_LIST_PROTOTYPE
/* Count call: procArray NULL or numProcArrayEntries too small -> NVML_ERROR_INSUFFICIENT_SIZE
 * (SUCCESS when there is none) with numProcArrayEntries = the entries needed. */
nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                   nvmlProcessDetailList_t *plist);
/* Count call: procUtilArray NULL (or too few entries) -> NVML_ERROR_INSUFFICIENT_SIZE with
 * processSamplesCount = the entries needed; NVML_ERROR_NOT_FOUND: no sample since
 * lastSeenTimeStamp. */
nvmlReturn_t
nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                      nvmlProcessesUtilizationInfo_t *procesesUtilInfo);
/* pciBusId: "domain:bus:device.function" in hex, as nvmlPciInfo_t's busId or busIdLegacy. */
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
/* The name of a process by pid, read from the caller's own /proc (so a host pid means nothing
 * inside a container's namespace): NVML_ERROR_NOT_FOUND when there is no such process. */
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power); /* milliwatts */
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed);
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState);
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode);
/* Call first with utilization NULL: NVML_ERROR_INSUFFICIENT_SIZE and *processSamplesCount = the
 * entries to allocate (NVML's sample buffer, not the number of processes); a smaller count
 * later is refused the same way. NVML_ERROR_NOT_FOUND: no sample since lastSeenTimeStamp. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp);

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length);
nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device);
/* Samples NULL: SUCCESS with *sampleCount = the entries to allocate; else as many as fit, the
 * count written; NVML_ERROR_NOT_FOUND when none is newer than lastSeenTimeStamp. */
nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type,
                                  unsigned long long lastSeenTimeStamp,
                                  nvmlValueType_t *sampleValType, unsigned int *sampleCount,
                                  nvmlSample_t *samples);
nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, nvmlEnableState_t *mode);
/* *count below the pids there are: NVML_ERROR_INSUFFICIENT_SIZE with *count = that number;
 * NVML_ERROR_NOT_SUPPORTED where accounting mode is off. */
nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int *count,
                                         unsigned int *pids);
/* NVML_ERROR_NOT_FOUND: no stats of that pid. */
nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int pid,
                                          nvmlAccountingStats_t *stats);
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values);
/* Video engines (NVENC, NvFBC): sessions by owning pid, the device's aggregates and the engines'
 * utilization (NVML's ABI; the session structs are arrays of plain unsigned ints). */
typedef unsigned int nvmlVgpuInstance_t;
typedef enum nvmlEncoderType_enum {
  NVML_ENCODER_QUERY_H264 = 0,
  NVML_ENCODER_QUERY_HEVC = 1,
  NVML_ENCODER_QUERY_AV1 = 2,
  NVML_ENCODER_QUERY_UNKNOWN = 255
} nvmlEncoderType_t;
typedef struct nvmlEncoderSessionInfo_st {
  unsigned int sessionId;
  unsigned int pid; /* the owning process, as NVML shows pids */
  nvmlVgpuInstance_t vgpuInstance;
  nvmlEncoderType_t codecType;
  unsigned int hResolution;
  unsigned int vResolution;
  unsigned int averageFps;
  unsigned int averageLatency; /* us */
} nvmlEncoderSessionInfo_t;
typedef enum nvmlFBCSessionType_enum {
  NVML_FBC_SESSION_TYPE_UNKNOWN = 0,
  NVML_FBC_SESSION_TYPE_TOSYS = 1,
  NVML_FBC_SESSION_TYPE_CUDA = 2,
  NVML_FBC_SESSION_TYPE_VID = 3,
  NVML_FBC_SESSION_TYPE_HWENC = 4
} nvmlFBCSessionType_t;
typedef struct nvmlFBCStats_st {
  unsigned int sessionsCount;
  unsigned int averageFPS;
  unsigned int averageLatency; /* us */
} nvmlFBCStats_t;
typedef struct nvmlFBCSessionInfo_st {
  unsigned int sessionId;
  unsigned int pid;
  nvmlVgpuInstance_t vgpuInstance;
  unsigned int displayOrdinal;
  nvmlFBCSessionType_t sessionType;
  unsigned int sessionFlags;
  unsigned int hMaxResolution;
  unsigned int vMaxResolution;
  unsigned int hResolution;
  unsigned int vResolution;
  unsigned int averageFPS;
  unsigned int averageLatency;
} nvmlFBCSessionInfo_t;
#ifndef __cplusplus
_Static_assert(sizeof(nvmlEncoderSessionInfo_t) == 32, "nvmlEncoderSessionInfo_t is NVML's");
_Static_assert(sizeof(nvmlFBCSessionInfo_t) == 48, "nvmlFBCSessionInfo_t is NVML's");
#endif
/* Sessions: *sessionCount 0 asks for the count (SUCCESS); too small a count is
 * NVML_ERROR_INSUFFICIENT_SIZE with the count needed; else the sessions and their count. */
nvmlReturn_t nvmlDeviceGetEncoderSessions(nvmlDevice_t device, unsigned int *sessionCount,
                                          nvmlEncoderSessionInfo_t *sessionInfos);
nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int *sessionCount,
                                       unsigned int *averageFps, unsigned int *averageLatency);
nvmlReturn_t nvmlDeviceGetEncoderCapacity(nvmlDevice_t device, nvmlEncoderType_t encoderQueryType,
                                          unsigned int *encoderCapacity); /* percent left */
/* The video engines' utilization over their sampling period (X-macro: the call, whether its
 * engine is the encoder): their prototypes, the sim's definitions and the hook's wrappers. */
#define NVML_ENGINE_UTILIZATIONS(X)                                                                \
  X(nvmlDeviceGetEncoderUtilization, 1)                                                            \
  X(nvmlDeviceGetDecoderUtilization, 0)                                                            \
  X(nvmlDeviceGetJpgUtilization, 0)                                                                \
  X(nvmlDeviceGetOfaUtilization, 0)
#define NVML_ENGINE_UTILIZATION_PROTOTYPE(fn, encoder)                                             \
  nvmlReturn_t fn(nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs);
NVML_ENGINE_UTILIZATIONS(NVML_ENGINE_UTILIZATION_PROTOTYPE)
#undef NVML_ENGINE_UTILIZATION_PROTOTYPE
nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *fbcStats);
nvmlReturn_t nvmlDeviceGetFBCSessions(nvmlDevice_t device, unsigned int *sessionCount,
                                      nvmlFBCSessionInfo_t *sessionInfo);

/* GPM (Hopper+): opaque sample buffers, metrics computed from two of them. */
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
#define NVML_GPM_SUPPORT_VERSION 1
#define NVML_GPM_METRICS_GET_VERSION 1
/* The array's length in driver 550+'s nvml.h (older headers had fewer: numMetrics bounds it). */
#define NVML_GPM_METRIC_MAX 333
#define NVML_GPM_METRIC_GRAPHICS_UTIL 1
#define NVML_GPM_METRIC_SM_UTIL 2
#define NVML_GPM_METRIC_SM_OCCUPANCY 3
typedef struct nvmlGpmSupport_st {
  unsigned int version; /* NVML_GPM_SUPPORT_VERSION */
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;
typedef struct nvmlGpmMetric_st {
  unsigned int metricId; /* in */
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char *shortName;
    char *longName;
    char *unit;
  } metricInfo;
} nvmlGpmMetric_t;
typedef struct nvmlGpmMetricsGet_st {
  unsigned int version; /* NVML_GPM_METRICS_GET_VERSION */
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
#ifndef __cplusplus
_Static_assert(sizeof(nvmlGpmMetric_t) == 40, "nvmlGpmMetric_t is NVML's 40-byte layout");
#endif
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport);
nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample);
nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample);
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample);
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample);
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet);

/* Topology: how two GPUs are connected, and which GPUs are near one or a CPU. */
typedef enum nvmlGpuLevel_enum {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;
typedef enum nvmlGpuP2PStatus_enum {
  NVML_P2P_STATUS_OK = 0,
  NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED = 1,
  NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
  NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
  NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
  NVML_P2P_STATUS_NOT_SUPPORTED = 5,
  NVML_P2P_STATUS_UNKNOWN = 6
} nvmlGpuP2PStatus_t;
typedef enum nvmlGpuP2PCapsIndex_enum {
  NVML_P2P_CAPS_INDEX_READ = 0,
  NVML_P2P_CAPS_INDEX_WRITE = 1,
  NVML_P2P_CAPS_INDEX_NVLINK = 2,
  NVML_P2P_CAPS_INDEX_ATOMICS = 3,
  NVML_P2P_CAPS_INDEX_PCI = 4,
  NVML_P2P_CAPS_INDEX_UNKNOWN = 5
} nvmlGpuP2PCapsIndex_t;
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo);
/* *count 0: set to the number of GPUs found (SUCCESS); else up to *count handles written and
 * *count set to their number. */
nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device, nvmlGpuTopologyLevel_t level,
                                              unsigned int *count, nvmlDevice_t *deviceArray);
nvmlReturn_t nvmlSystemGetTopologyGpuSet(unsigned int cpuNumber, unsigned int *count,
                                         nvmlDevice_t *deviceArray);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus);
nvmlReturn_t nvmlDeviceOnSameBoard(nvmlDevice_t device1, nvmlDevice_t device2, int *onSameBoard);

/* MIG: the mode (NVML_DEVICE_MIG_DISABLE 0, _ENABLE 1), MIG device handles, GPU instances. */
#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count);
/* NVML_ERROR_NOT_FOUND: no MIG device at index (MIG off, or none created there). */
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice);
/* NVML_ERROR_NOT_SUPPORTED where MIG mode is off. */
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count);
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance);
/* A MIG device handle (a compute instance, usable with some calls as a GPU's): *isMigDevice 1
 * for one, 0 for a GPU. */
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice);
/* The GPU a MIG device handle is part of. */
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device);
/* A MIG device's GPU and compute instance ids (NVML_ERROR_NOT_SUPPORTED for a GPU's handle). */
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id);
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0
#define NVML_GPU_INSTANCE_PROFILE_COUNT 15 /* profile ids 0..14 (driver 550+) */

/* nvmlDeviceGetHandleByUUIDV (R560): the UUID in ASCII ("GPU-..." or "MIG-...") or its 16
 * bytes, the version word checked. */
#define NVML_DEVICE_UUID_ASCII_LEN 41
#define NVML_DEVICE_UUID_BINARY_LEN 16
typedef enum nvmlUUIDType_enum {
  NVML_UUID_TYPE_NONE = 0,
  NVML_UUID_TYPE_ASCII = 1,
  NVML_UUID_TYPE_BINARY = 2
} nvmlUUIDType_t;
typedef union nvmlUUIDValue_st {
  char str[NVML_DEVICE_UUID_ASCII_LEN];
  unsigned char bytes[NVML_DEVICE_UUID_BINARY_LEN];
} nvmlUUIDValue_t;
typedef struct nvmlUUID_v1_st {
  unsigned int version; /* nvmlUUID_v1 */
  unsigned int type;    /* nvmlUUIDType_t */
  nvmlUUIDValue_t value;
} nvmlUUID_v1_t;
typedef nvmlUUID_v1_t nvmlUUID_t;
#define nvmlUUID_v1 NVML_STRUCT_VERSION(UUID, 1)
#ifndef __cplusplus
_Static_assert(sizeof(nvmlUUID_v1_t) == 52, "nvmlUUID_v1_t is NVML's layout: version 0x1000034");
#endif
nvmlReturn_t nvmlDeviceGetHandleByUUIDV(const nvmlUUID_t *uuid, nvmlDevice_t *device);

/* NVLink: the far end of a link (another GPU, an NVSwitch, a CPU) by its PCI address. */
typedef enum nvmlIntNvLinkDeviceType_enum {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;
#define NVML_NVLINK_MAX_LINKS 18
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType);

/* PCIe throughput over the last 20 ms, KB/s, every process's traffic. */
typedef enum nvmlPcieUtilCounter_enum {
  NVML_PCIE_UTIL_TX_BYTES = 0,
  NVML_PCIE_UTIL_RX_BYTES = 1,
  NVML_PCIE_UTIL_COUNT
} nvmlPcieUtilCounter_t;
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value);

/* Clock event reasons (R535; "throttle reasons" before, the same bits and call): why the clocks
 * are where they are. */
#define nvmlClocksEventReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksEventReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksEventReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksEventReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x0000000000000100ULL
#define nvmlClocksEventReasonNone 0x0000000000000000ULL
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons);
nvmlReturn_t
nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device,
                                         unsigned long long *supportedClocksEventReasons);
/* Energy since the driver was last loaded, millijoules (Volta and newer). */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy);
/* Confidential computing: the protected memory's total, used and free (Hopper, CC on). */
nvmlReturn_t nvmlDeviceGetConfComputeProtectedMemoryUsage(nvmlDevice_t device,
                                                          nvmlMemory_t *memory);

/* Event sets: a device's events (ECC errors, P-state and clock changes, Xid errors) as they come.
 */
typedef struct nvmlEventSet_st *nvmlEventSet_t;
#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypePState 0x0000000000000004ULL
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
#define nvmlEventTypeClock 0x0000000000000010ULL
#define nvmlEventTypePowerSourceChange 0x0000000000000080ULL
#define nvmlEventMigConfigChange 0x0000000000000100ULL
#define nvmlEventTypeNone 0x0000000000000000ULL
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData; /* the Xid for Xid errors */
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

/* The hook (built with __CUDA_API_VERSION_INTERNAL, every ABI name as itself) wraps the v1 entry
 * points too, so it sees them as the sim defines them. */
#if defined(NVML_NO_UNVERSIONED_FUNC_DEFS) || defined(__CUDA_API_VERSION_INTERNAL)
/* The original (v1) entry points, still exported by every libnvidia-ml.so.1. */
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                              nvmlPciInfo_t *pci);
#else
#define nvmlInit nvmlInit_v2
#define nvmlDeviceGetCount nvmlDeviceGetCount_v2
#define nvmlDeviceGetHandleByIndex nvmlDeviceGetHandleByIndex_v2
#define nvmlDeviceGetHandleByPciBusId nvmlDeviceGetHandleByPciBusId_v2
#define nvmlDeviceGetComputeRunningProcesses nvmlDeviceGetComputeRunningProcesses_v3
#define nvmlDeviceGetGraphicsRunningProcesses nvmlDeviceGetGraphicsRunningProcesses_v3
#define nvmlDeviceGetMPSComputeRunningProcesses nvmlDeviceGetMPSComputeRunningProcesses_v3
#define nvmlDeviceGetPciInfo nvmlDeviceGetPciInfo_v3
#define nvmlDeviceGetNvLinkRemotePciInfo nvmlDeviceGetNvLinkRemotePciInfo_v2
#endif

#ifdef __cplusplus
}
#endif
