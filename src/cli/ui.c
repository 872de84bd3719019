/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon calls status, top and set share: one connection per call, errors as sentences. */
#include "ui.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "words.h"

/* A connected, greeted CLI connection, or -errno with the reason in err. */
static int ui_connect(int *ret_fd, char *err, size_t errlen) {
  const char *path = gs_client_socket_path();
  int fd, r = gs_client_connect(path, &fd);
  if (r < 0) {
    if (r == -ENOENT || r == -ECONNREFUSED)
      snprintf(err, errlen,
               "cannot reach gsliced at %s: %s. Start it (gsliced), or point "
               "GSLICE_SOCKET at its socket.",
               path, strerror(-r));
    else
      snprintf(err, errlen, "cannot connect to gsliced at %s: %s", path, strerror(-r));
    return r;
  }
  struct gs_msg_hello_ok ok;
  char why[256] = "";
  r = gs_client_hello_err(fd, GS_ROLE_CLI, 0, &ok, why, sizeof(why));
  if (r < 0) {
    if (why[0])
      snprintf(err, errlen, "gsliced at %s refused us: %s", path, why);
    else if (r == -ETIMEDOUT)
      snprintf(err, errlen,
               "gsliced at %s did not answer within %d s; is it stopped (SIGSTOP) or hung? "
               "(kill -CONT it, or restart it)",
               path, GS_CLIENT_HELLO_TIMEOUT_MS / 1000);
    else if (r == -EPROTO)
      snprintf(err, errlen, "gsliced at %s did not accept us: %s (is it the same gslice version?)",
               path, strerror(-r));
    else
      snprintf(err, errlen, "gsliced at %s did not accept us: %s", path, strerror(-r));
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

int gs_ui_fetch_status(struct gs_status *ret, char *err, size_t errlen) {
  int fd, r = ui_connect(&fd, err, errlen);
  if (r < 0)
    return r;
  r = gs_client_status(fd, ret);
  close(fd);
  if (r < 0)
    snprintf(err, errlen, "gsliced did not answer STATUS: %s", strerror(-r));
  return r;
}

int gs_ui_set(const struct gs_msg_set *req, char *err, size_t errlen) {
  int fd, r = ui_connect(&fd, err, errlen);
  if (r < 0)
    return r;
  err[0] = 0;
  r = gs_client_set(fd, req->slice_id, req->fields, &req->spec, (int)req->force, err, errlen);
  close(fd);
  if (r < 0 && !err[0])
    snprintf(err, errlen, "%s", strerror(-r));
  return r;
}

int gs_ui_find_slice(const struct gs_status *st, const char *which, char *err, size_t errlen) {
  int found = -1, count = 0;
  for (uint32_t i = 0; i < st->nslices; i++) {
    if (strncmp(st->slices[i].name, which, GS_NAME_MAX) == 0) {
      if (found < 0)
        found = (int)i;
      count++;
    }
  }
  if (count == 1)
    return found;
  if (count > 1) {
    int n = snprintf(err, errlen, "%d slices are named '%s': give the id instead (", count, which);
    for (uint32_t i = 0; i < st->nslices && n > 0 && (size_t)n < errlen; i++)
      if (strncmp(st->slices[i].name, which, GS_NAME_MAX) == 0)
        n += snprintf(err + n, errlen - (size_t)n, "%s%" PRIu32, n && err[n - 1] == '(' ? "" : ", ",
                      st->slices[i].id);
    if (n > 0 && (size_t)n < errlen)
      snprintf(err + n, errlen - (size_t)n, ")");
    return -EEXIST;
  }
  /* Not a name: an id? */
  uint64_t id;
  if (gs_uint_parse(which, 1, UINT32_MAX, &id) == 0) {
    for (uint32_t i = 0; i < st->nslices; i++)
      if (st->slices[i].id == id)
        return (int)i;
  }
  snprintf(err, errlen, "no slice named or numbered '%s' (gslice status lists %" PRIu32 " slice%s)",
           which, st->nslices, st->nslices == 1 ? "" : "s");
  return -ENOENT;
}
