/* SPDX-License-Identifier: Apache-2.0 */
/* The gRPC core C API, used directly: a completion queue per server, polled by the server's own
 * serving thread (every gRPC operation of the server happens there), a pool of worker threads
 * for the methods that may wait (each takes the oldest queued call; the handler runs there,
 * never a gRPC operation), and a pluck queue per client call. The API is batch based: each step of
 * a call is a batch of operations whose completion comes back on the queue with the tag given. */
#include "rpc.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void rpc_global_init(void) {
  grpc_init();
}

static gpr_timespec deadline_ms(int ms) {
  return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static int buf_to_bytes(grpc_byte_buffer *bb, uint8_t **ret, size_t *ret_len) {
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb))
    return -EPROTO;
  grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  size_t n = GRPC_SLICE_LENGTH(all);
  uint8_t *p = malloc(n ? n : 1);
  if (!p) {
    grpc_slice_unref(all);
    return -ENOMEM;
  }
  memcpy(p, GRPC_SLICE_START_PTR(all), n);
  grpc_slice_unref(all);
  *ret = p;
  *ret_len = n;
  return 0;
}

static grpc_byte_buffer *bytes_to_buf(const uint8_t *p, size_t n) {
  grpc_slice s = grpc_slice_from_copied_buffer((const char *)p, n);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

int rpc_call(const char *target, const char *method, const uint8_t *req, size_t req_len,
             int timeout_ms, uint8_t **ret_reply, size_t *ret_len, char *err, size_t err_len) {
  grpc_channel_credentials *cred = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(target, cred, NULL);
  grpc_channel_credentials_release(cred);
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  grpc_slice m = grpc_slice_from_copied_string(method);
  gpr_timespec dl = deadline_ms(timeout_ms);
  grpc_call *call =
      grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, dl, NULL);
  grpc_metadata_array init_md, trail_md;
  grpc_byte_buffer *send = bytes_to_buf(req, req_len), *recv = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  int r = 0;

  grpc_metadata_array_init(&init_md);
  grpc_metadata_array_init(&trail_md);
  memset(ops, 0, sizeof(ops));
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trail_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
    snprintf(err, err_len, "%s: cannot start the call", method);
    r = -EIO;
    goto out;
  }
  grpc_event ev =
      grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
    snprintf(err, err_len, "%s: the call did not complete", method);
    r = -EIO;
    goto out;
  }
  if (status != GRPC_STATUS_OK) {
    char *text = grpc_slice_to_c_string(details);
    snprintf(err, err_len, "%s on %s: status %d: %s", method, target, (int)status, text);
    gpr_free(text);
    r = status == GRPC_STATUS_DEADLINE_EXCEEDED ? -ETIMEDOUT
        : status == GRPC_STATUS_UNAVAILABLE     ? -ECONNREFUSED
                                                : -EPROTO;
    goto out;
  }
  if (!recv) {
    snprintf(err, err_len, "%s: no reply message", method);
    r = -EPROTO;
    goto out;
  }
  r = buf_to_bytes(recv, ret_reply, ret_len);
  if (r < 0)
    snprintf(err, err_len, "%s: unreadable reply", method);
out:
  if (recv)
    grpc_byte_buffer_destroy(recv);
  grpc_byte_buffer_destroy(send);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&init_md);
  grpc_metadata_array_destroy(&trail_md);
  grpc_call_unref(call);
  grpc_slice_unref(m);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(cq);
  grpc_channel_destroy(ch);
  return r;
}

/* ---- server ---- */

enum tag_kind { TAG_NEW, TAG_RECV, TAG_DONE, TAG_SEND, TAG_CLOSE };

struct call;
struct tag {
  struct call *c;
  enum tag_kind kind;
};

struct call {
  struct rpc_server *srv;
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array md;
  grpc_byte_buffer *recv;
  grpc_byte_buffer *send;
  grpc_slice status_text;
  int cancelled;
  int pending; /* batches started and not completed: the call is freed at 0 */
  bool stream, sending, closed;
  uint64_t sent_gen; /* the published generation this stream has sent */
  struct tag t_new, t_recv, t_done, t_send, t_close;
  struct call *next; /* open streams */
};

