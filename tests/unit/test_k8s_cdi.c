/* SPDX-License-Identifier: Apache-2.0 */
/* cdi.c: the CDI specs gslice-node writes (the JSON's shape, strict fields only, the lowest
 * cdiVersion its fields need), the names CDI refuses, the atomic write and its directory, and
 * the edits that hold a container to its slice. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "node.h"
#include "test.h"

static char tmp[] = "/tmp/gs-cdi-XXXXXX";

static void test_names(void) {
  const char *kinds_ok[] = {"gslice.io/claim", "gslice.io/slot", "vendor.com/foo",
                            "foo.bar.baz/foo-bar123.B_az", "ab/cd"};
  const char *kinds_bad[] = {"foo",
                             "vendor.com/foo/",
                             "vendor.com/foo/bar",
                             "/x",
                             "a/bc",
                             "ab/c",
                             "1vendor.com/xy",
                             "vendor.com/-x",
                             "vendor-/xy",
                             "vendor.com/x y",
                             "vendor.com/",
                             "",
                             "vendor.com/xé"};
  for (size_t i = 0; i < sizeof(kinds_ok) / sizeof(kinds_ok[0]); i++)
    CHECK_EQ_INT(cdi_kind_check(kinds_ok[i]), 0);
  for (size_t i = 0; i < sizeof(kinds_bad) / sizeof(kinds_bad[0]); i++) {
    if (cdi_kind_check(kinds_bad[i]) != -EINVAL)
      fprintf(stderr, "kind \"%s\" taken\n", kinds_bad[i]);
    CHECK_EQ_INT(cdi_kind_check(kinds_bad[i]), -EINVAL);
  }
  char long_class[80];
  memset(long_class, 'c', sizeof(long_class));
  snprintf(long_class, sizeof(long_class), "vendor.com/%.64s", "c");
  memset(long_class + 11, 'c', 64);
  long_class[75] = 0; /* a class of 64 characters: over the spec's 63 */
  CHECK_EQ_INT(cdi_kind_check(long_class), -EINVAL);
  long_class[74] = 0;
  CHECK_EQ_INT(cdi_kind_check(long_class), 0);

  const char *names_ok[] = {"gpu0-3", "claim-0b8e-11", "0abc", "a", "a:b", "A_b.c"};
  const char *names_bad[] = {"", "-a", "a-", "a/b", "a=b", "a b", "a\nb", ":a", "a."};
  for (size_t i = 0; i < sizeof(names_ok) / sizeof(names_ok[0]); i++)
    CHECK_EQ_INT(cdi_name_check(names_ok[i]), 0);
  for (size_t i = 0; i < sizeof(names_bad) / sizeof(names_bad[0]); i++)
    CHECK_EQ_INT(cdi_name_check(names_bad[i]), -EINVAL);
  char long_name[CDI_NAME_MAX + 2];
  memset(long_name, 'n', sizeof(long_name));
  long_name[CDI_NAME_MAX + 1] = 0;
  CHECK_EQ_INT(cdi_name_check(long_name), -EINVAL);
  long_name[CDI_NAME_MAX] = 0;
  CHECK_EQ_INT(cdi_name_check(long_name), 0);

  char q[64];
  CHECK_EQ_INT(cdi_qualified(NODE_CDI_KIND_SLOT, "gpu0-3", q, sizeof(q)), 0);
  CHECK_STR(q, "gslice.io/slot=gpu0-3");
  CHECK_EQ_INT(cdi_qualified(NODE_CDI_KIND_SLOT, "gpu0/3", q, sizeof(q)), -EINVAL);
  CHECK_EQ_INT(cdi_qualified("gslice.io", "gpu0", q, sizeof(q)), -EINVAL);
  CHECK_EQ_INT(cdi_qualified(NODE_CDI_KIND_CLAIM, "gpu0-3", q, 10), -ENAMETOOLONG);
}

static json_t *read_spec(const char *file) {
  char path[256];
  snprintf(path, sizeof(path), "%s/cdi/%s.json", tmp, file);
  return json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
}

