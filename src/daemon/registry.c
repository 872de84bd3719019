/* SPDX-License-Identifier: Apache-2.0 */
/* The slices registry (registry.h): admission, ids, slice dirs, and the persisted state file. */
#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"

#define STATE_MAGIC "gslice-state 1"
/* A state file of REGISTRY_MAX slices is well under this (a line is at most ~1.5 KiB). */
#define REGISTRY_STATE_MAX ((REGISTRY_MAX + 2u) * 2048u)

uint32_t slice_mask(const struct slice *s) {
  return gs_spec_mask(&s->spec);
}

int slice_gpu(const struct slice *s, uint32_t ordinal, uint32_t *ret_gpu) {
  uint32_t mask = slice_mask(s), k = 0;

  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    if (!(mask & (1u << g)))
      continue;
    if (k++ == ordinal) {
      *ret_gpu = g;
      return 0;
    }
  }
  return -ENODEV;
}

uint32_t slice_ordinal(const struct slice *s, uint32_t gpu) {
  return (uint32_t)__builtin_popcount(slice_mask(s) & ((1u << gpu) - 1));
}

int slice_name_ok(const char *name) {
  size_t n = strnlen(name, GS_NAME_MAX);

  if (n >= GS_NAME_MAX)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

struct slice *registry_find(struct registry *reg, uint32_t id) {
  for (uint32_t i = 0; i < reg->n; i++)
    if (reg->slices[i]->id == id)
      return reg->slices[i];
  return NULL;
}

uint32_t registry_committed(const struct registry *reg, uint32_t gpu, uint32_t except_id) {
  uint32_t sum = 0;

  for (uint32_t i = 0; i < reg->n; i++) {
    const struct slice *s = reg->slices[i];
    if (s->id != except_id && (slice_mask(s) & (1u << gpu)))
      sum += gs_spec_request(&s->spec, gpu);
  }
  return sum;
}

int registry_admit(const struct registry *reg, const struct gs_slice_spec *spec, uint32_t except_id,
                   uint32_t ngpus, char *why, size_t why_len) {
  struct slice probe = {.spec = *spec};
  uint32_t mask = slice_mask(&probe);

  if (gs_slice_spec_check(spec, why, why_len) < 0)
    return -EINVAL;
  if (!slice_name_ok(spec->name)) {
    snprintf(why, why_len, "name may hold only letters, digits, '.', '_' and '-' (63 at most)");
    return -EINVAL;
  }
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    if (!(mask & (1u << g)))
      continue;
    if (g >= ngpus) {
      snprintf(why, why_len, "no GPU %u on this node (it has %u: 0..%u)", g, ngpus,
               ngpus ? ngpus - 1 : 0);
      return -ENODEV;
    }
    uint32_t used = registry_committed(reg, g, except_id), want = gs_spec_request(spec, g);
    if (used + want > GS_PERCENT_MAX) {
      snprintf(why, why_len,
               "GPU %u has %u%% of compute committed already; %u%% more is over 100%% "
               "(at most %u%% is left)",
               g, used, want, GS_PERCENT_MAX - used);
      return -EBUSY;
    }
  }
  return 0;
}

/* The dir's files are the slice user's: unlinked by name (a link is removed, not followed),
 * the dir itself opened without following one. */
static void remove_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *e;

  if (!d) {
    if (fd >= 0)
      close(fd);
    return;
  }
  while ((e = readdir(d))) {
    /* An empty dir a container's root made there goes too; nothing is entered. */
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlinkat(dirfd(d), e->d_name, 0) < 0 &&
        errno == EISDIR)
      unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
  }
  closedir(d);
  rmdir(dir);
}

/* Where a slice's dir lives: slices/ for gslice run's (the user's own, 0700), held/ for those a
 * container's processes join (flags). held/ is 0700 and the daemon's: the dir of such a slice is
 * 0755 with a 0666 memory region and slice.env beside it, for whatever uid the container runs as
 * once the dir is mounted into it, and a local user must not reach them by path (user nobody
 * joined a Kubernetes slice through slices/<id>/slice.env). */
static const char *parent_name(uint32_t flags) {
  return flags ? "held" : "slices";
}

/* Opens (making it first) the daemon's own subdir `name` of the dir at parent_fd, never through
 * a link, and sets its mode: one that is not a dir of the daemon's user is refused. */
