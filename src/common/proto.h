/* SPDX-License-Identifier: Apache-2.0 */
/* The gsliced wire protocol: every message between the daemon, the CLI and the hook, defined here
 * only. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* GPU numbering, stated here once. Two numberings cross the wire, never mixed in one field:
 * - the *index*: the node's GPU as NVML numbers it (physical order). REGISTER's and SET's
 *   gpu_mask bits, STATUS_REPLY (status.h: gs_gpu_status.index, gs_slice_gpu_status.gpu),
 *   /metrics and the CLI use it.
 * - the *ordinal*: the CUDA device number as a process of the slice sees it. Every TOKEN_*
 *   message's `gpu` is one. `gslice run --gpu` sets CUDA_VISIBLE_DEVICES to the slice's GPUs in
 *   index order, so ordinal k is the k-th set bit of the slice's mask.
 * The hook only ever knows ordinals and sends them as they are; the daemon converts, in
 * registry.c, both ways (slice_gpu: ordinal -> index; slice_ordinal: index -> ordinal), and
 * nowhere else. */

/* Messages travel over a Unix stream socket between processes of one machine,
 * so fields are in host byte order. Every message starts with the same header;
 * `length` counts the whole message, header included, and must equal the size
 * the type defines (STATUS_REPLY: the fixed part plus nslices entries). */
/* Where gsliced listens unless its config (socket) or the client's GSLICE_SOCKET says otherwise. */
#define GS_DEFAULT_SOCKET "/run/gslice/gsliced.sock"
#define GS_PROTO_MAGIC 0x434c5347u /* "GSLC" in memory on little-endian */
/* Versions: 2: slice nonces; 3: processes outside every slice in STATUS; 4: time lost to
 * token switches per GPU in STATUS; 5: PING; 6: the handoff (TOKEN_RELEASE flags and tail end,
 * TOKEN_GRANT busy_until); 7: TOKEN_RELEASE kernel_ns; 8: per-GPU requests and memory caps in
 * gs_slice_spec, each slice's request per GPU in STATUS, the hook socket. */
#define GS_PROTO_VERSION 8u
#define GS_PROTO_MAX_SLICES 256u
#define GS_PROTO_TEXT_MAX 256u
#define GS_PROTO_PATH_MAX 256u

/* The bounds of a slice's numbers (gs_slice_spec): compute in percent of one GPU, weight. */
#define GS_PERCENT_MAX 100u
#define GS_WEIGHT_MIN 1u
#define GS_WEIGHT_MAX 1000u

enum gs_msg_type {
  GS_MSG_HELLO = 1,     /* client -> daemon: first message on every connection */
  GS_MSG_HELLO_OK,      /* daemon -> client: the slice's limits, for self-throttling */
  GS_MSG_ERROR,         /* daemon -> client: a request was refused (-errno + text) */
  GS_MSG_OK,            /* daemon -> client: a request succeeded, nothing to return */
  GS_MSG_REGISTER,      /* cli -> daemon: create a slice */
  GS_MSG_REGISTERED,    /* daemon -> cli: its id and state dir */
  GS_MSG_UNREGISTER,    /* cli -> daemon: remove a slice */
  GS_MSG_TOKEN_REQUEST, /* hook -> daemon: this process has work for a GPU */
  GS_MSG_TOKEN_GRANT,   /* daemon -> hook: launch until valid_until */
  GS_MSG_TOKEN_RELEASE, /* hook -> daemon: burst closed, its device time */
  GS_MSG_TOKEN_REVOKE,  /* daemon -> hook: stop launching now, close the burst */
  GS_MSG_STATUS,        /* any -> daemon: node snapshot please */
  GS_MSG_STATUS_REPLY,  /* daemon -> client: struct gs_status on the wire */
  GS_MSG_SET,           /* cli -> daemon: change a live slice */
  GS_MSG_PING,          /* any -> daemon: are you there (a hook whose grant is late) */
  GS_MSG_PONG,          /* daemon -> client: yes, at once, whatever else waits */
  GS_MSG_TYPE_END
};

enum gs_role { GS_ROLE_CLI = 1, GS_ROLE_HOOK = 2, GS_ROLE_RUNNER = 3 };

struct gs_msg_hdr {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t length;
  uint32_t seq; /* echoed in the reply, so a client can match answers */
};
_Static_assert(sizeof(struct gs_msg_hdr) == 16, "header is 16 bytes");