/* Every key of obj is one of keys (the library's strict parse refuses any other). */
static int only_keys(const json_t *obj, const char *const *keys, size_t nkeys) {
  const char *k;
  json_t *v;
  if (!json_is_object(obj))
    return 0;
  json_object_foreach((json_t *)obj, k, v) {
    size_t i = 0;
    while (i < nkeys && strcmp(k, keys[i]))
      i++;
    if (i == nkeys) {
      fprintf(stderr, "unexpected key %s\n", k);
      return 0;
    }
  }
  return 1;
}

static const char *const env1[] = {"A=1", "B=x=y"};
static const struct cdi_mount mnt1[] = {{"/host/ro", "/ctr/ro", true},
                                        {"/host/rw", "/ctr/rw", false}};
static const char *const dev1[] = {"/dev/nvidiactl"};

static void test_shape(void) {
  char dir[256], err[512] = "";
  struct cdi_device d = {"gpu0-3", {env1, 2, mnt1, 2, dev1, 1}};
  struct stat st;

  snprintf(dir, sizeof(dir), "%s/cdi", tmp);
  mode_t old_umask = umask(077); /* the modes are the writer's, whatever the umask */
  CHECK_EQ_INT(cdi_spec_write(dir, "gslice.io-slot_gpu0-3", NODE_CDI_KIND_SLOT, &d, 1, NULL, err,
                              sizeof(err)),
               0);
  /* The directory is made, 0755; the spec is 0644 with no temporary left beside it. */
  CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0755);
  char path[300];
  snprintf(path, sizeof(path), "%s/gslice.io-slot_gpu0-3.json", dir);
  CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644);
  snprintf(path, sizeof(path), "%s/.gslice.io-slot_gpu0-3.json.tmp", dir);
  CHECK(access(path, F_OK) < 0);
  umask(old_umask);

  json_t *s = read_spec("gslice.io-slot_gpu0-3");
  CHECK(s != NULL);
  if (!s)
    return;
  static const char *const top[] = {"cdiVersion", "kind", "devices", "containerEdits"};
  static const char *const dev[] = {"name", "containerEdits"};
  static const char *const edits[] = {"env", "deviceNodes", "mounts"};
  static const char *const mount[] = {"hostPath", "containerPath", "options"};
  static const char *const node[] = {"path"};
  CHECK(only_keys(s, top, 4));
  CHECK_STR(json_string_value(json_object_get(s, "cdiVersion")), "0.3.0");
  CHECK_STR(json_string_value(json_object_get(s, "kind")), "gslice.io/slot");
  CHECK(json_object_get(s, "containerEdits") == NULL); /* none given: left out */
  json_t *devs = json_object_get(s, "devices");
  CHECK(json_array_size(devs) == 1);
  json_t *d0 = json_array_get(devs, 0), *e = json_object_get(d0, "containerEdits");
  CHECK(only_keys(d0, dev, 2));
  CHECK_STR(json_string_value(json_object_get(d0, "name")), "gpu0-3");
  CHECK(only_keys(e, edits, 3));
  json_t *env = json_object_get(e, "env");
  CHECK(json_array_size(env) == 2);
  CHECK_STR(json_string_value(json_array_get(env, 1)), "B=x=y");
  json_t *dn = json_object_get(e, "deviceNodes");
  CHECK(json_array_size(dn) == 1 && only_keys(json_array_get(dn, 0), node, 1));
  CHECK_STR(json_string_value(json_object_get(json_array_get(dn, 0), "path")), "/dev/nvidiactl");
  json_t *mn = json_object_get(e, "mounts"), *m0 = json_array_get(mn, 0),
         *m1 = json_array_get(mn, 1);
  CHECK(json_array_size(mn) == 2 && only_keys(m0, mount, 3) && only_keys(m1, mount, 3));
  CHECK_STR(json_string_value(json_object_get(m0, "hostPath")), "/host/ro");
  CHECK_STR(json_string_value(json_object_get(m0, "containerPath")), "/ctr/ro");
  json_t *o0 = json_object_get(m0, "options"), *o1 = json_object_get(m1, "options");
  CHECK_STR(json_string_value(json_array_get(o0, 0)), "ro");
  CHECK(json_array_size(o0) == 5 && json_array_size(o1) == 4);
  for (size_t i = 0; i < json_array_size(o1); i++)
    CHECK(strcmp(json_string_value(json_array_get(o1, i)), "ro") != 0);
  CHECK_STR(json_string_value(json_array_get(o1, 2)), "rbind");
  json_decref(s);

  /* Top-level edits, and a device with only env: empty lists are left out. */
  struct cdi_edits common = {NULL, 0, NULL, 0, dev1, 1};
  struct cdi_device d2 = {"claim-1", {env1, 1, NULL, 0, NULL, 0}};
  CHECK_EQ_INT(cdi_spec_write(dir, "two", NODE_CDI_KIND_CLAIM, &d2, 1, &common, err, sizeof(err)),
               0);
  s = read_spec("two");
  json_t *ce = json_object_get(s, "containerEdits");
  static const char *const only_dn[] = {"deviceNodes"};
  static const char *const only_env[] = {"env"};
  CHECK(ce && only_keys(ce, only_dn, 1));
  CHECK(
      only_keys(json_object_get(json_array_get(json_object_get(s, "devices"), 0), "containerEdits"),
                only_env, 1));
  json_decref(s);
}

