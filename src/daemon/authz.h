/* SPDX-License-Identifier: Apache-2.0 */
/* Authorization of slice changes: admins, owners, a slice's own processes, and per-user bounds
 * (docs/security.md). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "daemon.h"

/* Root, the daemon's own user, or a member of admin_group (its gid or a supplementary group of
 * the connected process), in the daemon's own pid namespace (root in a container is not), while
 * that process is still the one that connected. */
bool authz_admin(const struct daemon *d, const struct conn *c);

/* Whether the connected process runs in the daemon's own pid namespace (not in a container),
 * and is still the process that connected. REGISTER needs it, whatever the uid. */
bool authz_host_process(const struct daemon *d, const struct conn *c);

/* Whether c may change s at all (SET, UNREGISTER, HELLO as its process): an admin, or s's owner
 * uid — from another pid namespace (a container), only a process inside s. What it may change is
 * authz_set's. */
bool authz_may_change(struct daemon *d, const struct conn *c, const struct slice *s);

/* Whether the connected process is one of the slice's: it said HELLO as the slice's hook, it
 * descends from the slice's runner (gslice run, a child subreaper), or its environment names
 * the slice's nonce. A process that is gone or whose pid was reused counts as inside: it
 * cannot be shown to be outside. */
bool authz_inside(struct daemon *d, const struct conn *c, const struct slice *s);

/* SET from c to s's spec `spec` (the owner-or-admin check done): lowering is anyone's who may
 * change the slice; raising any field (request, limit, priority, weight, memory cap) needs an
 * admin outside the slice. 0, or -EPERM with the reason in why. */
int authz_set(struct daemon *d, const struct conn *c, const struct slice *s,
              const struct gs_slice_spec *spec, char *why, size_t why_len);

/* UNREGISTER: never from the slice's own processes. 0 or -EPERM. */
int authz_unregister(struct daemon *d, const struct conn *c, const struct slice *s, char *why,
                     size_t why_len);

/* REGISTER from a non-admin: its slices' requests on a GPU within max_compute_per_user, their
 * memory caps within max_memory_per_user. 0 or -EDQUOT with the reason. */
int authz_register(struct daemon *d, const struct conn *c, const struct gs_slice_spec *spec,
                   char *why, size_t why_len);

/* The slice whose live runner the process descends from (the nearest); 0 when none (for a
 * process the device shows that no slice accounts for: run inside a slice without the hook, or
 * outside any). Found by walks up /proc remembered by pid and start time (attrib.h): one read of
 * the process itself, and at most 256 of its ancestors or 2 ms of the thread's CPU every 0.5 s
 * in all calls; a chain deeper than that is found over the next periods, 0 until then (a caller
 * that remembers a 0 should ask again). For the charge check. */
uint32_t authz_slice_of_pid(struct daemon *d, pid_t pid);
/* The same for STATUS's unaccounted processes (any local user may ask): a budget of its own,
 * 128 ancestors and 0.5 ms every 0.5 s, so that asking cannot spend the charge check's. */
uint32_t authz_slice_of_unaccounted(struct daemon *d, pid_t pid);
/* What attribution cost since the start: calls, /proc reads, walks resumed over periods. */
void authz_attribution_stats(uint64_t *ret_calls, uint64_t *ret_reads, uint64_t *ret_deferred);
