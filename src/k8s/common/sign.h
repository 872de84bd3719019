/* SPDX-License-Identifier: Apache-2.0 */
/* Signed assignments: an HMAC-SHA256 the extender writes beside gslice.io/assigned, with a key
 * from a Secret only it and gslice-node mount, so that an assignment a namespace user wrote
 * (or copied from another pod) is never honoured. Owns the keys (loading, ids) and the MAC. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define K8S_ANNOT_ASSIGNED_SIG "gslice.io/assigned-signature"
/* Where the Secret is mounted (deploy/): the signing key, and the one before it while a
 * rotation is under way. --signing-key FILE (once or twice) replaces both. */
#define K8S_SIGN_KEY_DEFAULT "/etc/gslice/signing/key"
#define K8S_SIGN_KEY_PREVIOUS "/etc/gslice/signing/previous"
#define K8S_SIGN_MAX_KEYS 2
#define K8S_SIGN_KEY_MIN 32   /* bytes, after trailing newlines are dropped */
#define K8S_SIGN_KEY_MAX 4096 /* bytes */
#define K8S_SIGN_ID_LEN 16    /* hex digits of SHA-256(key) naming a key */
/* "v1:" id ":" 64 hex digits, NUL. */
#define K8S_SIG_MAX (3 + K8S_SIGN_ID_LEN + 1 + 64 + 1)

struct k8s_key {
  uint8_t bytes[K8S_SIGN_KEY_MAX];
  size_t len;
  char id[K8S_SIGN_ID_LEN + 1];
};

/* key[0] signs; every key verifies. */
struct k8s_keys {
  uint32_t n;
  struct k8s_key key[K8S_SIGN_MAX_KEYS];
};

/* Reads one key file: a regular file (a Secret volume's symlink to one is followed), not
 * readable or writable by others, K8S_SIGN_KEY_MIN..K8S_SIGN_KEY_MAX bytes once trailing
 * newlines are dropped (so `openssl rand -hex 32 >key` and a binary key both work).
 * 0, or a negative errno with err saying what is wrong and what to do. */
int k8s_key_load(const char *path, struct k8s_key *ret, char *err, size_t errlen);

/* The keys of paths[0..n) (n <= K8S_SIGN_MAX_KEYS, the first signs); n 0: the defaults,
 * K8S_SIGN_KEY_DEFAULT and K8S_SIGN_KEY_PREVIOUS when that file exists. -ENOENT when the
 * (first) key file does not exist; other errors as k8s_key_load. Two keys with the same id
 * are one key. *ret is untouched on failure. */
int k8s_keys_load(const char *const *paths, size_t n, struct k8s_keys *ret, char *err,
                  size_t errlen);
/* Wipes the key bytes. */
void k8s_keys_clear(struct k8s_keys *keys);

/* The signature of an assignment: "v1:<key id>:<hex HMAC-SHA256>" over
 * "gslice.io/assigned/v1\n" uid "\n" node "\n" text, text being the annotation's exact
 * bytes, with keys->key[0]. sig gets K8S_SIG_MAX bytes. 0, or -EINVAL (no key, an empty
 * uid or node, a newline in either, a short buffer). */
int k8s_assigned_sign(const struct k8s_keys *keys, const char *uid, const char *node,
                      const char *text, char *sig, size_t siglen);

/* Whether sig (the gslice.io/assigned-signature annotation; NULL when absent) is the
 * signature of text for the pod with uid on node by one of keys (compared in constant
 * time). 0, or -EPERM with err saying why not (absent, malformed, an unknown key id, a
 * mismatch: made for another pod, node or text, or with another key). */
int k8s_assigned_verify(const struct k8s_keys *keys, const char *uid, const char *node,
                        const char *text, const char *sig, char *err, size_t errlen);
