/* SPDX-License-Identifier: Apache-2.0 */
/* Process identity from /proc: what tells a live process from a dead one or a reused pid. Reads
 * /proc only; owns no state and takes no lock. */
#pragma once
#include <stdint.h>
#include <sys/types.h>

/* Process identity from /proc/<pid>/stat: start time (field 22) and whether it has exited
 * (gone, dead, or a zombie without live threads). pid 0 means the caller. */
int gs_proc_identity(pid_t pid, uint64_t *ret_start_time, int *ret_exited);
/* The inode of the caller's pid namespace (/proc/self/ns/pid), 0 if unknown. */
uint64_t gs_proc_pidns(void);
/* One read of /proc/<pid>/stat: the process's parent (field 4), its start time (field 22) and
 * whether it has exited, as gs_proc_identity says. A walk up a process's ancestors reads each
 * once, parent and identity together. 0, or a negative errno (-ESRCH: no such process). */
int gs_proc_stat(pid_t pid, pid_t *ret_ppid, uint64_t *ret_start_time, int *ret_exited);
