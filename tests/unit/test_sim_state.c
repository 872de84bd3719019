/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the shared simulated machine: creation and joining, memory charges
 * and their limit, the engine (one kernel at a time, contexts time-sliced, a newcomer
 * waiting for the end of the current timeslice, or launch order with slicing off), busy accounting,
 * reaping a dead process (memory back, unrun kernels dropped), a holder dying with the lock. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "state.h"
#include "test.h"

static char *no_env(const char *name) {
  return NULL;
}

int main(void) {
  char dir[] = "/tmp/gslice-sim-state-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  struct sim_config cfg;
  char err[256], note[512];
  CHECK_EQ_INT(sim_config_parse(no_env, &cfg, err, sizeof(err)), 0);
  snprintf(cfg.state_path, sizeof(cfg.state_path), "%s/machine", dir);
  cfg.memory = 1ull << 30;
  cfg.devices = 2;

  struct sim_state st, st2;
  CHECK_EQ_INT(sim_state_open(&cfg, &st, note, sizeof(note)), 0);
  struct sim_machine *m = st.m;
  CHECK_EQ_U64(m->devices, 2);
  CHECK_EQ_U64(m->memory, 1ull << 30);

  /* A second opener with other settings joins the machine in use, with a note. */
  struct sim_config other = cfg;
  other.memory = 2ull << 30;
  other.explicit_mask = SIM_EXPLICIT_MEMORY;
  CHECK_EQ_INT(sim_state_open(&other, &st2, note, sizeof(note)), 0);
  CHECK_EQ_U64(st2.m->memory, 1ull << 30);
  CHECK(strstr(note, "in use") != NULL);
  sim_state_close(&st2);

  sim_lock(m);
  int self = sim_proc_attach(m, getpid());
  CHECK(self >= 0);
  /* Memory: up to the device size, not a byte more; per device. */
  CHECK_EQ_INT(sim_mem_charge(m, self, 0, 1ull << 29), 0);
  CHECK_EQ_INT(sim_mem_charge(m, self, 0, (1ull << 29) + 1), -ENOMEM);
  CHECK_EQ_INT(sim_mem_charge(m, self, 0, 1ull << 29), 0);
  CHECK_EQ_U64(sim_dev_used(m, 0), 1ull << 30);
  CHECK_EQ_U64(sim_dev_used(m, 1), 0);
  sim_mem_uncharge(m, self, 0, 1ull << 30);
  CHECK_EQ_U64(sim_dev_used(m, 0), 0);

  /* A child process with memory and a long kernel queued, then killed. */
  int pfd[2];
  CHECK(pipe(pfd) == 0);
  pid_t child = fork();
  if (child == 0) {
    char c;
    close(pfd[1]);
    (void)!read(pfd[0], &c, 1);
    _exit(0);
  }
  close(pfd[0]);
  int other_slot = sim_proc_attach(m, child);
  CHECK(other_slot >= 0 && other_slot != self);
  CHECK_EQ_INT(sim_mem_charge(m, other_slot, 1, 300 << 20), 0);

  /* The engine: one kernel at a time; contexts with work alternate in timeslices (2 ms by
   * default), a kernel preempted at the boundary resumes on its context's next turn. */
  CHECK_EQ_U64(m->timeslice_ns, 2000000);
  uint64_t t0 = sim_now_ns();
  uint64_t k1 = sim_launch(m, self, 1, 1, 0, 2000000);             /* 2 ms */
  uint64_t k2 = sim_launch(m, other_slot, 1, 7, 0, 5000000000ull); /* 5 s, another process */
  uint64_t k3 = sim_launch(m, self, 1, 1, 0, 1000000);             /* 1 ms, self again */
  uint64_t e1, e2, e3;
  CHECK_EQ_INT(sim_kernel_done(m, 1, k1, &e1), 0); /* not yet: projected */
  CHECK_EQ_INT(sim_kernel_done(m, 1, k3, &e3), 0);
  CHECK_EQ_U64(e3, e1 + 3000000); /* after one 2 ms slice of the other process */
  CHECK(e1 >= t0 + 2000000);
  /* Not yet elapsed time is never counted. */
  CHECK(sim_busy_total(m, 1, -1, sim_now_ns()) <= sim_now_ns() - t0);
  sim_unlock(m);

  struct timespec ts = {0, 10 * 1000 * 1000};
  nanosleep(&ts, NULL);
  sim_lock(m);
  uint64_t now = sim_now_ns();
  uint64_t f1, f3;
  CHECK_EQ_INT(sim_kernel_done(m, 1, k1, &f1), 1);
  CHECK_EQ_INT(sim_kernel_done(m, 1, k3, &f3), 1);
  CHECK_EQ_U64(f1, e1);
  CHECK_EQ_U64(f3, e3); /* 5 ms after the start, not 5 s: the 5 s kernel was preempted */
  CHECK_EQ_INT(sim_kernel_done(m, 1, k2, &e2), 0);
  CHECK_EQ_U64(sim_busy_total(m, 1, self, now), 3000000);
  CHECK(sim_busy_total(m, 1, other_slot, now) >= now - f3 + 2000000 - 1000);
  CHECK(sim_util_percent(m, 1, -1, 5000000) >= 99);
  sim_unlock(m);

  close(pfd[1]);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  sim_lock(m);
  sim_reap(m, 1);
  now = sim_now_ns();
  CHECK_EQ_U64(sim_dev_used(m, 1), 0);
  CHECK_EQ_U64(m->proc[other_slot].pid, 0);
  /* Its unrun kernel time is gone: nothing queued, and what ran is all that counts. */
  CHECK_EQ_INT(sim_kernel_done(m, 1, k2, &e2), 1);
  CHECK_EQ_U64(m->dev[1].queued, 0);
  CHECK_EQ_U64(m->dev[1].queued_ns, 0);
  uint64_t busy = sim_busy_total(m, 1, -1, now + 10000000000ull);
  CHECK(busy < 1000000000ull); /* 2 ms + the part of 5 s that ran + 1 ms */
  CHECK(busy >= 3000000);

  /* Timeslice 0: no slicing, each kernel to its end in launch order (device 0). */
  m->timeslice_ns = 0;
  uint64_t a1 = sim_launch(m, self, 0, 1, 0, 2000000);
  uint64_t b1 = sim_launch(m, self, 0, 2, 0, 3000000); /* another context */
  uint64_t a2 = sim_launch(m, self, 0, 1, 0, 1000000);
  uint64_t g1, g2, g3;
  sim_kernel_done(m, 0, a1, &g1);
  sim_kernel_done(m, 0, b1, &g2);
  sim_kernel_done(m, 0, a2, &g3);
  CHECK_EQ_U64(g2, g1 + 3000000);
  CHECK_EQ_U64(g3, g2 + 1000000);
  m->timeslice_ns = 2000000;
  sim_unlock(m);

  /* Two contexts with deep queues, 20 ms and 0.2 ms kernels: the device alternates 2 ms
   * timeslices, so the short kernels progress at half the device's speed, exactly (the
   * engine is a function of the clock, whatever the host's load), and the projection made
   * at launch is what happens when nothing else is queued. */
  ts.tv_nsec = 20 * 1000 * 1000;
  nanosleep(&ts, NULL);
  sim_lock(m);
  uint64_t longk = 0, shortk[501] = {0}, proj, got;
  for (int i = 0; i < 50; i++)
    longk = sim_launch(m, self, 0, 3, 0, 20000000);
  for (int i = 1; i <= 500; i++)
    shortk[i] = sim_launch(m, self, 0, 4, 0, 200000);
  CHECK_EQ_INT(sim_kernel_done(m, 0, shortk[500], &proj), 0);
  sim_unlock(m);
  ts.tv_nsec = 250 * 1000 * 1000;
  nanosleep(&ts, NULL);
  sim_lock(m);
  CHECK_EQ_INT(sim_kernel_done(m, 0, shortk[500], &got), 1);
  CHECK_EQ_U64(got, proj);
  uint64_t s10, s510;
  sim_kernel_done(m, 0, shortk[10], &s10);
  sim_kernel_done(m, 0, shortk[500], &s510);
  /* 490 kernels x 0.2 ms = 98 ms of work, alternating with 2 ms of the other context */
  CHECK_EQ_U64(s510 - s10, 196000000);
  CHECK_EQ_INT(sim_kernel_done(m, 0, longk, &got), 0);
  sim_unlock(m);

  /* A context alone keeps the engine in back-to-back timeslices; one that starts queueing
   * beside it gets the engine at the end of the current timeslice, at most 2 ms later. */
  sim_lock(m);
  uint64_t solo = sim_launch(m, self, 1, 5, 0, 500000000); /* device 1: idle by now */
  uint64_t solo_end;
  sim_kernel_done(m, 1, solo, &solo_end);
  uint64_t solo_start = solo_end - 500000000;
  sim_unlock(m);
  ts.tv_nsec = 7 * 1000 * 1000;
  nanosleep(&ts, NULL);
  sim_lock(m);
  uint64_t arrive = sim_now_ns();
  uint64_t late = sim_launch(m, self, 1, 6, 0, 1000000), late_end;
  sim_kernel_done(m, 1, late, &late_end);
  CHECK(late_end >= arrive + 1000000);
  CHECK(late_end <= arrive + 3000000);
  if (arrive < solo_start + 500000000 - 2000000) /* still running (a host stalled 0.5 s: not) */
    CHECK_EQ_U64((late_end - 1000000 - solo_start) % 2000000, 0); /* on a slice boundary */
  /* 200 contexts queueing at once each get a channel of their own. */
  uint32_t chans[200];
  int chans_ok = 1;
  for (unsigned i = 0; i < 200; i++) {
    uint64_t seq = sim_launch(m, self, 1, 100 + i, 0, 1000000000); /* 1 s: none completes */
    chans[i] = m->dev[1].k[seq % SIM_KERNELS].chan;
    for (unsigned j = 0; j < i; j++)
      chans_ok &= chans[j] != chans[i];
  }
  CHECK(chans_ok);
  sim_unlock(m);
  sim_lock(m);
  /* A slot for a pid that is not alive is reaped at once. */
  int dead = sim_proc_attach(m, child);
  CHECK(dead >= 0);
  sim_reap(m, 1);
  CHECK_EQ_U64(m->proc[dead].pid, 0);
  CHECK(m->proc[self].pid == getpid());
  sim_unlock(m);

  /* A process that dies holding the machine's lock: the next locker goes on, and the
   * dead holder's memory is reaped on the spot. */
  pid_t holder = fork();
  if (holder == 0) {
    sim_lock(m);
    int slot = sim_proc_attach(m, getpid());
    sim_mem_charge(m, slot, 0, 100 << 20);
    _exit(0); /* with the lock held */
  }
  waitpid(holder, NULL, 0);
  sim_lock(m);
  CHECK_EQ_U64(sim_dev_used(m, 0), 0);
  CHECK_EQ_INT(sim_mem_charge(m, self, 0, 1 << 20), 0);
  sim_mem_uncharge(m, self, 0, 1 << 20);
  sim_unlock(m);
  sim_lock(m); /* and the lock works normally afterwards */
  sim_unlock(m);

  /* UUIDs: stable, distinct per device. */
  char u0[96], u1[96], u0b[96];
  sim_uuid_text(m, 0, u0, sizeof(u0));
  sim_uuid_text(m, 1, u1, sizeof(u1));
  sim_uuid_text(m, 0, u0b, sizeof(u0b));
  CHECK(strcmp(u0, u1) != 0);
  CHECK_STR(u0, u0b);
  CHECK(strncmp(u0, "GPU-", 4) == 0 && strlen(u0) == 40);

  sim_state_close(&st);
  unlink(cfg.state_path);
  rmdir(dir);
  return test_done();
}
