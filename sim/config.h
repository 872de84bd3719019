/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated machine's configuration: one table of GSLICE_SIM_* variables, parsed
 * and validated in one place (pure: the environment comes in through a getter). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_DEVICES 16
#define SIM_MAX_KERNEL_TIMES 32
#define SIM_KERNEL_NAME_MAX 64

struct sim_kernel_time {
  char name[SIM_KERNEL_NAME_MAX];
  uint64_t us;
};

struct sim_config {
  uint32_t devices;        /* GSLICE_SIM_DEVICES */
  uint64_t memory;         /* GSLICE_SIM_MEMORY, per device */
  uint64_t context_memory; /* GSLICE_SIM_CONTEXT_MEMORY, per context */
  uint64_t reserved;       /* GSLICE_SIM_RESERVED_MEMORY, per device: the driver's own share */
  uint32_t sms;            /* GSLICE_SIM_SMS */
  uint64_t timeslice_ns;   /* GSLICE_SIM_TIMESLICE (given in us); 0: contexts run in launch order */
  char state_path[256];    /* GSLICE_SIM_STATE */
  unsigned nkernel_times;  /* GSLICE_SIM_KERNEL_US=name=us,... */
  struct sim_kernel_time kernel_times[SIM_MAX_KERNEL_TIMES];
  /* NVML's view of processes, per caller (not the machine's): like NVML in a container whose
   * pid namespace it cannot map, list no process at all (GSLICE_SIM_NVML_HIDE_PIDS=1), or list
   * each under its pid plus an offset, as another namespace's (GSLICE_SIM_NVML_PID_OFFSET). */
  uint32_t nvml_hide_pids;
  int64_t nvml_pid_offset;
  /* Blackwell's NVML answers the old per-process utilization call NOT_SUPPORTED and only
   * nvmlDeviceGetProcessesUtilizationInfo has the samples (GSLICE_SIM_NVML_NO_PROCESS_UTILIZATION).
   */
  uint32_t nvml_no_process_util;
  /* MIG mode per device, as NVML reports it (GSLICE_SIM_NVML_MIG=DEV:N,...: device DEV in MIG mode
   * with N MIG devices, 0..SIM_MAX_MIG; DEV:pending: the mode set to take effect at the next
   * reset, still off). A board setting, but given per caller like the other NVML knobs: the
   * sim's CUDA still runs the whole GPU. */
  uint8_t nvml_mig_mode[SIM_MAX_DEVICES]; /* SIM_MIG_OFF, _ON, _PENDING */
  uint8_t nvml_mig_devices[SIM_MAX_DEVICES];
  /* Other tenants' sessions and processes starting between two calls: each encoder or NvFBC
   * session list or accounting pid list call of this process sees this many more entries than its
   * last (GSLICE_SIM_NVML_CHURN), owned by pids no process of the sim has. */
  uint32_t nvml_churn;
  /* The device memory's bandwidth in GB/s, i.e. bytes per ns (GSLICE_SIM_MEMORY_BANDWIDTH): a
   * memset of n bytes takes n / memory_gbps ns of device time, a device-to-device copy twice
   * that (it reads and writes each byte); 0: neither takes device time. */
  uint64_t memory_gbps;
  /* Each device's SMs where they are not GSLICE_SIM_SMS (GSLICE_SIM_DEVICE_SMS=DEV:N,...; 0: not
   * given). A board's figure, given per caller like the NVML knobs: what CUDA's default device
   * order (FASTEST_FIRST, sim_device_order) goes by. */
  uint32_t device_sms[SIM_MAX_DEVICES];
  /* Which machine-shaping variables were set explicitly, so a disagreement with an
   * existing state file is only reported when the user asked for something. */
  unsigned explicit_mask;
};

enum {
  SIM_EXPLICIT_DEVICES = 1u << 0,
  SIM_EXPLICIT_MEMORY = 1u << 1,
  SIM_EXPLICIT_CONTEXT_MEMORY = 1u << 2,
  SIM_EXPLICIT_SMS = 1u << 3,
  SIM_EXPLICIT_RESERVED = 1u << 4,
  SIM_EXPLICIT_TIMESLICE = 1u << 5,
};

enum { SIM_MIG_OFF = 0, SIM_MIG_ON = 1, SIM_MIG_PENDING = 2 };
#define SIM_MAX_MIG 7u /* MIG devices a sim GPU can hold (an H100's 1g slices) */

typedef char *(*sim_getenv_fn)(const char *name);

/* Fills *ret from the variables getenv returns (NULL = unset). On a bad value returns
 * -EINVAL and writes one line naming the variable and the value into err. */
int sim_config_parse(sim_getenv_fn getenv_fn, struct sim_config *ret, char *err, size_t errlen);

/* Device time a kernel called name takes when it is not "spin", in microseconds. */
uint64_t sim_config_kernel_us(const struct sim_config *cfg, const char *name);

/* CUDA_VISIBLE_DEVICES as the driver applies it at cuInit. spec NULL (unset): every
 * device, in order. Otherwise a comma-separated list of indices (read like strtoul:
 * "1gpu" is 1) or UUIDs ("GPU-" and enough of the rest to name one device), listed
 * devices renumbered from 0 in the list's order; the first invalid entry (bad index,
 * unknown or ambiguous UUID, MIG-, garbage) ends the list; a device listed twice makes
 * the list empty. uuid_text[i] is physical device i's "GPU-..." text. Writes the
 * physical index of each visible device to out and returns how many there are. */
unsigned sim_visible_parse(const char *spec, unsigned ndev, const char *const *uuid_text,
                           unsigned out[SIM_MAX_DEVICES]);
/* The same where CUDA enumerates the devices in `order` (order[i]: the physical device CUDA
 * numbers i, from sim_device_order; NULL: bus order): an index in spec, and spec unset, are read
 * in that order; a UUID names its device whatever the order. */
unsigned sim_visible_parse_order(const char *spec, unsigned ndev, const char *const *uuid_text,
                                 const unsigned *order, unsigned out[SIM_MAX_DEVICES]);

/* Physical device d's SMs: GSLICE_SIM_DEVICE_SMS's figure for it, else machine_sms (the
 * machine's GSLICE_SIM_SMS). */
unsigned sim_config_sms(const struct sim_config *cfg, unsigned d, unsigned machine_sms);

/* The order CUDA enumerates the ndev physical devices in, into out (out[i]: the device CUDA
 * numbers i), as CUDA_DEVICE_ORDER (device_order; NULL: unset) says: "PCI_BUS_ID", bus order
 * (the physical index, NVML's order); anything else is the default, FASTEST_FIRST: the sim's
 * heuristic puts devices with more SMs first (all have compute capability 9.0), devices with
 * as many in bus order. */
void sim_device_order(const struct sim_config *cfg, unsigned ndev, unsigned machine_sms,
                      const char *device_order, unsigned out[SIM_MAX_DEVICES]);
