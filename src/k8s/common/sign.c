/* SPDX-License-Identifier: Apache-2.0 */
/* Signed assignments (sign.h): key files, key ids and the HMAC, with OpenSSL's libcrypto. */
#include "sign.h"
#include "errtext.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIGN_DOMAIN "gslice.io/assigned/v1\n"

static const char hexd[] = "0123456789abcdef";

static void to_hex(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hexd[b[i] >> 4];
    out[2 * i + 1] = hexd[b[i] & 15];
  }
  out[2 * n] = 0;
}

static int hex_val(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1; /* upper case is not what gslice writes: refused */
}

int k8s_key_load(const char *path, struct k8s_key *ret, char *err, size_t errlen) {
  struct k8s_key *k = NULL;
  struct stat st;
  uint8_t digest[EVP_MAX_MD_SIZE];
  unsigned dlen = 0;
  ssize_t got;
  size_t len = 0;
  int fd, rc;

  /* A Secret volume's file is a symlink into ..data/: followed, then the file itself checked. */
  fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return k8s_err(err, errlen, -errno, "signing key %s: %s", path, strerror(errno));
  if (fstat(fd, &st) < 0) {
    rc = k8s_err(err, errlen, -errno, "signing key %s: %s", path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = k8s_err(err, errlen, -EINVAL, "signing key %s is not a regular file", path);
    goto out;
  }
  if (st.st_mode & (S_IROTH | S_IWOTH)) {
    rc = k8s_err(err, errlen, -EPERM,
                 "signing key %s is readable or writable by every user (mode %04o): chmod o-rw "
                 "it (a Secret volume: defaultMode 0400)",
                 path, (unsigned)(st.st_mode & 07777));
    goto out;
  }
  k = calloc(1, sizeof(*k));
  if (!k) {
    rc = -ENOMEM;
    goto out;
  }
  /* One byte more than allowed, to tell a long file from one exactly at the limit. */
  for (;;) {
    uint8_t extra;
    uint8_t *dst = len < sizeof k->bytes ? k->bytes + len : &extra;
    size_t room = len < sizeof k->bytes ? sizeof k->bytes - len : 1;
    got = read(fd, dst, room);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      rc = k8s_err(err, errlen, -errno, "signing key %s: %s", path, strerror(errno));
      goto out;
    }
    if (got == 0)
      break;
    len += (size_t)got;
    if (len > sizeof k->bytes) {
      rc = k8s_err(err, errlen, -EFBIG, "signing key %s is longer than %d bytes", path,
                   K8S_SIGN_KEY_MAX);
      goto out;
    }
  }
  while (len > 0 && (k->bytes[len - 1] == '\n' || k->bytes[len - 1] == '\r'))
    len--;
  if (len < K8S_SIGN_KEY_MIN) {
    rc = k8s_err(err, errlen, -EINVAL,
                 "signing key %s has %zu bytes, fewer than %d (make one with: openssl rand -hex "
                 "32)",
                 path, len, K8S_SIGN_KEY_MIN);
    goto out;
  }
  k->len = len;
  if (!EVP_Digest(k->bytes, k->len, digest, &dlen, EVP_sha256(), NULL) || dlen < 8) {
    rc = k8s_err(err, errlen, -EIO, "signing key %s: SHA-256 failed", path);
    goto out;
  }
  to_hex(digest, K8S_SIGN_ID_LEN / 2, k->id);
  *ret = *k;
  rc = 0;
out:
  if (k) {
    OPENSSL_cleanse(k, sizeof(*k));
    free(k);
  }
  close(fd);
  return rc;
}

int k8s_keys_load(const char *const *paths, size_t n, struct k8s_keys *ret, char *err,
                  size_t errlen) {
  const char *defaults[K8S_SIGN_MAX_KEYS] = {K8S_SIGN_KEY_DEFAULT, K8S_SIGN_KEY_PREVIOUS};
  struct k8s_keys *ks;
  int rc = 0;

  if (n > K8S_SIGN_MAX_KEYS)
    return k8s_err(err, errlen, -EINVAL, "at most %d signing keys (the new one, then the old)",
                   K8S_SIGN_MAX_KEYS);
  if (n == 0) {
    paths = defaults;
    n = access(K8S_SIGN_KEY_PREVIOUS, F_OK) == 0 ? 2 : 1;
  }
  ks = calloc(1, sizeof(*ks));
  if (!ks)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    struct k8s_key *k = &ks->key[ks->n];
    rc = k8s_key_load(paths[i], k, err, errlen);
    if (rc)
      goto out;
    if (ks->n == 1 && strcmp(ks->key[0].id, k->id) == 0)
      continue; /* the same key twice: one key */
    ks->n++;
  }
  *ret = *ks;