/* The lowest cdiVersion the fields need: a digit first in a device name is 0.5.0, a '.' in the
 * class 0.6.0 (specs-go/version.go); everything else is 0.3.0. */
static void test_version(void) {
  char dir[256], err[512];
  snprintf(dir, sizeof(dir), "%s/cdi", tmp);
  struct cdi_device a[2] = {{"abc", {env1, 1, NULL, 0, NULL, 0}},
                            {"0abc", {env1, 1, NULL, 0, NULL, 0}}};
  const struct {
    const char *kind;
    size_t ndevs;
    const char *version;
  } cases[] = {{"gslice.io/claim", 1, "0.3.0"},
               {"gslice.io/claim", 2, "0.5.0"},
               {"gslice.io/claim.v2", 1, "0.6.0"},
               {"gslice.io/claim.v2", 2, "0.6.0"}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    CHECK_EQ_INT(
        cdi_spec_write(dir, "ver", cases[i].kind, a, cases[i].ndevs, NULL, err, sizeof(err)), 0);
    json_t *s = read_spec("ver");
    CHECK_STR(json_string_value(json_object_get(s, "cdiVersion")), cases[i].version);
    json_decref(s);
  }
}

/* What CDI would refuse is refused before anything is written, and says what was wrong. */
static void test_refused(void) {
  char dir[256], err[512], path[300];
  snprintf(dir, sizeof(dir), "%s/never", tmp);
  struct cdi_device ok = {"abc", {env1, 1, NULL, 0, NULL, 0}};
  struct cdi_device bad_name = {"a/b", {env1, 1, NULL, 0, NULL, 0}};
  struct cdi_device empty = {"abc", {NULL, 0, NULL, 0, NULL, 0}};
  const char *const bad_env[] = {"=x"}, *const no_eq[] = {"X"}, *const not_utf8[] = {"A=\xff"};
  const char *const rel_dev[] = {"dev/nvidia0"};
  const struct cdi_mount rel_mnt[] = {{"host", "/ctr", true}};
  struct cdi_device twice[2] = {ok, ok};
  struct cdi_device edits_bad[] = {{"abc", {bad_env, 1, NULL, 0, NULL, 0}},
                                   {"abc", {no_eq, 1, NULL, 0, NULL, 0}},
                                   {"abc", {not_utf8, 1, NULL, 0, NULL, 0}},
                                   {"abc", {NULL, 0, NULL, 0, rel_dev, 1}},
                                   {"abc", {NULL, 0, rel_mnt, 1, NULL, 0}}};

  CHECK_EQ_INT(cdi_spec_write(dir, "x", "gslice.io", &ok, 1, NULL, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "vendor/class") != NULL);
  CHECK_EQ_INT(cdi_spec_write(dir, "x", NODE_CDI_KIND_SLOT, &bad_name, 1, NULL, err, sizeof(err)),
               -EINVAL);
  CHECK(strstr(err, "a/b") != NULL);
  CHECK_EQ_INT(cdi_spec_write(dir, "x", NODE_CDI_KIND_SLOT, &empty, 1, NULL, err, sizeof(err)),
               -EINVAL);
  CHECK(strstr(err, "no edits") != NULL);
  CHECK_EQ_INT(cdi_spec_write(dir, "x", NODE_CDI_KIND_SLOT, &ok, 0, NULL, err, sizeof(err)),
               -EINVAL);
  CHECK_EQ_INT(cdi_spec_write(dir, "x", NODE_CDI_KIND_SLOT, twice, 2, NULL, err, sizeof(err)),
               -EINVAL);
  CHECK(strstr(err, "twice") != NULL);
  for (size_t i = 0; i < sizeof(edits_bad) / sizeof(edits_bad[0]); i++)
    CHECK_EQ_INT(
        cdi_spec_write(dir, "x", NODE_CDI_KIND_SLOT, &edits_bad[i], 1, NULL, err, sizeof(err)),
        -EINVAL);
  const char *files_bad[] = {"", ".hidden", "a/b", "../x", "a b"};
  for (size_t i = 0; i < sizeof(files_bad) / sizeof(files_bad[0]); i++)
    CHECK_EQ_INT(
        cdi_spec_write(dir, files_bad[i], NODE_CDI_KIND_SLOT, &ok, 1, NULL, err, sizeof(err)),
        -EINVAL);
  CHECK_EQ_INT(
      cdi_spec_write("relative/dir", "x", NODE_CDI_KIND_SLOT, &ok, 1, NULL, err, sizeof(err)),
      -EINVAL);
  /* Nothing was written: not even the directory. */
  CHECK(access(dir, F_OK) < 0);
  snprintf(path, sizeof(path), "%s/no/such/parent", tmp);
  CHECK_EQ_INT(cdi_spec_write(path, "x", NODE_CDI_KIND_SLOT, &ok, 1, NULL, err, sizeof(err)),
               -ENOENT);
  CHECK(strstr(err, "parent") != NULL);
}

