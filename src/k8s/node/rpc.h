/* SPDX-License-Identifier: Apache-2.0 */
/* A small gRPC layer over Debian's gRPC core C API: one unary client call, and a server on a Unix
 * socket with unary methods and one server-streaming method whose every stream carries the latest
 * published message. Messages are bytes (protobuf-c encodes and decodes them). */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Once per process (grpc_init), before any call below. */
void rpc_global_init(void);

/* A unary call: target "unix:/path", method "/pkg.Service/Method". On success 0 and the reply in
 * *ret_reply (malloc'd, *ret_len bytes; free it). On failure -errno (-ETIMEDOUT, -ECONNREFUSED
 * when nothing answers, -EPROTO for another gRPC status) with the status text in err. */
int rpc_call(const char *target, const char *method, const uint8_t *req, size_t req_len,
             int timeout_ms, uint8_t **ret_reply, size_t *ret_len, char *err, size_t err_len);

/* A unary handler: 0 and a malloc'd reply, or a gRPC status code (> 0) with its text in err. */
typedef int (*rpc_unary_fn)(void *ctx, const char *method, const uint8_t *req, size_t len,
                            uint8_t **ret_reply, size_t *ret_len, char *err, size_t err_len);

struct rpc_server;

/* Serves on the Unix socket `path` (removed first if it is a stale socket), on a thread of its
 * own. stream_method is answered with the published message, then each newer one, until the
 * client goes. Unary calls of worker_method (NULL: none) run one at a time on a worker thread,
 * every other unary call on the serving thread, at once: a handler that may wait (on a lock,
 * a peer) belongs to worker_method, for the others never wait behind it. Past 64 calls of
 * worker_method queued, one more is answered UNAVAILABLE. */
int rpc_server_start(const char *path, const char *stream_method, const char *worker_method,
                     rpc_unary_fn unary, void *ctx, struct rpc_server **ret, char *err,
                     size_t err_len);
/* The same with several methods of each kind (NULL-terminated lists, at most RPC_MAX_METHODS
 * each; NULL: none): every stream method carries the one published message, and the worker
 * runs calls of all worker methods, one at a time, in the order they came. */
#define RPC_MAX_METHODS 8
int rpc_server_start_methods(const char *path, const char *const *stream_methods,
                             const char *const *worker_methods, rpc_unary_fn unary, void *ctx,
                             struct rpc_server **ret, char *err, size_t err_len);
/* The same with `workers` worker threads (1..RPC_MAX_WORKERS): calls of the worker methods are
 * taken in the order they came, each by the next free worker, and run at the same time, so a
 * slow one holds up only its own worker (the handler serializes what must be: per claim, per
 * record). The 64-call bound is over all of them. */
#define RPC_MAX_WORKERS 16
int rpc_server_start_pool(const char *path, const char *const *stream_methods,
                          const char *const *worker_methods, unsigned workers, rpc_unary_fn unary,
                          void *ctx, struct rpc_server **ret, char *err, size_t err_len);
/* Sets the stream's message (copied; any thread); the serving thread sends it on every open
 * stream within some 20 ms. */
int rpc_server_publish(struct rpc_server *s, const uint8_t *msg, size_t len);
/* Stops its threads (waiting for the workers' calls in progress), answers what is left,
 * cancels every call, frees the server (the socket file is left to the caller). */
void rpc_server_stop(struct rpc_server *s);
