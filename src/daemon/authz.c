/* SPDX-License-Identifier: Apache-2.0 */
/* Who may do what to a slice (authz.h): admins, owners, and a slice's own processes; per-user
 * bounds on what is committed. */
#include "authz.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attrib.h"
#include "clock.h"
#include "log.h"
#include "proc.h"
#include "region.h"
#include "size.h"

/* Reads /proc/<pid>/<what> whole (at most cap - 1 bytes, NUL-terminated). */
static int read_proc(pid_t pid, const char *what, char *buf, size_t cap, size_t *ret_len) {
  char path[64];
  size_t got = 0;
  int fd;

  snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  while (got < cap - 1) {
    ssize_t n = read(fd, buf + got, cap - 1 - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  buf[got] = 0;
  *ret_len = got;
  return 0;
}

/* The process's parent, from /proc/<pid>/stat (field 4, after the last ')'). */
static int parent_of(pid_t pid, pid_t *ret_ppid) {
  char buf[1024];
  size_t len;
  int ppid;
  int r = read_proc(pid, "stat", buf, sizeof(buf), &len);

  if (r < 0)
    return r;
  char *p = strrchr(buf, ')');
  if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
    return -EINVAL;
  *ret_ppid = ppid;
  return 0;
}

/* Whether the process is in group gid: its gid, or one of its supplementary groups (which
 * SO_PEERCRED does not carry: /proc/<pid>/status, "Groups:"). */
static bool in_group(pid_t pid, gid_t peer_gid, gid_t gid) {
  char buf[8192];
  size_t len;

  if (peer_gid == gid)
    return true;
  if (read_proc(pid, "status", buf, sizeof(buf), &len) < 0)
    return false;
  char *line = strstr(buf, "\nGroups:");
  if (!line)
    return false;
  line += 8;
  for (;;) {
    char *end;
    unsigned long v = strtoul(line, &end, 10);
    if (end == line)
      return false;
    if (v == gid)
      return true;
    line = end;
  }
}

/* Whether the process lives in the daemon's own pid namespace (the host's, for a daemon run on
 * the host or in a hostPID pod). */
static bool in_our_pidns(pid_t pid) {
  char path[64];
  struct stat ours, theirs;

  snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
  return pid > 0 && stat("/proc/self/ns/pid", &ours) == 0 && stat(path, &theirs) == 0 &&
         ours.st_ino == theirs.st_ino && ours.st_dev == theirs.st_dev;
}

bool authz_host_process(const struct daemon *d, const struct conn *c) {
  uint64_t start = 0;
  int exited = 1;

  (void)d;
  /* What is read from /proc counts only while the process is still the one that connected (a
   * reused pid could be anyone's). */
  return in_our_pidns(c->pid) && gs_proc_identity(c->pid, &start, &exited) == 0 && !exited &&
         start == c->start;
}

bool authz_admin(const struct daemon *d, const struct conn *c) {
  gid_t gid;

  /* Root in a container is a container's root: containers often run as uid 0 without a user
   * namespace, and their processes reach the socket (it is mounted into them). A process in
   * another pid namespace is never an admin, whatever its uid or groups. */
  if (!authz_host_process(d, c))
    return false;
  if (c->uid == 0 || c->uid == geteuid())
    return true;
  if (config_admin_gid(&d->cfg, &gid) < 0)
    return false;
  return in_group(c->pid, c->gid, gid);
}

/* Whether /proc/<pid>/environ holds GSLICE_SLICE_NONCE=<the slice's>. */
static bool environ_names(pid_t pid, uint64_t nonce) {
  const size_t cap = 1u << 16;
  char want[64], *buf = malloc(cap);
  size_t len, n;
  bool found = false;

  n = (size_t)snprintf(want, sizeof(want), "GSLICE_SLICE_NONCE=%016" PRIx64, nonce);
  if (!buf || read_proc(pid, "environ", buf, cap, &len) < 0) {
    free(buf);
    return false;
  }
  for (size_t i = 0; i < len && !found; i += strnlen(buf + i, len - i) + 1)
    found = len - i >= n && memcmp(buf + i, want, n) == 0 && (i + n == len || buf[i + n] == 0);
  free(buf);
  return found;
}

/* Whether pid descends from the slice's runner, while that runner lives (start time checked).
 * gslice run is a child subreaper: what its workload forks stays below it even when the parent
 * dies (setsid and double forks do not leave it). A chain of ancestors longer than the walk
 * (a workload's 300 nested forks) is what deep_is_inside says: inside for a refusal (what it
 * refuses must not be had by forking deeper: the fifth attack run raised its own slice so), not
 * inside for a grant (the sixth: root in a container 300 forks deep lowered a host slice). */
static bool below_runner_walk(const struct slice *s, pid_t pid, bool deep_is_inside) {
  uint64_t rstart = 0;
  int rexited = 1;

  if (gs_proc_identity(s->runner_pid, &rstart, &rexited) < 0 || rexited ||
      (s->runner_start != 0 && rstart != s->runner_start))
    return false;
  for (int depth = 0; depth < 256 && pid > 1; depth++) {
    pid_t pp;
    if (parent_of(pid, &pp) < 0)
      return false;
    if (pp == s->runner_pid)
      return true;
    pid = pp;
  }
  return deep_is_inside && pid > 1;
}

static bool below_runner(const struct slice *s, pid_t pid) {
  return below_runner_walk(s, pid, true);
}

/* Attribution's state: the table of what walks found, the live runners they look for, and a
 * budget of /proc reads per kind of caller. One daemon per process; it would be a member of
 * struct daemon (daemon.h), which this change did not own. */
#define RUNNERS_RECHECK_NS 100000000ull
/* The charge check: 256 ancestors (about 1 ms at 4 us a read on a bare node) or 2 ms of the loop
 * thread's CPU a period, whichever is first: where a read of /proc costs 13-40 us of CPU (a
 * loaded 2-core VM), 1 ms left a 300-deep workload uncharged for 2.3 s of a 5 s window. */
#define CHARGE_STEPS 256
#define CHARGE_NS 2000000ull
/* STATUS and /metrics, any local user's to ask: half, and their own. */
#define STATUS_STEPS 128
#define STATUS_NS 500000ull
#define STEPS_PERIOD_NS 500000000ull
/* A deferred walk is said at most this often. */
#define DEFER_SAY_NS (60ull * 1000000000ull)
/* Attribution's cost is said in the log once, after this many calls or this long after the
 * first. */
#define COST_AFTER 100
#define COST_AFTER_NS (3ull * 1000000000ull)

static struct attribution {
  bool init;
  struct attrib table;
  struct attrib_budget charge, status;
  struct attrib_runner runners[REGISTRY_MAX];
  unsigned nrunners;
  uint64_t reg_fp, gen, checked_at, said_at, deferred_said;
  uint64_t cost_ns, cost_max_ns, cost_reads, cost_calls, cost_from;
  bool cost_said;
} attribution;

/* The loop thread's own CPU time: what attribution costs it, apart from what a loaded host takes
 * (beside a build on 2 cores, one read of /proc took 13 us of CPU and up to 90 ms of wall). */
static uint64_t thread_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int stat_of(void *arg, pid_t pid, pid_t *ret_ppid, uint64_t *ret_start, int *ret_exited) {
  (void)arg;
  return gs_proc_stat(pid, ret_ppid, ret_start, ret_exited);
}

static uint64_t mix(uint64_t h, uint64_t v) {
  return (h ^ v) * 0x100000001b3ull;
}

/* The registry's runners, as they were registered. */
static uint64_t registry_runners(const struct daemon *d) {
  uint64_t h = 0xcbf29ce484222325ull;

  for (uint32_t i = 0; i < d->reg.n; i++) {
    const struct slice *s = d->reg.slices[i];
    h = mix(mix(mix(h, s->id), (uint64_t)s->runner_pid), s->runner_start);
  }
  return h;
}

/* The live runners (each one's identity read again every RUNNERS_RECHECK_NS, and whenever the
 * registry's change): a runner gone, or its pid reused, is nobody's runner. */
static struct attribution *attribution_now(struct daemon *d, uint64_t now) {
  struct attribution *at = &attribution;
  uint64_t fp = registry_runners(d);

  if (!at->init) {
    attrib_init(&at->table);
    attrib_budget_init(&at->charge, CHARGE_STEPS, CHARGE_NS, STEPS_PERIOD_NS, thread_ns);
    attrib_budget_init(&at->status, STATUS_STEPS, STATUS_NS, STEPS_PERIOD_NS, thread_ns);
    at->init = true;
  } else if (fp == at->reg_fp && now - at->checked_at < RUNNERS_RECHECK_NS) {
    return at;
  }
  uint64_t gen = 0x84222325cbf29ce4ull;
  at->nrunners = 0;
  for (uint32_t i = 0; i < d->reg.n; i++) {
    const struct slice *s = d->reg.slices[i];
    uint64_t start = 0;
    int exited = 1;
    if (s->runner_pid <= 1 || gs_proc_identity(s->runner_pid, &start, &exited) < 0 || exited ||
        (s->runner_start != 0 && start != s->runner_start))
      continue;
    at->runners[at->nrunners++] = (struct attrib_runner){s->runner_pid, start, s->id};
    gen = mix(mix(mix(gen, s->id), (uint64_t)s->runner_pid), start);
  }
  at->reg_fp = fp;
  at->gen = gen;
  at->checked_at = now;
  return at;
}

/* Said once a minute while walks wait for steps: a process tree deep enough, or enough of them,
 * that finding their slices takes more than one period's reads. */
static void say_deferred(struct attribution *at, const struct attrib_budget *b, pid_t pid,
                         uint64_t now) {
  uint64_t deferred = at->table.stats.deferred;

  if (deferred == at->deferred_said || (at->said_at && now - at->said_at < DEFER_SAY_NS))
    return;
  gs_log(GS_LOG_INFO,
         "attribution: pid %d's ancestors are more than %u /proc reads or %.1f ms a %.1f s can "
         "read; its slice is found over the next periods (%" PRIu64
         " walks resumed so far, %" PRIu64 " calls, %" PRIu64 " reads, said once a minute)",
         (int)pid, b->steps, (double)b->ns / 1e6, (double)b->period_ns / 1e9, deferred,
         at->table.stats.calls, at->table.stats.reads);
  at->said_at = now;
  at->deferred_said = deferred;
}

/* What the loop thread spent in attribution (the runners' checks too), said once: the charge
 * check asks of the processes NVML shows that no hook connection accounts for. */
static void note_cost(struct attribution *at, uint64_t ns, uint64_t reads, uint64_t now) {
  if (at->cost_said)
    return;
  if (!at->cost_calls)
    at->cost_from = now;
  at->cost_calls++;
  at->cost_ns += ns;
  at->cost_reads += reads;
  if (ns > at->cost_max_ns)
    at->cost_max_ns = ns;
  if (at->cost_calls < COST_AFTER && now - at->cost_from < COST_AFTER_NS)
    return;
  gs_log(GS_LOG_INFO,
         "attribution: %.1f us of CPU a process (mean of %" PRIu64 ", most %.0f us; %.1f /proc "
         "reads each)",
         (double)at->cost_ns / (double)at->cost_calls / 1e3, at->cost_calls,
         (double)at->cost_max_ns / 1e3, (double)at->cost_reads / (double)at->cost_calls);
  at->cost_said = true;
}

static uint32_t slice_of(struct daemon *d, pid_t pid, bool status) {
  uint64_t t0 = thread_ns(), now = loop_now();
  struct attribution *at = attribution_now(d, now);
  uint64_t deferred = at->table.stats.deferred, reads = at->table.stats.reads;
  struct attrib_budget *b = status ? &at->status : &at->charge;
  uint32_t id =
      attrib_slice_of(&at->table, b, pid, at->runners, at->nrunners, at->gen, now, stat_of, NULL);

  if (at->table.stats.deferred != deferred)
    say_deferred(at, b, pid, now);
  note_cost(at, thread_ns() - t0, at->table.stats.reads - reads, now);
  return id;
}

uint32_t authz_slice_of_pid(struct daemon *d, pid_t pid) {
  return slice_of(d, pid, false);
}

uint32_t authz_slice_of_unaccounted(struct daemon *d, pid_t pid) {
  return slice_of(d, pid, true);
}

void authz_attribution_stats(uint64_t *ret_calls, uint64_t *ret_reads, uint64_t *ret_deferred) {
  const struct attrib_stats *st = &attribution.table.stats;

  *ret_calls = st->calls;
  *ret_reads = st->reads;
  *ret_deferred = st->deferred;
}

bool authz_inside(struct daemon *d, const struct conn *c, const struct slice *s) {
  uint64_t start = 0;
  int exited = 1;

  /* A peer whose pid this daemon cannot see (another pid namespace) cannot be shown outside. */
  if (c->pid <= 0)
    return true;
  /* The runner is gslice run itself, which made the slice: not one of its workload's. */
  if (c->pid == s->runner_pid)
    return false;
  /* A process that said HELLO as the slice's, on any connection. */
  for (const struct conn *o = s->conns; o; o = o->slice_next)
    if (o->pid == c->pid && o->role == GS_ROLE_HOOK)
      return true;
  /* Gone, or its pid reused since it connected: it cannot be shown to be outside. */
  if (gs_proc_identity(c->pid, &start, &exited) < 0 || exited || start != c->start)
    return true;
  if (below_runner(s, c->pid))
    return true;
  /* The slice's environment: a process may unset it, so it only ever adds to the above. */
  return environ_names(c->pid, s->nonce);
}

bool authz_may_change(struct daemon *d, const struct conn *c, const struct slice *s) {
  if (authz_admin(d, c))
    return true;
  if (c->uid != s->uid)
    return false;
  /* A uid in a container is anyone's who runs as it there (uid 0, most often): from another pid
   * namespace, the owner's uid reaches only the slice the process itself is inside of. */
  if (in_our_pidns(c->pid))
    return true;
  /* From another pid namespace: shown inside, not "cannot be shown outside" (a peer gone since it
   * connected, or one below more ancestors than the walk reads, was inside every slice of its
   * uid and changed them). */
  uint64_t start = 0;
  int exited = 1;
  if (c->pid <= 0 || gs_proc_identity(c->pid, &start, &exited) < 0 || exited || start != c->start)
    return false;
  for (const struct conn *o = s->conns; o; o = o->slice_next)
    if (o->pid == c->pid && o->role == GS_ROLE_HOOK)
      return true;
  return below_runner_walk(s, c->pid, false) || environ_names(c->pid, s->nonce);
}

/* The fields of `to` that ask for more than `from` gives. */
static int raised(const struct gs_slice_spec *from, const struct gs_slice_spec *to, char *buf,
                  size_t len) {
  int n = 0;

  buf[0] = 0;
#define RAISED(cond, what)                                                                         \
  if ((cond) && (size_t)n < len)                                                                   \
  n += snprintf(buf + n, len - (size_t)n, "%s%s", n ? ", " : "", what)
  bool request = false, cap = false;
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    uint64_t was = gs_spec_memory_cap(from, g), now = gs_spec_memory_cap(to, g);
    if (!(gs_spec_mask(from) & (1u << g)))
      continue;
    request |= gs_spec_request(to, g) > gs_spec_request(from, g);
    cap |= was && (!now || now > was);
  }
  RAISED(request, "compute request");
  RAISED(to->compute_limit > from->compute_limit, "compute limit");
  RAISED(to->priority > from->priority, "priority");
  RAISED(to->weight > from->weight, "weight");
  RAISED(cap, "memory cap");
#undef RAISED
  return n > 0;
}

int authz_set(struct daemon *d, const struct conn *c, const struct slice *s,
              const struct gs_slice_spec *spec, char *why, size_t why_len) {
  char what[128];

  if (!raised(&s->spec, spec, what, sizeof(what)))
    return 0;
  if (authz_inside(d, c, s)) {
    snprintf(why, why_len,
             "slice %u's own processes may lower its limits, never raise them (%s); ask an "
             "admin to, from outside the slice",
             s->id, what);
    return -EPERM;
  }
  if (!authz_admin(d, c)) {
    snprintf(why, why_len,
             "raising a slice's limits (%s) needs root, gsliced's user or admin_group (%s); "
             "uid %u may lower them",
             what, d->cfg.admin_group[0] ? d->cfg.admin_group : "none set", (unsigned)c->uid);
    return -EPERM;
  }
  return 0;
}

int authz_unregister(struct daemon *d, const struct conn *c, const struct slice *s, char *why,
                     size_t why_len) {
  /* Removing the slice would let its processes run unscheduled and reset what it is charged. */
  if (authz_inside(d, c, s)) {
    snprintf(why, why_len, "slice %u's own processes may not remove it; its runner does at exit",
             s->id);
    return -EPERM;
  }
  return 0;
}

int authz_register(struct daemon *d, const struct conn *c, const struct gs_slice_spec *spec,
                   char *why, size_t why_len) {
  uint32_t mask = gs_spec_mask(spec);

  if (authz_admin(d, c))
    return 0;
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    if ((mask & (1u << g)) && d->cfg.max_memory_per_user && !gs_spec_memory_cap(spec, g)) {
      snprintf(why, why_len,
               "uid %u must give its slices a memory cap (max_memory_per_user is set); add "
               "--memory",
               (unsigned)c->uid);
      return -EDQUOT;
    }
  }
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    uint64_t compute = gs_spec_request(spec, g), memory = gs_spec_memory_cap(spec, g);
    if (!(mask & (1u << g)))
      continue;
    for (uint32_t i = 0; i < d->reg.n; i++) {
      const struct slice *o = d->reg.slices[i];
      if (o->uid != c->uid || !(slice_mask(o) & (1u << g)))
        continue;
      compute += gs_spec_request(&o->spec, g);
      memory += gs_spec_memory_cap(&o->spec, g);
    }
    if (compute > d->cfg.max_compute_per_user) {
      snprintf(why, why_len,
               "uid %u would request %" PRIu64 "%% of GPU %u in all, more than one user may "
               "(max_compute_per_user = %" PRIu64 "); ask less, end a slice, or ask an admin",
               (unsigned)c->uid, compute, g, d->cfg.max_compute_per_user);
      return -EDQUOT;
    }
    if (d->cfg.max_memory_per_user && memory > d->cfg.max_memory_per_user) {
      char have[32], most[32];
      gs_size_format(memory, have, sizeof(have));
      gs_size_format(d->cfg.max_memory_per_user, most, sizeof(most));
      snprintf(why, why_len,
               "uid %u would cap %s of GPU %u in all, more than one user may "
               "(max_memory_per_user = %s); ask less, end a slice, or ask an admin",
               (unsigned)c->uid, have, g, most);
      return -EDQUOT;
    }
  }
  return 0;
}