/* A write replaces the whole file; links are never followed; remove is idempotent. */
static void test_files(void) {
  char dir[256], err[512], path[300], link[300], victim[300];
  struct cdi_device a = {"abc", {env1, 1, NULL, 0, NULL, 0}};
  struct cdi_device b = {"abc", {env1, 2, NULL, 0, NULL, 0}};
  struct stat st;

  snprintf(dir, sizeof(dir), "%s/cdi", tmp);
  CHECK_EQ_INT(cdi_spec_write(dir, "r", NODE_CDI_KIND_SLOT, &a, 1, NULL, err, sizeof(err)), 0);
  snprintf(path, sizeof(path), "%s/r.json", dir);
  CHECK(stat(path, &st) == 0);
  ino_t before = st.st_ino;
  CHECK_EQ_INT(cdi_spec_write(dir, "r", NODE_CDI_KIND_SLOT, &b, 1, NULL, err, sizeof(err)), 0);
  /* Renamed over (a new inode), never rewritten in place: a reader sees old or new whole. */
  CHECK(stat(path, &st) == 0 && st.st_ino != before);
  json_t *s = read_spec("r");
  CHECK(json_array_size(json_object_get(
            json_object_get(json_array_get(json_object_get(s, "devices"), 0), "containerEdits"),
            "env")) == 2);
  json_decref(s);
  CHECK_EQ_INT(cdi_spec_remove(dir, "r", err, sizeof(err)), 0);
  CHECK(access(path, F_OK) < 0);
  CHECK_EQ_INT(cdi_spec_remove(dir, "r", err, sizeof(err)), 0);
  snprintf(path, sizeof(path), "%s/absent", tmp);
  CHECK_EQ_INT(cdi_spec_remove(path, "r", err, sizeof(err)), 0);
  CHECK_EQ_INT(cdi_spec_remove(dir, "../r", err, sizeof(err)), -EINVAL);

  /* A link as the spec's name: refused, its target untouched. */
  snprintf(victim, sizeof(victim), "%s/victim", tmp);
  FILE *f = fopen(victim, "w");
  fputs("keep", f);
  fclose(f);
  snprintf(link, sizeof(link), "%s/l.json", dir);
  CHECK(symlink(victim, link) == 0);
  CHECK_EQ_INT(cdi_spec_write(dir, "l", NODE_CDI_KIND_SLOT, &a, 1, NULL, err, sizeof(err)), -ELOOP);
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  CHECK(stat(victim, &st) == 0 && st.st_size == 4);
  /* A link as the directory: refused, nothing made where it points. */
  snprintf(link, sizeof(link), "%s/cdi-link", tmp);
  snprintf(path, sizeof(path), "%s/elsewhere", tmp);
  CHECK(mkdir(path, 0755) == 0 && symlink(path, link) == 0);
  CHECK_EQ_INT(cdi_spec_write(link, "x", NODE_CDI_KIND_SLOT, &a, 1, NULL, err, sizeof(err)),
               -ELOOP);
  CHECK(strstr(err, "link") != NULL);
  snprintf(path, sizeof(path), "%s/elsewhere/x.json", tmp);
  CHECK(access(path, F_OK) < 0);
  CHECK_EQ_INT(cdi_spec_remove(link, "x", err, sizeof(err)), -ELOOP);
  /* A directory anyone may write: refused. */
  snprintf(path, sizeof(path), "%s/open", tmp);
  CHECK(mkdir(path, 0777) == 0 && chmod(path, 0777) == 0);
  CHECK_EQ_INT(cdi_spec_write(path, "x", NODE_CDI_KIND_SLOT, &a, 1, NULL, err, sizeof(err)),
               -EPERM);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* The driver's information files (as /proc/driver/nvidia/gpus/<bus>/information has them). */
static void make_info(const char *info, const char *bus, const char *uuid, const char *minor) {
  char path[400], text[512];
  snprintf(path, sizeof(path), "%s/%s", info, bus);
  CHECK(mkdir(path, 0755) == 0);
  snprintf(path, sizeof(path), "%s/%s/information", info, bus);
  snprintf(text, sizeof(text),
           "Model: \t\t NVIDIA H200\nIRQ:   \t\t 123\nGPU UUID: \t %s\nVideo BIOS: \t "
           "96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nBus Location: \t %s\n"
           "Device Minor: \t %s\nGPU Excluded:\t No\n",
           uuid, bus, minor);
  write_file(path, text);
}

static void test_minor(void) {
  char info[300];
  unsigned m = 99;
  snprintf(info, sizeof(info), "%s/gpus", tmp);
  CHECK(mkdir(info, 0755) == 0);
  make_info(info, "0000:1b:00.0", "GPU-aaaa", "2");
  make_info(info, "0000:2c:00.0", "GPU-bbbb", "0");
  make_info(info, "0000:3d:00.0", "GPU-cccc", "7x");
  CHECK_EQ_INT(cdi_gpu_minor(info, "GPU-aaaa", &m), 0);
  CHECK_EQ_U64(m, 2);
  CHECK_EQ_INT(cdi_gpu_minor(info, "gpu-BBBB", &m), 0);
  CHECK_EQ_U64(m, 0);
  CHECK_EQ_INT(cdi_gpu_minor(info, "GPU-cccc", &m), -EBADMSG);
  CHECK_EQ_INT(cdi_gpu_minor(info, "GPU-dddd", &m), -ENOENT);
  CHECK_EQ_INT(cdi_gpu_minor("/nonexistent/gpus", "GPU-aaaa", &m), -ENOENT);
}

static void node_init(struct node *n) {
  memset(n, 0, sizeof(*n));
  snprintf(n->cfg.socket, sizeof(n->cfg.socket), "/run/gslice/gsliced.sock");
  snprintf(n->cfg.state_dir, sizeof(n->cfg.state_dir), "/var/lib/gslice-node");
  snprintf(n->cfg.hook, sizeof(n->cfg.hook), "/opt/gslice/libgslice.so");
  snprintf(n->cfg.nvidia_visible, sizeof(n->cfg.nvidia_visible), "all");
  n->ngpus = 2;
  n->gpus[0].index = 0;
  snprintf(n->gpus[0].uuid, sizeof(n->gpus[0].uuid), "GPU-bbbb");
  n->gpus[1].index = 1;
  snprintf(n->gpus[1].uuid, sizeof(n->gpus[1].uuid), "GPU-aaaa");
}

static bool has(const char *const *list, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(list[i], s))
      return true;
  return false;
}