out:
  OPENSSL_cleanse(ks, sizeof(*ks));
  free(ks);
  return rc;
}

void k8s_keys_clear(struct k8s_keys *keys) {
  if (keys)
    OPENSSL_cleanse(keys, sizeof(*keys));
}

/* HMAC-SHA256 of the signed message with key k into mac[32]. */
static int mac_of(const struct k8s_key *k, const char *uid, const char *node, const char *text,
                  uint8_t mac[32]) {
  size_t lu = strlen(uid), ln = strlen(node), lt = strlen(text), ld = sizeof SIGN_DOMAIN - 1;
  size_t len = ld + lu + 1 + ln + 1 + lt;
  unsigned mlen = 0;
  char *msg = malloc(len + 1);
  if (!msg)
    return -ENOMEM;
  memcpy(msg, SIGN_DOMAIN, ld);
  memcpy(msg + ld, uid, lu);
  msg[ld + lu] = '\n';
  memcpy(msg + ld + lu + 1, node, ln);
  msg[ld + lu + 1 + ln] = '\n';
  memcpy(msg + ld + lu + 1 + ln + 1, text, lt);
  uint8_t *r =
      HMAC(EVP_sha256(), k->bytes, (int)k->len, (const unsigned char *)msg, len, mac, &mlen);
  free(msg);
  return r && mlen == 32 ? 0 : -EIO;
}

static bool field_ok(const char *s) {
  return s && *s && !strchr(s, '\n');
}

int k8s_assigned_sign(const struct k8s_keys *keys, const char *uid, const char *node,
                      const char *text, char *sig, size_t siglen) {
  uint8_t mac[32];
  int rc;

  if (!keys || keys->n < 1 || !field_ok(uid) || !field_ok(node) || !text || !sig ||
      siglen < K8S_SIG_MAX)
    return -EINVAL;
  rc = mac_of(&keys->key[0], uid, node, text, mac);
  if (rc)
    return rc;
  memcpy(sig, "v1:", 3);
  memcpy(sig + 3, keys->key[0].id, K8S_SIGN_ID_LEN);
  sig[3 + K8S_SIGN_ID_LEN] = ':';
  to_hex(mac, sizeof mac, sig + 4 + K8S_SIGN_ID_LEN);
  OPENSSL_cleanse(mac, sizeof mac);
  return 0;
}

int k8s_assigned_verify(const struct k8s_keys *keys, const char *uid, const char *node,
                        const char *text, const char *sig, char *err, size_t errlen) {
  uint8_t want[32], got[32];
  const struct k8s_key *k = NULL;
  const char *hex;
  int rc;

  if (!sig)
    return k8s_err(err, errlen, -EPERM, "no %s annotation (only gslice-extender assigns GPUs)",
                   K8S_ANNOT_ASSIGNED_SIG);
  if (!field_ok(uid) || !field_ok(node) || !text)
    return k8s_err(err, errlen, -EPERM, "the pod has no uid or node to check %s against",
                   K8S_ANNOT_ASSIGNED_SIG);
  if (strlen(sig) != K8S_SIG_MAX - 1 || strncmp(sig, "v1:", 3) != 0 ||
      sig[3 + K8S_SIGN_ID_LEN] != ':')
    return k8s_err(err, errlen, -EPERM, "%s is malformed (want v1:<key id>:<hmac>)",
                   K8S_ANNOT_ASSIGNED_SIG);
  hex = sig + 4 + K8S_SIGN_ID_LEN;
  for (size_t i = 0; i < sizeof got; i++) {
    int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return k8s_err(err, errlen, -EPERM, "%s is malformed (want v1:<key id>:<hmac>)",
                     K8S_ANNOT_ASSIGNED_SIG);
    got[i] = (uint8_t)(hi << 4 | lo);
  }
  for (uint32_t i = 0; keys && i < keys->n; i++)
    if (strncmp(sig + 3, keys->key[i].id, K8S_SIGN_ID_LEN) == 0)
      k = &keys->key[i];
  if (!k)
    return k8s_err(err, errlen, -EPERM,
                   "%s was made with key %.*s, which is not one of this "
                   "gslice's signing keys",
                   K8S_ANNOT_ASSIGNED_SIG, K8S_SIGN_ID_LEN, sig + 3);
  rc = mac_of(k, uid, node, text, want);
  if (rc)
    return k8s_err(err, errlen, rc, "cannot compute the HMAC");
  rc = CRYPTO_memcmp(want, got, sizeof want) == 0
           ? 0
           : k8s_err(err, errlen, -EPERM,
                     "%s does not match: the assignment was not made for this pod (uid %s) on "
                     "node %s, or was changed",
                     K8S_ANNOT_ASSIGNED_SIG, uid, node);
  OPENSSL_cleanse(want, sizeof want);
  return rc;
}
