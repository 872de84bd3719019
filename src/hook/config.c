/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's configuration: GSLICE_MEMORY_LIMIT and GSLICE_STATE_DIR, parsed once, strictly. */
#include "hook.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv.h"
#include "size.h"
#include "words.h"

static void say_malformed_item(const char *text, const char *item, char *err, size_t err_len) {
  snprintf(err, err_len,
           "GSLICE_MEMORY_LIMIT=\"%s\" is malformed at \"%s\": want INDEX=SIZE items like "
           "0=4GiB,1=2GiB (index 0-%d, each once, size 1B.." GS_SIZE_MAX_TEXT
           ", no spaces), or one size for every device",
           text, item, GS_CONFIG_MAX_ORDINALS - 1);
}

struct cap_list {
  const char *text; /* GSLICE_MEMORY_LIMIT as given, for messages */
  struct gs_config *c;
  unsigned items; /* items taken so far */
};

static int cap_item(const char *key, const char *value, unsigned line, void *user, char *err,
                    size_t err_len) {
  struct cap_list *l = user;
  uint64_t idx, v;

  if (gs_uint_parse(key, 0, GS_CONFIG_MAX_ORDINALS - 1, &idx) < 0 || gs_size_parse(value, &v) < 0 ||
      v == 0 || (l->c->cap_set >> idx & 1)) {
    char item[256];
    snprintf(item, sizeof(item), "%s=%s", key, value);
    say_malformed_item(l->text, item, err, err_len);
    return -EINVAL;
  }
  l->c->cap_set |= 1ull << idx;
  l->c->cap[idx] = v;
  l->items = line;
  return 0;
}

/* "0=4GiB,1=2GiB": each item INDEX=SIZE, none empty (",," or a trailing ',' is malformed). */
static int parse_cap_list(const char *text, struct gs_config *c, char *err, size_t err_len) {
  struct cap_list l = {text, c, 0};
  char buf[1024];
  size_t n = strlen(text);

  if (n >= sizeof(buf)) {
    snprintf(err, err_len, "GSLICE_MEMORY_LIMIT is too long (%zu characters)", n);
    return -EINVAL;
  }
  if (text[n - 1] == ',') {
    say_malformed_item(text, "", err, err_len);
    return -EINVAL;
  }
  memcpy(buf, text, n + 1);
  int r = gs_kv_parse(buf, ',', 0, cap_item, &l, err, err_len);
  if (r == -EBADMSG) {
    /* Not KEY=VALUE: the item after the last one taken, as the user wrote it. */
    const char *item = text;
    for (unsigned k = 0; k < l.items; k++)
      item = strchr(item, ',') + 1;
    snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(item, ","), item);
    say_malformed_item(text, buf, err, err_len);
  }
  return r < 0 ? -EINVAL : 0;
}

static int parse_cap(const char *text, struct gs_config *c, char *err, size_t err_len) {
  if (strchr(text, '='))
    return parse_cap_list(text, c, err, err_len);
  uint64_t v;
  int e = gs_size_parse(text, &v);
  if (e == -ERANGE) {
    snprintf(err, err_len,
             "GSLICE_MEMORY_LIMIT=\"%s\" is out of range: at most " GS_SIZE_MAX_TEXT
             " (unset it for no cap)",
             text);
    return -EINVAL;
  }
  if (e < 0 || v == 0) {
    snprintf(err, err_len,
             "GSLICE_MEMORY_LIMIT=\"%s\" is malformed: want a size > 0 like 4GiB, or per device "
             "index like 0=4GiB,1=2GiB, no spaces (unset it for no cap)",
             text);
    return -EINVAL;
  }
  c->has_cap_all = 1;
  c->cap_all = v;
  return 0;
}

int gs_config_parse(char *(*env)(const char *), struct gs_config *ret_config, char *err,
                    size_t err_len) {
  struct gs_config c;
  memset(&c, 0, sizeof(c));
  const char *limit = env("GSLICE_MEMORY_LIMIT");
  if (limit && parse_cap(limit, &c, err, err_len) < 0)
    return -EINVAL;
  const char *dir = env("GSLICE_STATE_DIR");
  if (dir) {
    if (dir[0] != '/' || strlen(dir) >= sizeof(c.state_dir) - 64) {
      snprintf(err, err_len,
               "GSLICE_STATE_DIR=\"%s\" is malformed: want an absolute directory path", dir);
      return -EINVAL;
    }
    snprintf(c.state_dir, sizeof(c.state_dir), "%s", dir);
  } else {
    const char *tmp = env("TMPDIR");
    if (!tmp || tmp[0] != '/' || strlen(tmp) >= sizeof(c.state_dir) - 64)
      tmp = "/tmp";
    snprintf(c.state_dir, sizeof(c.state_dir), "%s/gslice-%u", tmp, (unsigned)getuid());
    c.state_dir_default = 1;
  }
  *ret_config = c;
  return 0;
}

int gs_config_cap(const struct gs_config *config, int ordinal, uint64_t *ret_cap) {
  if (ordinal >= 0 && ordinal < GS_CONFIG_MAX_ORDINALS && (config->cap_set >> ordinal & 1)) {
    *ret_cap = config->cap[ordinal];
    return 1;
  }
  if (config->has_cap_all) {
    *ret_cap = config->cap_all;
    return 1;
  }
  return 0;
}