static void test_slice_subset(struct node *n, const char *dev, const char *info);

/* The slice's edits: Allocate's mounts and environment, and the device nodes present. */
static void test_slice_edits(void) {
  static struct cdi_slice_storage st;
  static struct node n;
  struct cdi_edits e;
  char dev[300], info[300], path[400], err[512];
  uint32_t both[] = {0, 1};

  node_init(&n);
  snprintf(info, sizeof(info), "%s/gpus", tmp); /* test_minor's: GPU-bbbb minor 0, aaaa 2 */
  snprintf(dev, sizeof(dev), "%s/dev", tmp);
  CHECK(mkdir(dev, 0755) == 0);
  /* Character devices by another name (links to /dev/null: stat follows them). nvidia2 is
   * GPU-aaaa's; nvidia-uvm-tools is absent, nvidia0 is a plain file: neither is given. */
  const char *nodes[] = {"nvidiactl", "nvidia-uvm", "nvidia2"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(path, sizeof(path), "%s/%s", dev, nodes[i]);
    CHECK(symlink("/dev/null", path) == 0);
  }
  snprintf(path, sizeof(path), "%s/nvidia0", dev);
  write_file(path, "");

  CHECK_EQ_INT(cdi_slice_edits_at(&n, dev, info, "/sd", "/sd.region", "gpu0-1,gpu0-2", both, 2, &st,
                                  &e, err, sizeof(err)),
               0);
  CHECK_EQ_U64(e.nmounts, 5);
  const struct {
    const char *host, *ctr;
    bool ro;
  } want[] = {{"/opt/gslice/libgslice.so", NODE_CTR_HOOK, true},
              {"/var/lib/gslice-node/ld.so.preload", NODE_CTR_PRELOAD, true},
              {"/run/gslice/hook", NODE_CTR_DAEMON_DIR, true},
              {"/sd", NODE_CTR_SLICE_DIR, true},
              {"/sd.region", NODE_CTR_REGION, false}};
  for (size_t i = 0; i < 5 && i < e.nmounts; i++) {
    CHECK_STR(e.mounts[i].host, want[i].host);
    CHECK_STR(e.mounts[i].ctr, want[i].ctr);
    CHECK(e.mounts[i].ro == want[i].ro);
  }
  CHECK_EQ_U64(e.nenv, 6);
  CHECK(has(e.env, e.nenv, "GSLICE_K8S_SLOTS=gpu0-1,gpu0-2"));
  CHECK(has(e.env, e.nenv, "GSLICE_K8S_DIR=/run/gslice/slice"));
  CHECK(has(e.env, e.nenv, "GSLICE_STATE_DIR=/run/gslice/slice"));
  CHECK(has(e.env, e.nenv, "GSLICE_SOCKET=/run/gslice/daemon/gsliced.sock"));
  CHECK(has(e.env, e.nenv, "NVIDIA_VISIBLE_DEVICES=all"));
  CHECK(has(e.env, e.nenv, "NVIDIA_DRIVER_CAPABILITIES=compute,utility"));
  CHECK_EQ_U64(e.ndev, 3);
  CHECK(has(e.dev_nodes, e.ndev, "/dev/nvidiactl"));
  CHECK(has(e.dev_nodes, e.ndev, "/dev/nvidia-uvm"));
  CHECK(has(e.dev_nodes, e.ndev, "/dev/nvidia2"));

  test_slice_subset(&n, dev, info);
}