static int open_own_dir(int parent_fd, const char *name, mode_t mode, int *ret_fd) {
  struct stat st;
  int fd;

  if (mkdirat(parent_fd, name, mode) < 0 && errno != EEXIST)
    return -errno;
  fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int r = 0;
  if (fstat(fd, &st) < 0)
    r = -errno;
  else if (st.st_uid != geteuid())
    r = -EPERM;
  else if (fchmod(fd, mode) < 0)
    r = -errno;
  if (r < 0) {
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

static int make_dir(const struct registry *reg, struct slice *s) {
  char id[16];
  struct stat st;
  int r, sfd = -1, pfd = -1, fd = -1;

  snprintf(id, sizeof(id), "%" PRIu32, s->id);
  if ((size_t)snprintf(s->dir, sizeof(s->dir), "%s/%s/%s", reg->state_dir, parent_name(s->flags),
                       id) >= sizeof(s->dir))
    return -ENAMETOOLONG;
  sfd = open(reg->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sfd < 0)
    return -errno;
  r = open_own_dir(sfd, parent_name(s->flags), s->flags ? 0700 : 0755, &pfd);
  if (r < 0)
    goto out;
  /* A dir of that id left by an earlier daemon is its old owner's, with their files in it:
   * emptied and made again. */
  if (mkdirat(pfd, id, 0700) < 0) {
    if (errno != EEXIST) {
      r = -errno;
      goto out;
    }
    remove_dir(s->dir);
    if (mkdirat(pfd, id, 0700) < 0 && errno != EEXIST) {
      r = -errno;
      goto out;
    }
  }
  /* The slice's processes run as its owner and share files there (the memory region): the dir
   * is theirs, given through a descriptor that did not follow a link. A container's slice's dir
   * stays the registrant's (gslice-node's), readable by the container's user. */
  fd = openat(pfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    r = -errno;
    goto out;
  }
  r = 0;
  if (fstat(fd, &st) < 0 || (geteuid() == 0 && fchown(fd, s->uid, s->gid) < 0) ||
      fchmod(fd, (s->flags & GS_REGISTER_ANY_UID) ? 0755 : 0700) < 0)
    r = -errno;
out:
  if (fd >= 0)
    close(fd);
  if (pfd >= 0)
    close(pfd);
  close(sfd);
  return r;
}

/* A slice's nonce: random, so that a daemon started over an empty state dir (ids from 1 again)
 * never hands out one that a running slice of an earlier daemon carries. */
static uint64_t new_nonce(void) {
  uint64_t v = 0;

  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    }
  }
  return v;
}

int registry_add(struct registry *reg, const struct gs_slice_spec *spec, uint32_t flags, uid_t uid,
                 gid_t gid, pid_t runner_pid, uint64_t runner_start, struct slice **ret) {
  struct slice *s;
  int r;

  if (reg->n >= reg->max_slices)
    return -ENOSPC;
  s = calloc(1, sizeof(*s));
  if (!s)
    return -ENOMEM;
  *s = (struct slice){.id = reg->next_id++,
                      .nonce = new_nonce(),
                      .spec = *spec,
                      .uid = uid,
                      .gid = gid,
                      .runner_pid = runner_pid,
                      .runner_start = runner_start,
                      .flags = flags};
  gs_spec_normalize(&s->spec);
  if (reg->next_id == 0)
    reg->next_id = 1;
  r = make_dir(reg, s);
  if (r < 0) {
    free(s);
    return r;
  }
  reg->slices[reg->n++] = s;
  *ret = s;
  return 0;
}

void registry_remove(struct registry *reg, uint32_t id) {
  for (uint32_t i = 0; i < reg->n; i++) {
    if (reg->slices[i]->id != id)
      continue;
    remove_dir(reg->slices[i]->dir);
    if (reg->slices[i]->region_held)
      close(reg->slices[i]->region_fd);
    free(reg->slices[i]);
    reg->slices[i] = reg->slices[--reg->n];
    return;
  }
}

void registry_free(struct registry *reg) {
  for (uint32_t i = 0; i < reg->n; i++) {
    if (reg->slices[i]->region_held)
      close(reg->slices[i]->region_fd);
    free(reg->slices[i]);
  }
  reg->n = 0;
}

/* One slice's line of the state file. */
static void slice_write(struct gs_buf *b, const struct slice *s) {
  gs_buf_printf(b,
                "slice %" PRIu32 " uid=%u gid=%u runner=%d start=%" PRIu64 " gpus=%" PRIu32
                " request=%" PRIu32 " limit=%" PRIu32 " priority=%" PRId32 " weight=%" PRIu32
                " memory=%" PRIu64 " force=%" PRIu32 " nonce=%016" PRIx64 " flags=%" PRIu32,
                s->id, (unsigned)s->uid, (unsigned)s->gid, (int)s->runner_pid, s->runner_start,
                s->spec.gpu_mask, s->spec.compute_request, s->spec.compute_limit, s->spec.priority,
                s->spec.weight, s->spec.memory_cap, s->memory_force, s->nonce, s->flags);
  /* Each GPU's request and cap, in the mask's index order (gs_spec_normalize filled them). */
  for (int k = 0; k < 2; k++) {
    const char *sep = k ? " gpu_memory=" : " gpu_request=";
    for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
      if (!(slice_mask(s) & (1u << g)))
        continue;
      if (k)
        gs_buf_printf(b, "%s%" PRIu64, sep, gs_spec_memory_cap(&s->spec, g));
      else
        gs_buf_printf(b, "%s%" PRIu32, sep, gs_spec_request(&s->spec, g));
      sep = ",";
    }
  }
  gs_buf_printf(b, " name=%s\n", s->spec.name);
}

