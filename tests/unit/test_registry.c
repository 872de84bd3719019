/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the slices registry (daemon/registry.c) and the config table (daemon/config.c). */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "config.h"
#include "registry.h"
#include "test.h"

static struct gs_slice_spec spec(uint32_t req, uint32_t lim, uint32_t mask, const char *name) {
  struct gs_slice_spec s = {
      .compute_request = req, .compute_limit = lim, .gpu_mask = mask, .weight = 1};
  snprintf(s.name, sizeof(s.name), "%s", name);
  return s;
}

static void test_persist(const char *dir) {
  struct registry reg, again;
  struct slice *s;
  char why[256] = "";
  struct gs_slice_spec a = spec(70, 100, 1, "train"), b = spec(30, 30, 1, "infer");

  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), 0);
  CHECK_EQ_INT(registry_admit(&reg, &a, 0, 1, why, sizeof(why)), 0);
  CHECK_EQ_INT(registry_add(&reg, &a, 0, 1000, 1000, 42, 7, &s), 0);
  CHECK_EQ_U64(s->id, 1);
  b.memory_cap = 1ull << 30;
  /* A Kubernetes container's slice. */
  CHECK_EQ_INT(
      registry_add(&reg, &b, GS_REGISTER_HELD | GS_REGISTER_ANY_UID, 1000, 1000, 43, 8, &s), 0);
  /* Over 100% on GPU 0: refused, saying what is committed. */
  struct gs_slice_spec c = spec(10, 100, 1, "late");
  CHECK_EQ_INT(registry_admit(&reg, &c, 0, 1, why, sizeof(why)), -EBUSY);
  CHECK(strstr(why, "100% of compute committed already") != NULL);
  c = spec(10, 100, 2, "late");
  CHECK_EQ_INT(registry_admit(&reg, &c, 0, 1, why, sizeof(why)), -ENODEV);
  c = spec(10, 100, 1, "bad name");
  CHECK_EQ_INT(registry_admit(&reg, &c, 0, 1, why, sizeof(why)), -EINVAL);
  /* SET of a slice's own request does not count its old one. */
  c = spec(40, 100, 1, "infer");
  CHECK_EQ_INT(registry_admit(&reg, &c, 2, 1, why, sizeof(why)), -EBUSY);
  c = spec(30, 100, 1, "infer");
  CHECK_EQ_INT(registry_admit(&reg, &c, 2, 1, why, sizeof(why)), 0);
  CHECK_EQ_INT(registry_save(&reg), 0);

  CHECK_EQ_INT(registry_load(&again, dir, 8, why, sizeof(why)), 0);
  CHECK_EQ_U64(again.n, 2);
  CHECK_EQ_U64(again.next_id, 3);
  s = registry_find(&again, 2);
  CHECK(s != NULL);
  if (s) {
    CHECK_STR(s->spec.name, "infer");
    CHECK_EQ_U64(s->spec.memory_cap, 1ull << 30);
    CHECK_EQ_U64(s->spec.compute_limit, 30);
    CHECK_EQ_U64(s->runner_pid, 43);
    CHECK_EQ_U64(s->flags, GS_REGISTER_HELD | GS_REGISTER_ANY_UID);
  }
  CHECK(registry_find(&again, 1) && registry_find(&again, 1)->flags == 0);
  registry_remove(&again, 1);
  CHECK(registry_find(&again, 1) == NULL);
  registry_free(&again);
  registry_free(&reg);
}