/* A subset of the GPUs, other flags, missing driver information, unknown GPUs. */
static void test_slice_subset(struct node *n, const char *dev, const char *info) {
  static struct cdi_slice_storage st;
  struct cdi_edits e;
  char path[400], err[512];
  uint32_t both[] = {0, 1}, second[] = {1}, bogus[] = {5};

  /* A subset: NVIDIA_VISIBLE_DEVICES=all narrows to its UUIDs; the other GPU's node stays out. */
  CHECK_EQ_INT(cdi_slice_edits_at(n, dev, info, "/sd", "/sd.region", "claim-1", second, 1, &st, &e,
                                  err, sizeof(err)),
               0);
  CHECK(has(e.env, e.nenv, "NVIDIA_VISIBLE_DEVICES=GPU-aaaa"));
  CHECK(has(e.dev_nodes, e.ndev, "/dev/nvidia2"));
  /* The edits make a spec CDI takes. */
  struct cdi_device d = {"claim-1", e};
  snprintf(path, sizeof(path), "%s/cdi", tmp);
  CHECK_EQ_INT(cdi_spec_write(path, "slice", NODE_CDI_KIND_CLAIM, &d, 1, NULL, err, sizeof(err)),
               0);

  /* --nvidia-visible-devices "": no NVIDIA_* at all. */
  n->cfg.nvidia_visible[0] = 0;
  CHECK_EQ_INT(cdi_slice_edits_at(n, dev, info, "/sd", "/sd.region", "s", second, 1, &st, &e, err,
                                  sizeof(err)),
               0);
  CHECK_EQ_U64(e.nenv, 4);
  /* No driver information at all (the simulated GPU): no GPU node, no error. */
  CHECK_EQ_INT(cdi_slice_edits_at(n, dev, "/nonexistent", "/sd", "/sd.region", "s", both, 2, &st,
                                  &e, err, sizeof(err)),
               0);
  CHECK_EQ_U64(e.ndev, 2);
  /* A GPU the driver does not list, or gsliced does not have: refused. */
  snprintf(n->gpus[1].uuid, sizeof(n->gpus[1].uuid), "GPU-eeee");
  CHECK_EQ_INT(cdi_slice_edits_at(n, dev, info, "/sd", "/sd.region", "s", second, 1, &st, &e, err,
                                  sizeof(err)),
               -ENODEV);
  CHECK(strstr(err, "GPU-eeee") != NULL);
  CHECK_EQ_INT(cdi_slice_edits_at(n, dev, info, "/sd", "/sd.region", NULL, second, 1, &st, &e, err,
                                  sizeof(err)),
               -EINVAL);
  CHECK_EQ_INT(cdi_slice_edits_at(n, dev, info, "/sd", "/sd.region", "s", bogus, 1, &st, &e, err,
                                  sizeof(err)),
               -ENODEV);
}

