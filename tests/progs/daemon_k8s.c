/* SPDX-License-Identifier: Apache-2.0 */
/* Stand-ins for what reaches gsliced in a Kubernetes node: gslice-node registering a container's
 * slice with per-GPU requests and caps (REGISTER flags, protocol 8), and whatever a container's
 * process says on the socket it is given (a hook's HELLO, or requests a hook never sends). One
 * request per run; prints what the daemon answered, one line, for the test to check:
 *   daemon_k8s register SOCK NAME MASK LIMIT REQ,REQ.. MEM,MEM.. FLAGS
 *       -> "id=N nonce=HEX dir=PATH" (per-GPU values in index order of MASK)
 *   daemon_k8s hello SOCK ROLE ID NONCE           -> "ok" or "refused CODE TEXT"
 *   daemon_k8s ask SOCK register|set|unregister|status [ID]
 *       -> "ok" or "refused CODE TEXT" (HELLO as CLI first; its refusal is printed as such)
 *   daemon_k8s raw SOCK register|set|unregister|status -> the same, without a HELLO
 *   daemon_k8s hooked SOCK register|set|unregister|status ID NONCE -> the same, after a HELLO as
 *       the hook of slice ID (a container's process that read its slice.env)
 *   daemon_k8s guess SOCK ROLE ID NONCE... -> HELLOs on one connection, one NONCE each, until one
 *       is taken or the connection ends: "refused CODE", "ok" or "closed CODE" per HELLO, one line
 *   daemon_k8s fill SOCK ID NONCE UIDS N HOLD_S -> one container's processes filling the hook
 *       socket: for each uid of UIDS (comma-separated; a child each, set to that uid when run as
 *       root), up to N connections, each a HELLO as slice ID's hook (ID 0: no HELLO, counted as
 *       held unless the daemon closed or answered it by the time it answers a later probe),
 *       until one is refused.
 *       Prints "uid U: held K [refused CODE TEXT]" per uid, then "filled", and holds them HOLD_S
 *       seconds
 * Exit status 0 whenever the daemon answered. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

static void split(const char *list, uint32_t mask, int memory, struct gs_slice_spec *spec) {
  const char *p = list;

  for (uint32_t g = 0; g < GS_MAX_GPUS && *p; g++) {
    char *end;
    if (!(mask & (1u << g)))
      continue;
    unsigned long long v = strtoull(p, &end, 10);
    if (memory)
      spec->gpu_memory_cap[g] = v;
    else
      spec->gpu_compute_request[g] = (uint32_t)v;
    p = *end == ',' ? end + 1 : end;
  }
}

static int said(int r, const char *err) {
  if (r == 0)
    printf("ok\n");
  else
    printf("refused %d %s\n", r, err);
  return 0;
}

/* One request of `what` after (or without) a HELLO: the answer, or how the connection ended. */
static int ask(const char *sock, const char *what, uint32_t id, uint64_t nonce, int hello) {
  char err[GS_PROTO_TEXT_MAX] = "";
  uint64_t buf[1024];
  struct gs_msg m;
  int fd, r = gs_client_connect(sock, &fd);

  if (r < 0) {
    printf("connect %d\n", r);
    return 1;
  }
  if (hello &&
      (r = gs_client_hello_slice(fd, hello == 2 ? GS_ROLE_HOOK : GS_ROLE_CLI, hello == 2 ? id : 0,
                                 nonce, NULL, err, sizeof(err))) < 0) {
    printf("hello ");
    return said(r, err);
  }
  if (!strcmp(what, "register")) {
    struct gs_msg_register reg = {.runner_pid = (int32_t)getpid()};
    reg.spec.compute_limit = 10;
    reg.spec.weight = 1;
    snprintf(reg.spec.name, sizeof(reg.spec.name), "forged");
    r = gs_client_send(fd, GS_MSG_REGISTER, 1, &reg, sizeof(reg));
  } else if (!strcmp(what, "set")) {
    struct gs_msg_set st = {.slice_id = id ? id : 1, .fields = GS_SET_REQUEST};
    st.spec.compute_request = 90;
    r = gs_client_send(fd, GS_MSG_SET, 1, &st, sizeof(st));
  } else if (!strcmp(what, "unregister")) {
    struct gs_msg_unregister u = {.slice_id = id ? id : 1};
    r = gs_client_send(fd, GS_MSG_UNREGISTER, 1, &u, sizeof(u));
  } else {
    struct gs_msg_status q = {0};
    r = gs_client_send(fd, GS_MSG_STATUS, 1, &q, sizeof(q));
  }
  if (r == 0)
    r = gs_client_recv(fd, buf, sizeof(buf), 5000, &m);
  if (r < 0) {
    printf("closed %d\n", r);
    return 0;
  }
  if (m.hdr.type == GS_MSG_ERROR)
    return said(m.u.error.code, m.u.error.text);
  printf("ok %s\n", gs_msg_type_name(m.hdr.type));
  return 0;
}

/* One uid's part of `fill`: its connections held in fds (N at most); prints what it held. */
static int fill_as(const char *sock, uint32_t id, uint64_t nonce, int n, int *fds) {
  char err[GS_PROTO_TEXT_MAX] = "";
  int held = 0, r = 0;

  for (; held < n; held++) {
    if ((r = gs_client_connect(sock, &fds[held])) < 0)
      break;
    if (id && (r = gs_client_hello_slice(fds[held], GS_ROLE_HOOK, id, nonce, NULL, err,
                                         sizeof(err))) < 0) {
      close(fds[held]);
      break;
    }
  }
  if (!id) {
    /* Refused at accept: an ERROR, then the end; held: silent. A probe's answer (its HELLO
     * names no slice, or it is refused at accept) says the daemon took every connection before
     * it off the socket's queue: the refusals are in by then. */
    int probe, k = 0;
    if (gs_client_connect(sock, &probe) == 0) {
      gs_client_hello_slice(probe, GS_ROLE_HOOK, 0, 0, NULL, NULL, 0);
      close(probe);
    }
    for (int i = 0; i < held; i++) {
      struct pollfd p = {.fd = fds[i], .events = POLLIN};
      if (poll(&p, 1, 0) == 0)
        fds[k++] = fds[i];
      else
        close(fds[i]);
    }
    held = k;
  }
  printf("uid %u: held %d", (unsigned)getuid(), held);
  if (r < 0)
    printf(" refused %d %s", r, err);
  printf("\n");
  fflush(stdout);
  return held;
}