static void test_corrupt(const char *dir) {
  char path[512], why[256] = "", back[64] = "";
  struct registry reg;
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", dir, REGISTRY_FILE);
  f = fopen(path, "w");
  fputs("gslice-state 1\nnext_id 5\nslice 3 uid=0 garbage\n", f);
  fclose(f);
  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), -EBADMSG);
  CHECK(strstr(why, ":3: not a valid slice line") != NULL);
  /* Left in place, untouched. */
  f = fopen(path, "r");
  CHECK(f && fgets(back, sizeof(back), f) && !strcmp(back, "gslice-state 1\n"));
  if (f)
    fclose(f);
  /* A file from before flags loads with none; an unknown flag bit is corrupt. */
  const char *line = "slice 3 uid=0 gid=0 runner=1 start=0 gpus=1 request=10 limit=100 "
                     "priority=0 weight=1 memory=0 force=0 nonce=00000000000000ab";
  f = fopen(path, "w");
  fprintf(f, "gslice-state 1\nnext_id 5\n%s name=old\n", line);
  fclose(f);
  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), 0);
  CHECK(registry_find(&reg, 3) && registry_find(&reg, 3)->flags == 0);
  registry_free(&reg);
  f = fopen(path, "w");
  fprintf(f, "gslice-state 1\nnext_id 5\n%s flags=3 name=k8s\n", line);
  fclose(f);
  /* A container's slice from before held/: its dir moves there, into a 0700 parent. */
  char old[600], moved[600];
  struct stat st;
  snprintf(old, sizeof(old), "%s/slices", dir);
  mkdir(old, 0755);
  snprintf(old, sizeof(old), "%s/slices/3", dir);
  CHECK_EQ_INT(mkdir(old, 0755), 0);
  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), 0);
  CHECK(registry_find(&reg, 3) && registry_find(&reg, 3)->flags == 3);
  snprintf(moved, sizeof(moved), "%s/held/3", dir);
  CHECK(registry_find(&reg, 3) && strcmp(registry_find(&reg, 3)->dir, moved) == 0);
  CHECK(stat(moved, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK(stat(old, &st) < 0);
  registry_remove(&reg, 3);
  registry_free(&reg);
  f = fopen(path, "w");
  fprintf(f, "gslice-state 1\nnext_id 5\n%s flags=128 name=k8s\n", line);
  fclose(f);
  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), -EBADMSG);
  f = fopen(path, "w");
  fputs("something else\n", f);
  fclose(f);
  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), -EBADMSG);
  /* A NUL byte is corruption, not the end of a slice's name: the file is refused whole (the
   * line-by-line reader took "name=a" and let the bytes after the NUL go unread). */
  f = fopen(path, "w");
  fprintf(f, "gslice-state 1\nnext_id 5\n%s name=a", line);
  fputc(0, f);
  fputs("junk\n", f);
  fclose(f);
  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), -EBADMSG);
  CHECK(strstr(why, "not a gslice state file") != NULL);
  /* Larger than any state of REGISTRY_MAX slices: refused, naming the bound, not read. */
  f = fopen(path, "w");
  fputs("gslice-state 1\nnext_id 5\n", f);
  for (int i = 0; i < 2 * REGISTRY_MAX * 2048 / 64; i++)
    fprintf(f, "#%062d\n", i);
  fclose(f);
  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), -EFBIG);
  CHECK(strstr(why, "is larger than") != NULL);
  unlink(path);
}

/* A slice over two GPUs asking 16% of GPU 0 and 15% of GPU 1 (issue 16 item 10: it was given 16%
 * on both, and a slice placed into the exact 85% left on GPU 1 was refused). */
static void test_per_gpu(const char *dir) {
  struct registry reg, again;
  struct slice *s;
  char why[256] = "";
  struct gs_slice_spec a = spec(16, 100, 3, "split"), b;

  CHECK_EQ_INT(registry_load(&reg, dir, 8, why, sizeof(why)), 0);
  a.per_gpu = GS_SPEC_GPU_REQUEST | GS_SPEC_GPU_MEMORY;
  a.gpu_compute_request[0] = 16;
  a.gpu_compute_request[1] = 15;
  a.gpu_memory_cap[0] = 3ull << 30;
  a.gpu_memory_cap[1] = 1ull << 30;
  CHECK_EQ_INT(registry_admit(&reg, &a, 0, 2, why, sizeof(why)), 0);
  CHECK_EQ_INT(registry_add(&reg, &a, GS_REGISTER_HELD | GS_REGISTER_ANY_UID, 0, 0, 1, 0, &s), 0);
  CHECK_EQ_U64(registry_committed(&reg, 0, 0), 16);
  CHECK_EQ_U64(registry_committed(&reg, 1, 0), 15);
  /* Normalized: the scalars are the largest (what one figure shows). */
  CHECK_EQ_U64(s->spec.compute_request, 16);
  CHECK_EQ_U64(s->spec.memory_cap, 3ull << 30);
  b = spec(85, 100, 2, "rest");
  CHECK_EQ_INT(registry_admit(&reg, &b, 0, 2, why, sizeof(why)), 0);
  b = spec(86, 100, 2, "over");
  CHECK_EQ_INT(registry_admit(&reg, &b, 0, 2, why, sizeof(why)), -EBUSY);
  b = spec(85, 100, 1, "rest0");
  CHECK_EQ_INT(registry_admit(&reg, &b, 0, 2, why, sizeof(why)), -EBUSY);
  CHECK(strstr(why, "at most 84% is left") != NULL);
  /* Per GPU, only where the mask says, and within the limit. */
  b = spec(0, 50, 2, "bad");
  b.per_gpu = GS_SPEC_GPU_REQUEST;
  b.gpu_compute_request[0] = 10;
  CHECK_EQ_INT(registry_admit(&reg, &b, 0, 2, why, sizeof(why)), -EINVAL);
  b.gpu_compute_request[0] = 0;
  b.gpu_compute_request[1] = 60;
  CHECK_EQ_INT(registry_admit(&reg, &b, 0, 2, why, sizeof(why)), -EINVAL);
  b = spec(0, 50, 2, "bad");
  b.gpu_memory_cap[1] = 1; /* without GS_SPEC_GPU_MEMORY */
  CHECK_EQ_INT(registry_admit(&reg, &b, 0, 2, why, sizeof(why)), -EINVAL);
  b.per_gpu = 4;
  b.gpu_memory_cap[1] = 0;
  CHECK_EQ_INT(registry_admit(&reg, &b, 0, 2, why, sizeof(why)), -EINVAL);
  /* A container's slice lives under held/, a 0700 dir of the daemon's; its own dir is 0755. */
  char held[600];
  struct stat st;
  snprintf(held, sizeof(held), "%s/held", dir);
  CHECK(strncmp(s->dir, held, strlen(held)) == 0);
  CHECK(stat(held, &st) == 0 && (st.st_mode & 07777) == 0700 && st.st_uid == geteuid());
  CHECK(stat(s->dir, &st) == 0 && (st.st_mode & 07777) == 0755);
  CHECK_EQ_INT(registry_save(&reg), 0);

  CHECK_EQ_INT(registry_load(&again, dir, 8, why, sizeof(why)), 0);
  s = registry_find(&again, 1);
  CHECK(s != NULL);
  if (s) {
    CHECK_EQ_U64(gs_spec_request(&s->spec, 0), 16);
    CHECK_EQ_U64(gs_spec_request(&s->spec, 1), 15);
    CHECK_EQ_U64(gs_spec_memory_cap(&s->spec, 0), 3ull << 30);
    CHECK_EQ_U64(gs_spec_memory_cap(&s->spec, 1), 1ull << 30);
    CHECK_STR(s->dir, reg.slices[0]->dir);
  }
  CHECK_EQ_U64(registry_committed(&again, 1, 0), 15);
  registry_remove(&again, 1);
  registry_save(&again);
  registry_free(&again);
  registry_free(&reg);
}