/* --allocate-cdi's spec of a slot key: its name, and its removal when the slots are free (not
 * for a superseded record, whose key's spec is the new container's; nothing without the flag). */
static void test_slot_drop(void) {
  static struct node n;
  struct node_rec r;
  struct cdi_device d = {"gpu1-2", {env1, 1, NULL, 0, NULL, 0}};
  char file[64], path[PATH_MAX + 80], err[512];

  node_init(&n);
  snprintf(n.cfg.cdi_dir, sizeof(n.cfg.cdi_dir), "%s/slots", tmp);
  CHECK_EQ_INT(cdi_slot_file("gpu1-2", file, sizeof(file)), 0);
  CHECK_STR(file, "gslice.io-slot_gpu1-2");
  CHECK_EQ_INT(cdi_slot_file("gpu1-2", file, 8), -ENAMETOOLONG);
  CHECK_EQ_INT(cdi_slot_file("gpu1-2", file, sizeof(file)), 0);
  CHECK_EQ_INT(
      cdi_spec_write(n.cfg.cdi_dir, file, NODE_CDI_KIND_SLOT, &d, 1, NULL, err, sizeof(err)), 0);
  snprintf(path, sizeof(path), "%s/%s.json", n.cfg.cdi_dir, file);
  memset(&r, 0, sizeof(r));
  snprintf(r.key, sizeof(r.key), "gpu1-2");
  snprintf(r.slots, sizeof(r.slots), "gpu1-2");
  cdi_slot_spec_drop(&n, &r); /* no --allocate-cdi */
  CHECK(access(path, F_OK) == 0);
  n.cfg.allocate_cdi = true;
  r.superseded = true;
  cdi_slot_spec_drop(&n, &r);
  CHECK(access(path, F_OK) == 0);
  r.superseded = false;
  cdi_slot_spec_drop(&n, &r);
  CHECK(access(path, F_OK) < 0);
  cdi_slot_spec_drop(&n, &r); /* gone already: nothing to say */
}

int main(void) {
  if (!mkdtemp(tmp)) {
    perror("mkdtemp");
    return 1;
  }
  test_names();
  test_shape();
  test_version();
  test_refused();
  test_files();
  test_minor();
  test_slice_edits();
  test_slot_drop();
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", tmp);
  return test_done();
}