static int fill(const char *sock, uint32_t id, uint64_t nonce, const char *uids, int n, int hold) {
  int *fds = calloc((size_t)n, sizeof(int)), ready[2], children = 0;
  char c;

  if (!fds || pipe(ready) < 0)
    return 1;
  for (const char *p = uids; *p;) {
    char *end;
    uid_t uid = (uid_t)strtoul(p, &end, 10);
    pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      if (geteuid() == 0 && uid != 0 &&
          (setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0))
        _exit(1);
      fill_as(sock, id, nonce, n, fds);
      if (write(ready[1], "x", 1) != 1)
        _exit(1);
      sleep((unsigned)hold);
      _exit(0);
    }
    if (pid < 0)
      return 1;
    /* One uid after the other: each child's count is its own. */
    if (read(ready[0], &c, 1) != 1)
      return 1;
    children++;
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != ',')
      break;
  }
  printf("filled\n");
  fflush(stdout);
  while (children-- > 0)
    wait(NULL);
  free(fds);
  return 0;
}

int main(int argc, char **argv) {
  char err[GS_PROTO_TEXT_MAX] = "";
  int fd, r;

  if (argc < 3) {
    fprintf(stderr, "usage: see the head of tests/progs/daemon_k8s.c\n");
    return 2;
  }
  if (!strcmp(argv[1], "register") && argc == 9) {
    struct gs_slice_spec spec = {.weight = 1};
    struct gs_msg_registered reg;
    snprintf(spec.name, sizeof(spec.name), "%s", argv[3]);
    spec.gpu_mask = (uint32_t)strtoul(argv[4], NULL, 0);
    spec.compute_limit = (uint32_t)strtoul(argv[5], NULL, 10);
    spec.per_gpu = GS_SPEC_GPU_REQUEST | GS_SPEC_GPU_MEMORY;
    split(argv[6], spec.gpu_mask, 0, &spec);
    split(argv[7], spec.gpu_mask, 1, &spec);
    if ((r = gs_client_connect(argv[2], &fd)) < 0 ||
        (r = gs_client_hello_err(fd, GS_ROLE_CLI, 0, NULL, err, sizeof(err))) < 0 ||
        (r = gs_client_register_flags(fd, &spec, (uint32_t)strtoul(argv[8], NULL, 0), &reg, err,
                                      sizeof(err))) < 0) {
      printf("refused %d %s\n", r, err);
      return 1;
    }
    printf("id=%" PRIu32 " nonce=%016" PRIx64 " dir=%s\n", reg.slice_id, reg.slice_nonce,
           reg.state_dir);
    return 0;
  }
  if (!strcmp(argv[1], "hello") && argc == 6) {
    uint32_t role = !strcmp(argv[3], "hook") ? GS_ROLE_HOOK : GS_ROLE_CLI;
    if ((r = gs_client_connect(argv[2], &fd)) < 0) {
      printf("connect %d\n", r);
      return 1;
    }
    r = gs_client_hello_slice(fd, role, (uint32_t)strtoul(argv[4], NULL, 10),
                              strtoull(argv[5], NULL, 16), NULL, err, sizeof(err));
    return said(r, err);
  }
  if (!strcmp(argv[1], "guess") && argc >= 6) {
    uint32_t role = !strcmp(argv[3], "hook") ? GS_ROLE_HOOK : GS_ROLE_CLI;
    if ((r = gs_client_connect(argv[2], &fd)) < 0) {
      printf("connect %d\n", r);
      return 1;
    }
    /* A refused HELLO is an ERROR; a closed connection is a failed send or receive. */
    for (int i = 5; i < argc; i++) {
      r = gs_client_hello_slice(fd, role, (uint32_t)strtoul(argv[4], NULL, 10),
                                strtoull(argv[i], NULL, 16), NULL, err, sizeof(err));
      if (r == 0 || !err[0]) {
        printf("%s%s", i > 5 ? " " : "", r == 0 ? "ok" : "closed");
        if (r < 0)
          printf(" %d", r);
        break;
      }
      printf("%srefused %d", i > 5 ? " " : "", r);
      err[0] = 0;
    }
    printf("\n");
    return 0;
  }
  if (!strcmp(argv[1], "fill") && argc == 8)
    return fill(argv[2], (uint32_t)strtoul(argv[3], NULL, 10), strtoull(argv[4], NULL, 16), argv[5],
                atoi(argv[6]), atoi(argv[7]));
  if ((!strcmp(argv[1], "ask") || !strcmp(argv[1], "raw")) && argc >= 4)
    return ask(argv[2], argv[3], argc > 4 ? (uint32_t)strtoul(argv[4], NULL, 10) : 0, 0,
               !strcmp(argv[1], "ask"));
  if (!strcmp(argv[1], "hooked") && argc == 6)
    return ask(argv[2], argv[3], (uint32_t)strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 16),
               2);
  fprintf(stderr, "usage: see the head of tests/progs/daemon_k8s.c\n");
  return 2;
}