/* gs_slice_spec.per_gpu: which per-GPU arrays hold the slice's values. A slice over several GPUs
 * may ask for different amounts of each (a container given 16% of GPU 0 and 15% of GPU 1): with
 * the bit set, the array's entry for each GPU of the mask is that GPU's value and the scalar is
 * not read (the daemon sets it to the largest, for readers that show one figure); with the bit
 * clear, the scalar applies to every GPU of the mask and the array is all 0. Entries of GPUs
 * outside the mask are 0 either way. */
enum gs_spec_per_gpu {
  GS_SPEC_GPU_REQUEST = 1u << 0, /* gpu_compute_request[] */
  GS_SPEC_GPU_MEMORY = 1u << 1,  /* gpu_memory_cap[] */
  GS_SPEC_GPU_KNOWN = (1u << 2) - 1,
};

/* What a slice is: the arguments of `gslice run` that reach the daemon. */
struct gs_slice_spec {
  char name[GS_NAME_MAX];   /* NUL-terminated, may be empty */
  uint32_t gpu_mask;        /* bit i: GPU index i (above); 0 means GPU 0 */
  uint32_t compute_request; /* percent of one GPU, 0..100, on each of its GPUs */
  uint32_t compute_limit;   /* percent of one GPU, request..100, not 0 (every GPU alike) */
  int32_t priority;         /* enum gs_priority */
  uint32_t weight;          /* GS_WEIGHT_MIN..GS_WEIGHT_MAX */
  uint32_t per_gpu;         /* enum gs_spec_per_gpu */
  uint64_t memory_cap;      /* bytes per GPU, 0: no cap */
  /* By GPU index: percent of that GPU, 0..compute_limit (GS_SPEC_GPU_REQUEST). */
  uint32_t gpu_compute_request[GS_MAX_GPUS];
  /* By GPU index: bytes on that GPU, 0: no cap there (GS_SPEC_GPU_MEMORY). */
  uint64_t gpu_memory_cap[GS_MAX_GPUS];
};
_Static_assert(sizeof(struct gs_slice_spec) == 96 + 16 * 4 + 16 * 8, "slice spec size");

struct gs_msg_hello {
  uint32_t role;     /* enum gs_role */
  uint32_t slice_id; /* 0: not a slice's process */
  int32_t pid;       /* informational; the daemon trusts SO_PEERCRED */
  uint32_t reserved;
  /* The slice's identity beyond its id (GSLICE_SLICE_NONCE): a daemon that lost its state
   * reuses ids, and a process of the old slice must not join the new one of the same id. */
  uint64_t slice_nonce;
};
_Static_assert(sizeof(struct gs_msg_hello) == 24, "hello size");

struct gs_msg_hello_ok {
  uint32_t daemon_version; /* GS_PROTO_VERSION the daemon speaks */
  uint32_t slice_id;
  uint64_t window_ns;        /* the scheduler's window */
  struct gs_slice_spec spec; /* the slice (zero when slice_id is 0) */
};
_Static_assert(sizeof(struct gs_msg_hello_ok) == 112 + 192, "hello_ok size");

struct gs_msg_error {
  int32_t code; /* negative errno */
  uint32_t reserved;
  char text[GS_PROTO_TEXT_MAX]; /* NUL-terminated, for a human */
};
_Static_assert(sizeof(struct gs_msg_error) == 264, "error size");

struct gs_msg_ok {
  uint64_t reserved;
};
_Static_assert(sizeof(struct gs_msg_ok) == 8, "ok size");

/* REGISTER flags (0 from `gslice run`). A daemon that knows them echoes the ones it honoured in
 * REGISTERED.flags; one that predates them leaves it 0, which tells the client (gslice-node). */
enum gs_register_flag {
  GS_REGISTER_HELD = 1u << 0,    /* kept until UNREGISTER, not tied to runner_pid's life */
  GS_REGISTER_ANY_UID = 1u << 1, /* hooks of any uid may join it (a container's user) */
  GS_REGISTER_KNOWN = (1u << 2) - 1,
};

struct gs_msg_register {
  struct gs_slice_spec spec;
  int32_t runner_pid; /* the `gslice run` process whose life is the slice's */
  uint32_t flags;     /* enum gs_register_flag */
};
_Static_assert(sizeof(struct gs_msg_register) == 104 + 192, "register size");