/* Calls of the workers' methods queued or running at once, at most. */
#define RPC_WORKER_QUEUE_MAX 64

/* A call of the worker's method: the request in, the answer out. */
struct job {
  struct call *c;
  char *method;
  uint8_t *req, *reply;
  size_t len, reply_len;
  int status;
  char err[512];
  struct job *next;
};

struct rpc_server {
  grpc_server *server;
  grpc_completion_queue *cq;
  char stream_methods[RPC_MAX_METHODS][128];
  char worker_methods[RPC_MAX_METHODS][128];
  rpc_unary_fn unary;
  void *ctx;
  /* the serving thread's (then rpc_server_stop's) */
  uint8_t *msg;
  size_t msg_len;
  uint64_t gen;
  struct call *streams;
  unsigned jobs_out; /* handed to the workers, not answered yet */
  bool stopping;
  pthread_t serve_thread, work_threads[RPC_MAX_WORKERS];
  unsigned nworkers; /* started */
  bool threads;
  atomic_int quit;
  /* under mu: the workers' queue and answers, what rpc_server_publish set */
  pthread_mutex_t mu;
  pthread_cond_t work;
  struct job *queue, **queue_tail, *done;
  bool work_quit;
  uint8_t *pub;
  size_t pub_len;
  uint64_t pub_gen;
};

static void call_free(struct call *c) {
  if (c->call)
    grpc_call_unref(c->call);
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->md);
  if (c->recv)
    grpc_byte_buffer_destroy(c->recv);
  if (c->send)
    grpc_byte_buffer_destroy(c->send);
  grpc_slice_unref(c->status_text);
  free(c);
}

static void call_put(struct call *c) {
  if (--c->pending > 0)
    return;
  if (c->stream) {
    struct rpc_server *s = c->srv;
    for (struct call **pp = &s->streams; *pp; pp = &(*pp)->next)
      if (*pp == c) {
        *pp = c->next;
        break;
      }
  }
  call_free(c);
}

static int request_next(struct rpc_server *s) {
  struct call *c = calloc(1, sizeof(*c));
  if (!c)
    return -ENOMEM;
  c->srv = s;
  c->t_new = (struct tag){c, TAG_NEW};
  c->t_recv = (struct tag){c, TAG_RECV};
  c->t_done = (struct tag){c, TAG_DONE};
  c->t_send = (struct tag){c, TAG_SEND};
  c->t_close = (struct tag){c, TAG_CLOSE};
  c->status_text = grpc_empty_slice();
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->md);
  c->pending = 1;
  if (grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq, &c->t_new) !=
      GRPC_CALL_OK) {
    call_free(c);
    return -EIO;
  }
  return 0;
}

static void stream_flush(struct call *c) {
  struct rpc_server *s = c->srv;
  if (!c->stream || c->sending || c->closed || !s->msg || c->sent_gen == s->gen)
    return;
  if (c->send)
    grpc_byte_buffer_destroy(c->send);
  c->send = bytes_to_buf(s->msg, s->msg_len);
  grpc_op op;
  memset(&op, 0, sizeof(op));
  op.op = GRPC_OP_SEND_MESSAGE;
  op.data.send_message.send_message = c->send;
  c->pending++;
  if (grpc_call_start_batch(c->call, &op, 1, &c->t_send, NULL) != GRPC_CALL_OK) {
    c->pending--;
    return;
  }
  c->sending = true;
  c->sent_gen = s->gen;
}

static void finish_unary(struct call *c, int status, const uint8_t *reply, size_t len,
                         const char *text) {
  grpc_op ops[4];
  int n = 0;

  memset(ops, 0, sizeof(ops));
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (status == 0) {
    c->send = bytes_to_buf(reply, len);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = c->send;
  }
  grpc_slice_unref(c->status_text);
  c->status_text = grpc_slice_from_copied_string(text);
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = (grpc_status_code)status;
  ops[n++].data.send_status_from_server.status_details = &c->status_text;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
  c->pending++;
  if (grpc_call_start_batch(c->call, ops, (size_t)n, &c->t_done, NULL) != GRPC_CALL_OK)
    c->pending--;
}

