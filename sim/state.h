/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated machine shared by every process using one state file: devices,
 * their memory pools, their engine timelines and the per-process entries, all in one
 * mmap'd file guarded by a robust process-shared mutex. */
#pragma once
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

#define SIM_MAGIC 0x67736c696365736dull /* "gslicesm" */
#define SIM_VERSION 4
#define SIM_MAX_PROCS 256
#define SIM_RING 4096 /* stretches of device time remembered per device (busy windows) */
/* Kernels queued on a device before a launch waits, as a full push buffer. */
#define SIM_QUEUE 4096
#define SIM_KERNELS 8192 /* kernels remembered per device: their completion times */
#define SIM_CHANNELS 256 /* contexts with work queued on one device at the same time */

/* A stretch of device time one process's kernels ran (CLOCK_MONOTONIC ns). */
struct sim_interval {
  uint64_t start, end;
  uint32_t proc; /* slot index */
  uint32_t proc_gen;
};

/* One launch with device time. Its slot is seq % SIM_KERNELS; a slot is reused only once
 * its kernel completed, so a seq whose slot holds another has completed. */
struct sim_kernel {
  uint64_t seq;   /* device-wide launch number, from 1 */
  uint64_t next;  /* the next kernel of its channel (0: none yet) */
  uint64_t after; /* may not start before this kernel (another context's) completed; 0: none */
  uint64_t dur;   /* device time it needs */
  uint64_t left;  /* device time still to run */
  uint64_t end;   /* when it completed; 0: not yet */
  uint32_t chan;  /* index in sim_device.chan */
  uint32_t pad;
};

/* One context's queue on a device: what a GPU without MPS time-slices between. */
struct sim_channel {
  uint32_t proc, proc_gen; /* owner */
  uint64_t ctx;            /* the context, as its process names it */
  uint64_t head, tail;     /* first and last queued kernel; head 0: the channel is free */
  uint64_t turn;           /* when it last got the engine: the least recent goes next */
};

struct sim_device {
  uint64_t clock;       /* the engine has been run (sim_advance) up to this device time */
  uint64_t nlaunch;     /* kernels ever queued: the last one's seq */
  uint64_t queued;      /* kernels queued and not complete */
  uint64_t queued_ns;   /* their device time still to run */
  uint64_t busy_ns;     /* device time run, ever */
  uint64_t forgot_end;  /* the latest end among kernels whose slot was reused */
  int32_t cur;          /* channel on the engine; -1: none */
  uint32_t nchan;       /* channels ever used: the engine looks at chan[0..nchan) only */
  uint64_t slice_start; /* when cur's timeslice began */
  uint64_t nring;       /* stretches ever recorded; slot = n % SIM_RING */
  struct sim_interval ring[SIM_RING];
  struct sim_channel chan[SIM_CHANNELS];
  struct sim_kernel k[SIM_KERNELS];
};

struct sim_proc {
  int32_t pid; /* 0: free slot */
  uint32_t gen;
  uint64_t starttime; /* /proc/<pid>/stat field 22, tells a reused pid apart */
  char comm[16];
  uint64_t mem[SIM_MAX_DEVICES];      /* bytes, contexts included */
  uint32_t contexts[SIM_MAX_DEVICES]; /* live contexts */
  uint64_t busy_ns[SIM_MAX_DEVICES];  /* device time its kernels ran */
  uint64_t launches[SIM_MAX_DEVICES]; /* kernels with device time it queued */
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
  uint64_t timeslice_ns; /* how long a context keeps the engine while others wait; 0: no slicing */
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

/* The engine (engine.c). A device runs one kernel at a time. Each context's kernels run in
 * the order queued; when several contexts have work queued, the engine alternates between
 * them in timeslices of timeslice_ns, preempting a running kernel at the boundary (it
 * resumes on the context's next turn), the least recently served context first. The
 * engine is run lazily, up to the present, by whoever looks (every call below does). */

/* With the lock held: runs dev's engine up to now (never past the real clock). */
void sim_advance(struct sim_machine *m, unsigned dev, uint64_t now);
/* With the lock held: queues a kernel of dur ns (> 0) for context ctx of slot on dev, not to
 * start before kernel after (0: none) completed; returns its seq. Sleeps (dropping the lock)
 * while the queue is full. */
uint64_t sim_launch(struct sim_machine *m, int slot, unsigned dev, uint64_t ctx, uint64_t after,
                    uint64_t dur);
/* With the lock held: runs the engine up to now; then 1 and its end time when kernel seq
 * (0: none) has completed, 0 and when it would complete if nothing more were queued. */
int sim_kernel_done(struct sim_machine *m, unsigned dev, uint64_t seq, uint64_t *ret_end);
/* With the lock held: a dead process's queued kernels never run (reaping). */
void sim_drop_proc(struct sim_machine *m, unsigned dev, uint32_t slot, uint32_t gen);

/* With the lock held: ns the device (proc < 0) or a process slot actually ran in
 * [from, to] (to <= now: time not yet elapsed is never counted). */
uint64_t sim_busy_between(struct sim_machine *m, unsigned dev, int proc, uint64_t from,
                          uint64_t to);
/* With the lock held: ns of kernels that ran up to now (at most the real clock), whole
 * device or one slot. */
uint64_t sim_busy_total(struct sim_machine *m, unsigned dev, int proc, uint64_t now);

/* The UUID of device index (16 bytes) and its text form "GPU-xxxxxxxx-...". */
void sim_uuid(const struct sim_machine *m, unsigned dev, unsigned char out[16]);
void sim_uuid_text(const struct sim_machine *m, unsigned dev, char *buf, size_t len);

/* /proc/<pid>/stat start time (0 if the process is gone or a zombie). */
uint64_t sim_proc_starttime(pid_t pid, char *comm, size_t commlen);

/* With the lock held: the earliest device time the busy ring still covers (0 if it
 * has never wrapped), so windows before it are not under-counted. */
uint64_t sim_ring_since(const struct sim_machine *m, unsigned dev);
/* With the lock held: percent of [now - window, now] the device (proc < 0) or slot ran. */
unsigned sim_util_percent(struct sim_machine *m, unsigned dev, int proc, uint64_t window_ns);
