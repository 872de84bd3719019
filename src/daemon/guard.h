/* SPDX-License-Identifier: Apache-2.0 */
/* Reading memory a slice can take away: the daemon's SIGBUS guard around its reads of the
 * slices' regions (files the slices' processes may truncate while the daemon maps them). */
#pragma once
#include <setjmp.h>

/* Installs the SIGBUS handler; once, before any thread starts. Returns 0 or -errno. */
int guard_install(void);
/* From sigsetjmp(*jb, 1) returning 0 until guard_disarm(), a SIGBUS on this thread jumps back
 * there (returning 1) instead of killing the daemon. Not nestable. */
void guard_arm(sigjmp_buf *jb);
void guard_disarm(void);
/* After the jump: forgets what this thread held in the memory that went away (see guard.c).
 * Also disarms. */
void guard_recovered(void);