static bool listed(const char (*names)[128], const char *method) {
  for (size_t i = 0; i < RPC_MAX_METHODS && names[i][0]; i++)
    if (!strcmp(names[i], method))
      return true;
  return false;
}

static void on_recv(struct call *c) {
  struct rpc_server *s = c->srv;
  char *method = grpc_slice_to_c_string(c->details.method);
  uint8_t *req = NULL, *reply = NULL;
  size_t len = 0, reply_len = 0;
  char err[512] = "";
  int st;

  if (!c->recv) {
    finish_unary(c, GRPC_STATUS_INVALID_ARGUMENT, NULL, 0, "no request message");
    goto out;
  }
  if (buf_to_bytes(c->recv, &req, &len) < 0) {
    finish_unary(c, GRPC_STATUS_INTERNAL, NULL, 0, "unreadable request");
    goto out;
  }
  if (listed(s->stream_methods, method)) {
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[1].data.recv_close_on_server.cancelled = &c->cancelled;
    c->pending++;
    if (grpc_call_start_batch(c->call, ops, 2, &c->t_close, NULL) != GRPC_CALL_OK) {
      c->pending--;
      goto out;
    }
    c->stream = true;
    c->next = s->streams;
    s->streams = c;
    stream_flush(c);
    goto out;
  }
  if (listed(s->worker_methods, method)) {
    /* The workers' queue is bounded: past it a call is told to come again. */
    struct job *j = s->jobs_out < RPC_WORKER_QUEUE_MAX ? calloc(1, sizeof(*j)) : NULL;
    if (!j) {
      finish_unary(c, GRPC_STATUS_UNAVAILABLE, NULL, 0,
                   "gslice-node is busy with earlier calls of this method: try again");
      goto out;
    }
    j->c = c;
    j->method = method;
    j->req = req;
    j->len = len;
    method = NULL;
    req = NULL;
    c->pending++; /* the job's: put when it is answered */
    s->jobs_out++;
    pthread_mutex_lock(&s->mu);
    *s->queue_tail = j;
    s->queue_tail = &j->next;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    goto out;
  }
  st = s->unary(s->ctx, method, req, len, &reply, &reply_len, err, sizeof(err));
  finish_unary(c, st, reply, reply_len, st ? err : "");
out:
  free(req);
  free(reply);
  if (method)
    gpr_free(method);
}

static void job_free(struct job *j) {
  gpr_free(j->method);
  free(j->req);
  free(j->reply);
  free(j);
}

/* Answers the workers' finished calls and sends what was published; the serving thread's. */
static void collect(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  struct job *done = s->done;
  s->done = NULL;
  bool fresh = s->pub_gen != s->gen;
  if (fresh) {
    uint8_t *p = malloc(s->pub_len ? s->pub_len : 1);
    if (p) {
      memcpy(p, s->pub, s->pub_len);
      free(s->msg);
      s->msg = p;
      s->msg_len = s->pub_len;
      s->gen = s->pub_gen;
    } else {
      fresh = false;
    }
  }
  pthread_mutex_unlock(&s->mu);
  while (done) {
    struct job *j = done;
    done = j->next;
    finish_unary(j->c, j->status, j->reply, j->reply_len, j->status ? j->err : "");
    call_put(j->c);
    s->jobs_out--;
    job_free(j);
  }
  if (fresh)
    for (struct call *c = s->streams; c; c = c->next)
      stream_flush(c);
}

static void *work_run(void *arg) {
  struct rpc_server *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->queue && !s->work_quit)
      pthread_cond_wait(&s->work, &s->mu);
    if (s->work_quit)
      break;
    struct job *j = s->queue;
    s->queue = j->next;
    if (!s->queue)
      s->queue_tail = &s->queue;
    j->next = NULL;
    pthread_mutex_unlock(&s->mu);
    j->status = s->unary(s->ctx, j->method, j->req, j->len, &j->reply, &j->reply_len, j->err,
                         sizeof(j->err));
    pthread_mutex_lock(&s->mu);
    j->next = s->done;
    s->done = j;
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void handle(struct rpc_server *s, grpc_event ev);