struct gs_msg_registered {
  uint32_t slice_id;
  uint32_t flags;                    /* the REGISTER flags honoured */
  char state_dir[GS_PROTO_PATH_MAX]; /* the slice's own dir: GSLICE_STATE_DIR */
  uint64_t slice_nonce;              /* random, never 0: GSLICE_SLICE_NONCE */
};
_Static_assert(sizeof(struct gs_msg_registered) == 272, "registered size");

struct gs_msg_unregister {
  uint32_t slice_id;
  uint32_t reserved;
  uint64_t slice_nonce; /* 0: any (the CLI by id); else only the slice with this nonce */
};
_Static_assert(sizeof(struct gs_msg_unregister) == 16, "unregister size");

struct gs_msg_token_request {
  uint32_t gpu; /* an ordinal (GPU numbering, above), as in every TOKEN_* message */
  uint32_t reserved;
};
_Static_assert(sizeof(struct gs_msg_token_request) == 8, "token request size");

struct gs_msg_token_grant {
  uint32_t gpu;
  uint32_t generation; /* names this token in the release */
  uint64_t quantum_ns;
  uint64_t valid_until_ns; /* CLOCK_MONOTONIC: launch only before this */
  /* CLOCK_MONOTONIC: the previous holder's last work runs until about then (its handoff);
   * the first launch goes no earlier than just before it. 0: the device is free. */
  uint64_t busy_until_ns;
};
_Static_assert(sizeof(struct gs_msg_token_grant) == 32, "token grant size");

struct gs_msg_token_release {
  uint32_t gpu;
  uint32_t generation;
  uint64_t used_ns;     /* device time of the burst, measured with events */
  uint64_t launches;    /* launches in the burst */
  uint32_t more;        /* 1: this process has more to launch (a TOKEN_REQUEST in one) */
  uint32_t flags;       /* GS_RELEASE_*: 0 for a burst released once its work has run */
  uint64_t start_ns;    /* CLOCK_MONOTONIC when the burst's start event was recorded */
  uint64_t tail_end_ns; /* PENDING: CLOCK_MONOTONIC when its queued work should have run */
  /* This process's mean kernel length on this GPU (the hook's event measurement, EWMA of device
   * time per launch, as this process sees the device); 0: none (nothing ran). The one estimate:
   * the daemon's quanta and release grace are made of it (sched_set_kernel), never of charges. */
  uint64_t kernel_ns;
};
/* The handoff (docs/compute.md): a burst gives its token back as its last queued work runs,
 * before it has been measured (PENDING: used_ns and launches are 0, start_ns is the burst's),
 * and says what it ran once that work has completed (CHARGE: the same generation, no longer
 * held; more is 0). */
#define GS_RELEASE_PENDING 1u
#define GS_RELEASE_CHARGE 2u
_Static_assert(sizeof(struct gs_msg_token_release) == 56, "token release size");

struct gs_msg_token_revoke {
  uint32_t gpu;
  uint32_t generation;
};
_Static_assert(sizeof(struct gs_msg_token_revoke) == 8, "token revoke size");

struct gs_msg_status {
  uint64_t reserved;
};
_Static_assert(sizeof(struct gs_msg_status) == 8, "status size");

/* STATUS_REPLY: this fixed part, then nslices struct gs_slice_status. Both
 * ends are the same build on one machine, so the status.h structs travel as
 * they are; their sizes are pinned below so a change is a version change. */
struct gs_msg_status_reply {
  uint64_t time_ns;
  uint32_t ngpus;
  uint32_t nslices;
  struct gs_gpu_status gpus[GS_MAX_GPUS];
};
_Static_assert(sizeof(struct gs_gpu_status) == 392, "gpu status size");
_Static_assert(sizeof(struct gs_slice_gpu_status) == 160, "slice gpu status size");
_Static_assert(sizeof(struct gs_slice_status) == 2784, "slice status size");
_Static_assert(sizeof(struct gs_msg_status_reply) == 16 + 16 * 392, "status reply size");

/* Fields of SET: which parts of spec to apply. */
enum gs_set_field {
  GS_SET_REQUEST = 1u << 0,
  GS_SET_LIMIT = 1u << 1,
  GS_SET_PRIORITY = 1u << 2,
  GS_SET_WEIGHT = 1u << 3,
  GS_SET_MEMORY = 1u << 4,
  GS_SET_ALL = (1u << 5) - 1,
};

