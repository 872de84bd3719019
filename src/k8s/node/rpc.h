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

/* Serves on the Unix socket `path` (removed first if it is a stale socket). stream_method is
 * answered with the published message, then each newer one, until the client goes. */
int rpc_server_start(const char *path, const char *stream_method, rpc_unary_fn unary, void *ctx,
                     struct rpc_server **ret, char *err, size_t err_len);
/* Handles what arrived, waiting at most timeout_ms for the first event. */
void rpc_server_poll(struct rpc_server *s, int timeout_ms);
/* Sets the stream's message (copied) and sends it on every open stream. */
int rpc_server_publish(struct rpc_server *s, const uint8_t *msg, size_t len);
/* Open streams now. */
int rpc_server_streams(const struct rpc_server *s);
/* Cancels every call, stops and frees the server (the socket file is left to the caller). */
void rpc_server_stop(struct rpc_server *s);
