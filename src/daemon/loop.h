/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's event loop: file-descriptor events (epoll) and timers on CLOCK_MONOTONIC, nothing
 * else. */
#pragma once
#include <stdint.h>

struct loop;
typedef void (*loop_fd_cb)(struct loop *l, int fd, uint32_t events, void *data);
typedef void (*loop_timer_cb)(struct loop *l, uint64_t id, void *data);

/* Now on CLOCK_MONOTONIC, ns. */
uint64_t loop_now(void);

int loop_new(struct loop **ret);
void loop_free(struct loop *l);

/* Watches fd for events (EPOLLIN, EPOLLOUT, ...). One callback per fd. */
int loop_add_fd(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *data);
int loop_mod_fd(struct loop *l, int fd, uint32_t events);
/* Stops watching fd (safe from within any callback); the caller closes it. */
void loop_del_fd(struct loop *l, int fd);

/* Calls cb once at `when` (monotonic ns). Returns 0 and a nonzero id. */
int loop_add_timer(struct loop *l, uint64_t when, loop_timer_cb cb, void *data, uint64_t *ret_id);
/* Cancels a timer; unknown or fired ids are fine. */
void loop_del_timer(struct loop *l, uint64_t id);

/* Runs until loop_stop. Returns 0 or -errno from epoll. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);
