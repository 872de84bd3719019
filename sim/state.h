/* The simulated machine shared by every process using one state file: devices,
 * their memory pools, their engine timelines and the per-process entries, all in one
 * mmap'd file guarded by a robust process-shared mutex. */
#pragma once
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

#define SIM_MAGIC 0x67736c696365736dull /* "gslicesm" */
#define SIM_VERSION 3
#define SIM_MAX_PROCS 256
#define SIM_RING 4096

/* One kernel's slot on a device timeline (CLOCK_MONOTONIC ns). */
struct sim_interval {
  uint64_t start, end;
  uint32_t proc; /* slot index */
  uint32_t proc_gen;
};

struct sim_device {
  uint64_t busy_until;    /* the engine is taken until then */
  uint64_t busy_sched_ns; /* sum of every duration ever scheduled */
  uint64_t dropped_ns;    /* scheduled time that never ran (its process died first) */
  uint64_t nring;         /* intervals ever added; slot = n % SIM_RING */
  struct sim_interval ring[SIM_RING];
};

struct sim_proc {
  int32_t pid; /* 0: free slot */
  uint32_t gen;
  uint64_t starttime; /* /proc/<pid>/stat field 22, tells a reused pid apart */
  char comm[16];
  uint64_t mem[SIM_MAX_DEVICES];        /* bytes, contexts included */
  uint32_t contexts[SIM_MAX_DEVICES];   /* live contexts */
  uint64_t busy_sched[SIM_MAX_DEVICES]; /* ns of kernels scheduled */
};

struct sim_machine {
  uint64_t magic;
  uint32_t version;
  uint32_t size;
  uint32_t devices;
  uint32_t sms;
  uint64_t memory;
  uint64_t context_memory;
  uint64_t reserved; /* per device, the driver's own: never allocatable, outside NVML v2's used */
  uint64_t created_realtime_ns;
  uint64_t last_reap_ns;
  uint64_t path_hash; /* UUIDs derive from it: stable per state path and index */
  pthread_mutex_t lock;
  struct sim_device dev[SIM_MAX_DEVICES];
  struct sim_proc proc[SIM_MAX_PROCS];
};

struct sim_state {
  struct sim_machine *m;
  int fd;
};

/* Maps (creating or re-creating as needed) the machine at cfg->state_path. A file whose
 * machine is in use by live processes wins over cfg; a note is written into note when
 * they disagree on something cfg set explicitly. */
int sim_state_open(const struct sim_config *cfg, struct sim_state *ret, char *note, size_t notelen);
/* Maps an existing machine read/write without creating it (tools). -ENOENT if absent. */
int sim_state_open_existing(const char *path, struct sim_state *ret);
void sim_state_close(struct sim_state *st);

uint64_t sim_now_ns(void); /* CLOCK_MONOTONIC, the device clock */

void sim_lock(struct sim_machine *m);
void sim_unlock(struct sim_machine *m);

/* With the lock held: returns dead processes' memory and unrun kernels to the machine.
 * force=0 limits the /proc scan to once per 50 ms machine-wide. */
void sim_reap(struct sim_machine *m, int force);

/* With the lock held: takes a slot for this process; returns its index or -ENOSPC. */
int sim_proc_attach(struct sim_machine *m, pid_t pid);
uint64_t sim_dev_used(const struct sim_machine *m, unsigned dev);
/* With the lock held: charge bytes on dev to slot; -ENOMEM if it does not fit (after a
 * forced reap). */
int sim_mem_charge(struct sim_machine *m, int slot, unsigned dev, uint64_t bytes);
void sim_mem_uncharge(struct sim_machine *m, int slot, unsigned dev, uint64_t bytes);

/* With the lock held: puts a kernel of dur ns on dev's timeline, not before earliest;
 * returns its end. Sleeps (dropping the lock) while the launch queue is full. */
uint64_t sim_schedule(struct sim_machine *m, int slot, unsigned dev, uint64_t earliest,
                      uint64_t dur);

/* With the lock held: ns the device (proc < 0) or a process slot actually ran in
 * [from, to] (to <= now: time not yet elapsed is never counted). */
uint64_t sim_busy_between(const struct sim_machine *m, unsigned dev, int proc, uint64_t from,
                          uint64_t to);
/* With the lock held: ns of kernels that ran so far, whole device or one slot. */
uint64_t sim_busy_total(const struct sim_machine *m, unsigned dev, int proc, uint64_t now);

/* The UUID of device index (16 bytes) and its text form "GPU-xxxxxxxx-...". */
void sim_uuid(const struct sim_machine *m, unsigned dev, unsigned char out[16]);
void sim_uuid_text(const struct sim_machine *m, unsigned dev, char *buf, size_t len);

/* /proc/<pid>/stat start time (0 if the process is gone or a zombie). */
uint64_t sim_proc_starttime(pid_t pid, char *comm, size_t commlen);

/* With the lock held: the earliest device time the busy ring still covers (0 if it
 * has never wrapped), so windows before it are not under-counted. */
uint64_t sim_ring_since(const struct sim_machine *m, unsigned dev);
/* With the lock held: percent of [now - window, now] the device (proc < 0) or slot ran. */
unsigned sim_util_percent(const struct sim_machine *m, unsigned dev, int proc, uint64_t window_ns);