static void *serve_run(void *arg) {
  struct rpc_server *s = arg;
  while (!atomic_load(&s->quit)) {
    /* Nothing wakes this queue from another thread: a worker's answer or a published message
     * waits at most this long (shorter while the workers have calls). */
    grpc_event ev = grpc_completion_queue_next(s->cq, deadline_ms(s->jobs_out ? 2 : 20), NULL);
    if (ev.type == GRPC_OP_COMPLETE)
      handle(s, ev);
    else if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    collect(s);
  }
  return NULL;
}

static void handle(struct rpc_server *s, grpc_event ev) {
  struct tag *t = ev.tag;
  struct call *c = t->c;

  switch (t->kind) {
  case TAG_NEW:
    if (!ev.success || s->stopping) {
      call_put(c);
      return;
    }
    request_next(s);
    {
      grpc_op op;
      memset(&op, 0, sizeof(op));
      op.op = GRPC_OP_RECV_MESSAGE;
      op.data.recv_message.recv_message = &c->recv;
      c->pending++;
      if (grpc_call_start_batch(c->call, &op, 1, &c->t_recv, NULL) != GRPC_CALL_OK)
        c->pending--;
    }
    call_put(c); /* the request_call reference */
    return;
  case TAG_RECV:
    if (ev.success)
      on_recv(c);
    call_put(c);
    return;
  case TAG_SEND:
    c->sending = false;
    if (!ev.success)
      c->closed = true;
    else
      stream_flush(c);
    call_put(c);
    return;
  case TAG_CLOSE:
    c->closed = true;
    call_put(c);
    return;
  case TAG_DONE: call_put(c); return;
  }
}

int rpc_server_start(const char *path, const char *stream_method, const char *worker_method,
                     rpc_unary_fn unary, void *ctx, struct rpc_server **ret, char *err,
                     size_t err_len) {
  const char *streams[] = {stream_method, NULL}, *workers[] = {worker_method, NULL};
  return rpc_server_start_methods(path, stream_method ? streams : NULL,
                                  worker_method ? workers : NULL, unary, ctx, ret, err, err_len);
}

/* names (NULL-terminated, NULL: none) into out; -EINVAL past RPC_MAX_METHODS or a long one. */
static int methods_copy(char (*out)[128], const char *const *names) {
  for (size_t i = 0; names && names[i]; i++) {
    if (i == RPC_MAX_METHODS || strlen(names[i]) >= sizeof(out[0]))
      return -EINVAL;
    memcpy(out[i], names[i], strlen(names[i]) + 1);
  }
  return 0;
}

int rpc_server_start_methods(const char *path, const char *const *stream_methods,
                             const char *const *worker_methods, rpc_unary_fn unary, void *ctx,
                             struct rpc_server **ret, char *err, size_t err_len) {
  return rpc_server_start_pool(path, stream_methods, worker_methods, 1, unary, ctx, ret, err,
                               err_len);
}

/* The workers asked to end and joined. */
static void workers_join(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  s->work_quit = true;
  pthread_cond_broadcast(&s->work);
  pthread_mutex_unlock(&s->mu);
  while (s->nworkers)
    pthread_join(s->work_threads[--s->nworkers], NULL);
}

/* The serving thread and `workers` workers (at least one must start). 0 or an errno. */
static int threads_start(struct rpc_server *s, unsigned workers) {
  int r = 0;
  while (s->nworkers < workers &&
         (r = pthread_create(&s->work_threads[s->nworkers], NULL, work_run, s)) == 0)
    s->nworkers++;
  if (s->nworkers == 0)
    return r;
  if ((r = pthread_create(&s->serve_thread, NULL, serve_run, s)) != 0)
    workers_join(s);
  return r;
}

