/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's configuration: GSLICE_MEMORY_LIMIT and GSLICE_STATE_DIR, parsed once, strictly. */
#include "hook.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "size.h"

static int parse_cap(const char *text, struct gs_config *c, char *err, size_t err_len) {
  if (!strchr(text, '=')) {
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
  char buf[1024];
  if (strlen(text) >= sizeof(buf)) {
    snprintf(err, err_len, "GSLICE_MEMORY_LIMIT is too long (%zu characters)", strlen(text));
    return -EINVAL;
  }
  strcpy(buf, text);
  /* strsep, not strtok: an empty item ("0=1GiB,,1=2GiB", a trailing comma) is malformed. */
  char *rest = buf;
  for (char *item = strsep(&rest, ","); item; item = strsep(&rest, ",")) {
    char *eq = strchr(item, '=');
    char *end = NULL;
    uint64_t v;
    errno = 0;
    /* strtol alone would take " 1" and "+1": spaces are refused on both sides, as in sizes. */
    long idx = eq && item[0] >= '0' && item[0] <= '9' ? strtol(item, &end, 10) : -1;
    if (!eq || end != eq || errno || idx < 0 || idx >= GS_CONFIG_MAX_ORDINALS ||
        gs_size_parse(eq + 1, &v) < 0 || v == 0 || (c->cap_set >> idx & 1)) {
      snprintf(err, err_len,
               "GSLICE_MEMORY_LIMIT=\"%s\" is malformed at \"%s\": want INDEX=SIZE items like "
               "0=4GiB,1=2GiB (index 0-%d, each once, size 1B.." GS_SIZE_MAX_TEXT
               ", no spaces), or one size for every device",
               text, item, GS_CONFIG_MAX_ORDINALS - 1);
      return -EINVAL;
    }
    c->cap_set |= 1ull << idx;
    c->cap[idx] = v;
  }
  if (!c->cap_set) {
    snprintf(err, err_len, "GSLICE_MEMORY_LIMIT=\"%s\" is malformed: no INDEX=SIZE item", text);
    return -EINVAL;
  }
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