int registry_save(const struct registry *reg) {
  struct gs_buf b = GS_BUF_INIT(REGISTRY_STATE_MAX);
  int dfd, r;

  gs_buf_printf(&b, "%s\nnext_id %" PRIu32 "\n", STATE_MAGIC, reg->next_id);
  for (uint32_t i = 0; i < reg->n; i++)
    slice_write(&b, reg->slices[i]);
  r = b.err;
  dfd = r < 0 ? -1 : open(reg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (r == 0 && dfd < 0)
    r = -errno;
  if (r == 0)
    r = gs_file_write_atomic(dfd, REGISTRY_FILE, b.p, b.len, 0600);
  if (dfd >= 0)
    close(dfd);
  gs_buf_free(&b);
  return r;
}

/* "v,v,...": one value per GPU of the spec's mask, in index order, into its request (memory 0)
 * or cap array. *p is left after the last. */
static int parse_per_gpu(char **p, struct gs_slice_spec *spec, int memory) {
  uint32_t mask = gs_spec_mask(spec);
  char *q = *p;

  for (uint32_t g = 0, first = 1; g < GS_MAX_GPUS; g++) {
    char *end;
    if (!(mask & (1u << g)))
      continue;
    if (!first && *q++ != ',')
      return -EBADMSG;
    first = 0;
    if (*q < '0' || *q > '9')
      return -EBADMSG;
    errno = 0;
    unsigned long long v = strtoull(q, &end, 10);
    if (errno || end == q || (!memory && v > GS_PERCENT_MAX))
      return -EBADMSG;
    if (memory)
      spec->gpu_memory_cap[g] = v;
    else
      spec->gpu_compute_request[g] = (uint32_t)v;
    q = end;
  }
  *p = q;
  return 0;
}

static int parse_slice(char *line, struct slice *s) {
  unsigned uid, gid;
  int pid, used = 0;

  if (sscanf(line,
             "slice %" SCNu32 " uid=%u gid=%u runner=%d start=%" SCNu64 " gpus=%" SCNu32
             " request=%" SCNu32 " limit=%" SCNu32 " priority=%" SCNd32 " weight=%" SCNu32
             " memory=%" SCNu64 " force=%" SCNu32 "%n",
             &s->id, &uid, &gid, &pid, &s->runner_start, &s->spec.gpu_mask,
             &s->spec.compute_request, &s->spec.compute_limit, &s->spec.priority, &s->spec.weight,
             &s->spec.memory_cap, &s->memory_force, &used) != 12 ||
      used == 0)
    return -EBADMSG;
  /* Files written before nonces have none: such a slice gets a new one, which no process of
   * it carries (they spoke protocol 1 and must be restarted anyway). Flags came later still:
   * without them a slice has none (0, as every slice was then). */
  char *name = NULL, *rest = line + used;
  int nused = 0;
  s->nonce = 0;
  if (strncmp(rest, " nonce=", 7) == 0) {
    if (sscanf(rest, " nonce=%16" SCNx64 "%n", &s->nonce, &nused) != 1 || nused == 0)
      return -EBADMSG;
    rest += nused;
  }
  s->flags = 0;
  if (strncmp(rest, " flags=", 7) == 0) {
    nused = 0;
    if (sscanf(rest, " flags=%" SCNu32 "%n", &s->flags, &nused) != 1 || nused == 0 ||
        (s->flags & ~(uint32_t)GS_REGISTER_KNOWN))
      return -EBADMSG;
    rest += nused;
  }
  /* Per-GPU requests and caps came with protocol 8: without them the scalars hold on every GPU
   * (gs_spec_normalize below). */
  if (strncmp(rest, " gpu_request=", 13) == 0) {
    rest += 13;
    if (parse_per_gpu(&rest, &s->spec, 0) < 0)
      return -EBADMSG;
    s->spec.per_gpu |= GS_SPEC_GPU_REQUEST;
  }
  if (strncmp(rest, " gpu_memory=", 12) == 0) {
    rest += 12;
    if (parse_per_gpu(&rest, &s->spec, 1) < 0)
      return -EBADMSG;
    s->spec.per_gpu |= GS_SPEC_GPU_MEMORY;
  }
  if (strncmp(rest, " name=", 6) != 0)
    return -EBADMSG;
  name = rest + 6;
  if (s->nonce == 0)
    s->nonce = new_nonce();
  name[strcspn(name, "\n")] = 0;
  if (strlen(name) >= sizeof(s->spec.name))
    return -EBADMSG;
  snprintf(s->spec.name, sizeof(s->spec.name), "%s", name);
  s->uid = uid;
  s->gid = gid;
  s->runner_pid = pid;
  if (s->id == 0 || !slice_name_ok(s->spec.name) || gs_slice_spec_check(&s->spec, NULL, 0) < 0)
    return -EBADMSG;
  gs_spec_normalize(&s->spec);
  return 0;
}

/* A container's slice recovered from a daemon that kept it in slices/<id>: moved to held/<id>
 * (made 0700 first), where a local user cannot reach it. A rename keeps the container's bind
 * mount, which holds the dir itself. */
static void move_to_held(const struct registry *reg, const struct slice *s) {
  char id[16], old[32];
  struct stat st;
  int sfd = open(reg->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), pfd = -1;

  snprintf(id, sizeof(id), "%" PRIu32, s->id);
  snprintf(old, sizeof(old), "slices/%" PRIu32, s->id);
  if (sfd >= 0 && open_own_dir(sfd, parent_name(s->flags), 0700, &pfd) == 0 &&
      fstatat(pfd, id, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
      fstatat(sfd, old, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    renameat(sfd, old, pfd, id);
  if (pfd >= 0)
    close(pfd);
  if (sfd >= 0)
    close(sfd);
}

/* The state file's lines after the first; 0 or -EBADMSG/-ENOMEM with the reason in why. */
static int parse_state(struct registry *reg, const char *state_dir, char *text, const char *path,
                       char *why, size_t why_len) {
  unsigned lineno = 1;

  for (char *line = text, *next; *line; line = next) {
    char *nl = strchr(line, '\n');
    next = nl ? nl + 1 : line + strlen(line);
    if (nl)
      *nl = 0;
    lineno++;
    if (strncmp(line, "next_id ", 8) == 0) {
      if (sscanf(line, "next_id %" SCNu32, &reg->next_id) != 1 || reg->next_id == 0) {
        snprintf(why, why_len, "%s:%u: bad next_id", path, lineno);
        return -EBADMSG;
      }
      continue;
    }
    struct slice *s = calloc(1, sizeof(*s));
    if (!s)
      return -ENOMEM;
    if (parse_slice(line, s) < 0 || registry_find(reg, s->id) || reg->n >= reg->max_slices ||
        s->id >= reg->next_id) {
      free(s);
      snprintf(why, why_len, "%s:%u: not a valid slice line", path, lineno);
      return -EBADMSG;
    }
    snprintf(s->dir, sizeof(s->dir), "%s/%s/%" PRIu32, state_dir, parent_name(s->flags), s->id);
    if (s->flags)
      move_to_held(reg, s);
    reg->slices[reg->n++] = s;
  }
  return 0;
}

int registry_load(struct registry *reg, const char *state_dir, uint32_t max_slices, char *why,
                  size_t why_len) {
  char path[GS_PROTO_PATH_MAX + 32], *text = NULL;
  size_t len = 0;
  int r;

  memset(reg, 0, sizeof(*reg));
  if (strlen(state_dir) >= sizeof(reg->state_dir) - 32) {
    snprintf(why, why_len, "state dir path too long");
    return -ENAMETOOLONG;
  }
  snprintf(reg->state_dir, sizeof(reg->state_dir), "%s", state_dir);
  reg->max_slices = max_slices > REGISTRY_MAX ? REGISTRY_MAX : max_slices;
  reg->next_id = 1;
  snprintf(path, sizeof(path), "%s/%s", state_dir, REGISTRY_FILE);
  r = gs_file_read(AT_FDCWD, path, 0, REGISTRY_STATE_MAX, &text, &len);
  if (r == -ENOENT)
    return 0;
  if (r == -EFBIG) {
    snprintf(why, why_len, "%s is larger than %u bytes: not a state file of this gsliced", path,
             (unsigned)REGISTRY_STATE_MAX);
  } else if (r < 0) {
    snprintf(why, why_len, "cannot read %s: %s", path, strerror(-r));
  } else if (len == 0) {
    snprintf(why, why_len, "%s is empty", path);
    r = -EBADMSG;
  } else if (strlen(text) != len || strncmp(text, STATE_MAGIC "\n", sizeof(STATE_MAGIC)) != 0) {
    /* A NUL byte would end the text early and hide the slices after it. */
    snprintf(why, why_len, "%s:1: not a gslice state file (want '%s')", path, STATE_MAGIC);
    r = -EBADMSG;
  } else {
    r = parse_state(reg, state_dir, text + sizeof(STATE_MAGIC), path, why, why_len);
  }
  free(text);
  if (r < 0)
    registry_free(reg);
  return r;
}