static void test_config(void) {
  struct config c;
  char why[256];

  config_defaults(&c);
  CHECK_EQ_U64(c.window_ms, 1000);
  CHECK_EQ_INT(config_check(&c, why, sizeof(why)), 0);
  CHECK_EQ_INT(config_set(&c, "quantum_min_us", "2000", why, sizeof(why)), 0);
  CHECK_EQ_U64(c.quantum_min_us, 2000);
  CHECK_EQ_INT(config_set(&c, "quantum_min_us", "-1", why, sizeof(why)), -EINVAL);
  CHECK_EQ_INT(config_set(&c, "quantum_min_us", "12x", why, sizeof(why)), -EINVAL);
  CHECK_EQ_INT(config_set(&c, "nope", "1", why, sizeof(why)), -ENOENT);
  CHECK_EQ_INT(config_set(&c, "quantum_max_us", "600000", why, sizeof(why)), 0);
  CHECK_EQ_INT(config_check(&c, why, sizeof(why)), -EINVAL);
  /* The hook socket: derived from the socket, in a dir of its own. */
  config_defaults(&c);
  CHECK_EQ_INT(config_set(&c, "socket", "/run/gs/d.sock", why, sizeof(why)), 0);
  CHECK_EQ_INT(config_derive(&c, why, sizeof(why)), 0);
  CHECK_STR(c.hook_socket, "/run/gs/hook/d.sock");
  CHECK_EQ_INT(config_check(&c, why, sizeof(why)), 0);
  CHECK_EQ_INT(config_set(&c, "hook_socket", "/run/gs/h.sock", why, sizeof(why)), 0);
  CHECK_EQ_INT(config_check(&c, why, sizeof(why)), -EINVAL);
  char out[128];
  CHECK_EQ_INT(gs_hook_socket_path("/run/gslice/gsliced.sock", out, sizeof(out)), 0);
  CHECK_STR(out, "/run/gslice/hook/gsliced.sock");
  CHECK_EQ_INT(gs_hook_socket_path("g.sock", out, sizeof(out)), 0);
  CHECK_STR(out, "hook/g.sock");
  CHECK_EQ_INT(gs_hook_socket_path("/run/", out, sizeof(out)), -EINVAL);
  CHECK_EQ_INT(gs_hook_socket_path("/run/gslice/gsliced.sock", out, 20), -ENAMETOOLONG);
}

int main(void) {
  char dir[] = "/tmp/gslice-test-registry.XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  test_persist(dir);
  test_corrupt(dir);
  test_per_gpu(dir);
  test_config();
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cleanup failed\n");
  return test_done();
}