int rpc_server_start_pool(const char *path, const char *const *stream_methods,
                          const char *const *worker_methods, unsigned workers, rpc_unary_fn unary,
                          void *ctx, struct rpc_server **ret, char *err, size_t err_len) {
  struct rpc_server *s;
  char addr[4200];
  struct stat st;

  if (workers < 1 || workers > RPC_MAX_WORKERS) {
    snprintf(err, err_len, "%u workers: 1..%d", workers, RPC_MAX_WORKERS);
    return -EINVAL;
  }
  if (!(s = calloc(1, sizeof(*s))))
    return -ENOMEM;
  if (methods_copy(s->stream_methods, stream_methods) < 0 ||
      methods_copy(s->worker_methods, worker_methods) < 0) {
    snprintf(err, err_len, "more than %d methods of a kind, or one of 128 characters or more",
             RPC_MAX_METHODS);
    free(s);
    return -EINVAL;
  }
  if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
    unlink(path);
  snprintf(addr, sizeof(addr), "unix:%s", path);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work, NULL);
  s->queue_tail = &s->queue;
  atomic_init(&s->quit, 0);
  s->unary = unary;
  s->ctx = ctx;
  s->cq = grpc_completion_queue_create_for_next(NULL);
  s->server = grpc_server_create(NULL, NULL);
  grpc_server_register_completion_queue(s->server, s->cq, NULL);
  grpc_server_credentials *cred = grpc_insecure_server_credentials_create();
  int port = grpc_server_add_http2_port(s->server, addr, cred);
  grpc_server_credentials_release(cred);
  if (port == 0) {
    snprintf(err, err_len, "cannot serve on %s (is the directory there and writable?)", path);
    grpc_server_destroy(s->server);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
      ;
    grpc_completion_queue_destroy(s->cq);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work);
    free(s);
    return -EADDRNOTAVAIL;
  }
  grpc_server_start(s->server);
  for (int i = 0; i < 4; i++)
    request_next(s);
  int r = threads_start(s, workers);
  if (r != 0) {
    snprintf(err, err_len, "cannot start the plugin server's threads: %s", strerror(r));
    rpc_server_stop(s);
    return -r;
  }
  s->threads = true;
  *ret = s;
  return 0;
}

int rpc_server_publish(struct rpc_server *s, const uint8_t *msg, size_t len) {
  uint8_t *p = malloc(len ? len : 1);
  if (!p)
    return -ENOMEM;
  memcpy(p, msg, len);
  pthread_mutex_lock(&s->mu);
  free(s->pub);
  s->pub = p;
  s->pub_len = len;
  s->pub_gen++;
  pthread_mutex_unlock(&s->mu);
  return 0;
}

void rpc_server_stop(struct rpc_server *s) {
  static int shutdown_tag;
  bool down = false;

  if (s->threads) {
    atomic_store(&s->quit, 1);
    pthread_join(s->serve_thread, NULL);
    workers_join(s);
  }
  /* This thread has the server now: what the workers answered goes out, what they had not
   * taken is told to come again. */
  collect(s);
  for (struct job *j = s->queue, *next; j; j = next) {
    next = j->next;
    finish_unary(j->c, GRPC_STATUS_UNAVAILABLE, NULL, 0, "the plugin's server is restarting");
    call_put(j->c);
    job_free(j);
  }
  s->queue = NULL;
  s->stopping = true;
  grpc_server_shutdown_and_notify(s->server, s->cq, &shutdown_tag);
  grpc_server_cancel_all_calls(s->server);
  while (!down) {
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE)
      break;
    if (ev.tag == &shutdown_tag)
      down = true;
    else
      handle(s, ev);
  }
  grpc_server_destroy(s->server);
  grpc_completion_queue_shutdown(s->cq);
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    if (ev.type == GRPC_OP_COMPLETE && ev.tag != &shutdown_tag)
      handle(s, ev);
  }
  grpc_completion_queue_destroy(s->cq);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work);
  free(s->msg);
  free(s->pub);
  free(s);
}