struct gs_msg_set {
  uint32_t slice_id;
  uint32_t fields; /* enum gs_set_field bits */
  uint32_t force;  /* memory cap below current use: allowed, new allocations fail */
  uint32_t reserved;
  /* name and gpu_mask are ignored. GS_SET_REQUEST with GS_SPEC_GPU_REQUEST in spec.per_gpu sets
   * each GPU of the slice's mask to its gpu_compute_request entry, without it every GPU to
   * compute_request; GS_SET_MEMORY likewise with GS_SPEC_GPU_MEMORY and gpu_memory_cap. */
  struct gs_slice_spec spec;
};
_Static_assert(sizeof(struct gs_msg_set) == 112 + 192, "set size");

/* PING and its PONG: the daemon echoes the cookie. */
struct gs_msg_ping {
  uint64_t cookie;
};
_Static_assert(sizeof(struct gs_msg_ping) == 8, "ping size");

#define GS_PROTO_MAX_MSG                                                                           \
  (sizeof(struct gs_msg_hdr) + sizeof(struct gs_msg_status_reply) +                                \
   GS_PROTO_MAX_SLICES * sizeof(struct gs_slice_status))

/* A decoded message: header plus the body of its type. STATUS_REPLY's slice
 * entries are not copied: `status_slices` points into the buffer decoded. */
struct gs_msg {
  struct gs_msg_hdr hdr;
  union {
    struct gs_msg_hello hello;
    struct gs_msg_hello_ok hello_ok;
    struct gs_msg_error error;
    struct gs_msg_ok ok;
    struct gs_msg_register reg;
    struct gs_msg_registered registered;
    struct gs_msg_unregister unregister;
    struct gs_msg_token_request token_request;
    struct gs_msg_token_grant token_grant;
    struct gs_msg_token_release token_release;
    struct gs_msg_token_revoke token_revoke;
    struct gs_msg_status status;
    struct gs_msg_status_reply status_reply;
    struct gs_msg_set set;
    struct gs_msg_ping ping;
  } u;
  const struct gs_slice_status *status_slices;
};

/* Name of a message type, for logs ("?" when unknown). */
const char *gs_msg_type_name(uint32_t type);

/* Size of the body of `type` (STATUS_REPLY: the fixed part); 0 if unknown. */
size_t gs_msg_body_size(uint32_t type);

/* Writes header + body into buf. Returns 0 and the message length in
 * *ret_len, or -EINVAL (unknown type, wrong body_len), -ENOBUFS (too small). */
int gs_msg_encode(void *buf, size_t cap, uint32_t type, uint32_t seq, const void *body,
                  size_t body_len, size_t *ret_len);

/* Checks the header at the start of buf (len bytes received so far).
 * Returns 0 and the full message length in *ret_len when the header is whole
 * and valid; -EAGAIN when fewer than 16 bytes are there; -EPROTO when the
 * magic, version, type or length is wrong (close the connection). */
int gs_msg_peek(const void *buf, size_t len, size_t *ret_len);

/* The framing loop of a reader (the daemon's connections, the hook's helper) over a buffer of
 * `cap` bytes holding `len`: 0 and the next message's length when it is whole in the buffer;
 * -EAGAIN when more bytes are needed; -EPROTO when its header is wrong or it could never fit. */
int gs_msg_frame(const void *buf, size_t len, size_t cap, size_t *ret_len);
/* Drops the first n bytes (a message handled) of a buffer holding *len. */
void gs_msg_consume(void *buf, size_t *len, size_t n);

/* Decodes and validates one whole message (len must be its length): strings
 * are NUL-terminated, enums and percents in range, counts within limits.
 * Returns 0 and fills *ret, or -EPROTO. */
int gs_msg_decode(const void *buf, size_t len, struct gs_msg *ret);

/* Validates a slice spec as `gslice run` and SET must: returns 0 or -EINVAL
 * with a reason in why (NUL-terminated) when why is not NULL. */
int gs_slice_spec_check(const struct gs_slice_spec *spec, char *why, size_t why_len);
/* The slice's GPU mask, GPU 0 when empty. */
uint32_t gs_spec_mask(const struct gs_slice_spec *spec);
/* What the spec asks on GPU index `gpu` (one of its mask): its per-GPU entry when per_gpu says
 * so, else the scalar. */
uint32_t gs_spec_request(const struct gs_slice_spec *spec, uint32_t gpu);
uint64_t gs_spec_memory_cap(const struct gs_slice_spec *spec, uint32_t gpu);
/* Puts a checked spec in its one stored form: both arrays filled for the GPUs of its mask (both
 * per_gpu bits set), the scalars the largest request and cap (the cap 0 when a GPU has none). */
void gs_spec_normalize(struct gs_slice_spec *spec);
