/* SPDX-License-Identifier: Apache-2.0 */
/* The self-signed certificates of gslice-webhook (selfsign.h): made with libcrypto, kept in one
 * Secret that every replica shares. */
#include "selfsign.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "kube.h"

#define CA_CN "gslice-webhook-ca"
#define CA_DAYS 3650
#define SERVING_DAYS 365
#define FIELD_MAX (64u << 10) /* one PEM of the Secret */
#define TRIES 5               /* GET and write again after a 409 */

struct wh_selfsign {
  struct kube *k;
  char *coll, *path; /* the Secrets of the namespace; the Secret */
  char *name, *service;
  char *dir, *cert, *key, *ca;
  int dirfd;
  long not_after; /* of the serving certificate written last; 0: none */
};

/* The four PEMs of the Secret (malloc'd; the keys cleansed when freed). */
struct pems {
  char *ca_crt, *ca_key, *tls_crt, *tls_key;
};

static void pems_free(struct pems *p) {
  if (p->ca_key)
    OPENSSL_cleanse(p->ca_key, strlen(p->ca_key));
  if (p->tls_key)
    OPENSSL_cleanse(p->tls_key, strlen(p->tls_key));
  free(p->ca_crt);
  free(p->ca_key);
  free(p->tls_crt);
  free(p->tls_key);
  *p = (struct pems){0};
}

/* ---- PEM and base64 --------------------------------------------------------------------- */

static char *bio_string(BIO *b) {
  char *data, *out = NULL;
  long n = BIO_get_mem_data(b, &data);
  if (n >= 0 && (out = malloc((size_t)n + 1))) {
    memcpy(out, data, (size_t)n);
    out[n] = 0;
  }
  return out;
}

static char *pem_cert(X509 *x) {
  BIO *b = BIO_new(BIO_s_mem());
  char *out = b && PEM_write_bio_X509(b, x) ? bio_string(b) : NULL;
  BIO_free(b);
  return out;
}

/* The key's PEM; the memory BIO is cleansed before it is freed. */
static char *pem_key(EVP_PKEY *k) {
  BIO *b = BIO_new(BIO_s_secmem());
  char *out = b && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) ? bio_string(b) : NULL;
  BIO_free(b);
  return out;
}

static X509 *read_cert(const char *pem) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  return x;
}

static EVP_PKEY *read_key(const char *pem) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  return k;
}

static char *b64(const char *s) {
  size_t len = strlen(s);
  char *out = malloc(4 * ((len + 2) / 3) + 1);
  if (out)
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len);
  return out;
}

/* data[field] decoded, NUL-terminated; NULL when absent, not base64 or too long. */
static char *unb64(const json_t *data, const char *field) {
  const char *in = json_string_value(json_object_get(data, field));
  size_t len = in ? strlen(in) : 0;
  char *out;
  int n;
  if (!len || len % 4 || len > FIELD_MAX || !(out = malloc(len / 4 * 3 + 1)))
    return NULL;
  if ((n = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)in, (int)len)) < 0) {
    free(out);
    return NULL;
  }
  n -= (int)(len - strcspn(in, "=")); /* EVP_DecodeBlock counts the padding as bytes */
  out[n] = 0;
  if (strlen(out) != (size_t)n) { /* a NUL inside: not a PEM */
    OPENSSL_cleanse(out, (size_t)n);
    free(out);
    return NULL;
  }
  return out;
}

/* ---- making certificates ---------------------------------------------------------------- */

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value) {
  X509V3_CTX ctx;
  X509_EXTENSION *e;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
  if (!(e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)))
    return -1;
  int ok = X509_add_ext(x, e, -1);
  X509_EXTENSION_free(e);
  return ok ? 0 : -1;
}

/* The extensions of a CA (issuer NULL) or of a serving certificate for service. */
static int add_exts(X509 *x, X509 *issuer, const char *service) {
  char san[600];
  if (!issuer)
    return add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE") ||
                   add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
                   add_ext(x, x, NID_subject_key_identifier, "hash")
               ? -1
               : 0;
  snprintf(san, sizeof san, "DNS:%s,DNS:%s.cluster.local", service, service);
  return add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE") ||
                 add_ext(x, issuer, NID_key_usage, "critical,digitalSignature") ||
                 add_ext(x, issuer, NID_ext_key_usage, "serverAuth") ||
                 add_ext(x, issuer, NID_subject_alt_name, san) ||
                 add_ext(x, issuer, NID_authority_key_identifier, "keyid:always")
             ? -1
             : 0;
}

/* A certificate of key's public half named cn, signed by ca_key (issuer NULL: by itself). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *ca_key, int days,
                       const char *service) {
  X509 *x = X509_new();
  BIGNUM *serial = BN_new();
  X509_NAME *name;
  bool ok =
      x && serial && BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
      BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) && X509_set_version(x, 2) &&
      X509_gmtime_adj(X509_getm_notBefore(x), -300) &&
      X509_gmtime_adj(X509_getm_notAfter(x), 86400L * days) && X509_set_pubkey(x, key) &&
      (name = X509_get_subject_name(x)) &&
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) &&
      X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) &&
      add_exts(x, issuer, service) == 0 && X509_sign(x, ca_key, EVP_sha256()) > 0;
  BN_free(serial);
  if (!ok) {
    X509_free(x);
    return NULL;
  }
  return x;
}

/* A new serving key and certificate from the CA in p (replacing p's). */
static int issue(struct pems *p, const char *service) {
  X509 *ca = read_cert(p->ca_crt), *x = NULL;
  EVP_PKEY *ca_key = read_key(p->ca_key), *key = EVP_EC_gen("P-256");
  char *crt = NULL, *kpem = NULL;
  int rc = -ENOMEM;
  if (ca && ca_key && key && (x = make_cert(key, service, ca, ca_key, SERVING_DAYS, service)) &&
      (crt = pem_cert(x)) && (kpem = pem_key(key))) {
    free(p->tls_crt);
    if (p->tls_key)
      OPENSSL_cleanse(p->tls_key, strlen(p->tls_key));
    free(p->tls_key);
    p->tls_crt = crt;
    p->tls_key = kpem;
    crt = kpem = NULL;
    rc = 0;
  }
  free(crt);
  free(kpem);
  X509_free(ca);
  X509_free(x);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(key);
  return rc;
}

/* A new CA, then a serving certificate from it. */
static int make_all(struct pems *p, const char *service) {
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *ca = key ? make_cert(key, CA_CN, NULL, key, CA_DAYS, NULL) : NULL;
  int rc = -ENOMEM;
  pems_free(p);
  if (ca && (p->ca_crt = pem_cert(ca)) && (p->ca_key = pem_key(key)))
    rc = issue(p, service);
  X509_free(ca);
  EVP_PKEY_free(key);
  return rc;
}

/* ---- judging what the Secret holds ---------------------------------------------------- */

static long cert_end(X509 *x) {
  struct tm tm;
  if (!ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm))
    return 0;
  return (long)timegm(&tm);
}

/* 0 with *ret_end the serving certificate's end, *ret_usable whether it may be served now (for
 * service, signed by the CA, its key, not ended), *ret_fresh whether it may be served on
 * (for service, not within WH_RENEW_BEFORE_S of its end, signed by the CA); -EINVAL with err
 * saying what is wrong with the Secret when its CA cannot be used. */
static int judge(const struct wh_selfsign *s, const struct pems *p, long *ret_end, bool *ret_usable,
                 bool *ret_fresh, char *err, size_t errlen) {
  X509 *ca = p->ca_crt ? read_cert(p->ca_crt) : NULL, *x = NULL;
  EVP_PKEY *ca_key = p->ca_key ? read_key(p->ca_key) : NULL, *key = NULL;
  const char *why = NULL;
  long now = (long)time(NULL);

  if (!ca || !ca_key)
    why = "its ca.crt or ca.key is missing or not PEM (a Secret gslice-webhook did not make?)";
  else if (X509_check_private_key(ca, ca_key) != 1)
    why = "its ca.key is not the key of its ca.crt";
  else if (cert_end(ca) < now + WH_RENEW_BEFORE_S)
    why = "its CA ends within 30 days (or has ended)";
  if (why) {
    snprintf(err, errlen,
             "Secret %s: %s; delete it (kubectl -n NS delete secret %s) and restart "
             "gslice-webhook to have a new CA made",
             s->path, why, s->name);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    return -EINVAL;
  }
  *ret_usable = *ret_fresh = false;
  *ret_end = 0;
  if (p->tls_crt && p->tls_key && (x = read_cert(p->tls_crt)) && (key = read_key(p->tls_key))) {
    *ret_end = cert_end(x);
    *ret_usable = X509_check_private_key(x, key) == 1 && X509_verify(x, ca_key) == 1 &&
                  X509_check_host(x, s->service, 0, X509_CHECK_FLAG_NO_WILDCARDS, NULL) == 1 &&
                  *ret_end > now + 60;
    *ret_fresh = *ret_usable && *ret_end >= now + WH_RENEW_BEFORE_S;
  }
  X509_free(ca);
  X509_free(x);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(key);
  return 0;
}

/* ---- the Secret ------------------------------------------------------------------------- */

static int secret_read(const json_t *obj, struct pems *p) {
  const json_t *data = json_object_get(obj, "data");
  pems_free(p);
  p->ca_crt = unb64(data, "ca.crt");
  p->ca_key = unb64(data, "ca.key");
  p->tls_crt = unb64(data, "tls.crt");
  p->tls_key = unb64(data, "tls.key");
  return 0;
}

/* The Secret's JSON (rv NULL: none given), or NULL without memory. */
static json_t *secret_json(const struct wh_selfsign *s, const struct pems *p, const char *rv) {
  char *v[4] = {b64(p->ca_crt), b64(p->ca_key), b64(p->tls_crt), b64(p->tls_key)};
  json_t *obj = NULL;
  if (v[0] && v[1] && v[2] && v[3])
    obj = json_pack("{s:s, s:s, s:{s:s, s:{s:s}, s:s*}, s:s, s:{s:s, s:s, s:s, s:s}}", "apiVersion",
                    "v1", "kind", "Secret", "metadata", "name", s->name, "labels",
                    "app.kubernetes.io/name", "gslice-webhook", "resourceVersion", rv, "type",
                    "kubernetes.io/tls", "data", "ca.crt", v[0], "ca.key", v[1], "tls.crt", v[2],
                    "tls.key", v[3]);
  for (int i = 0; i < 4; i++) {
    if (v[i])
      OPENSSL_cleanse(v[i], strlen(v[i]));
    free(v[i]);
  }
  return obj;
}

/* Creates (create) or replaces the Secret at rv with p: 0, -EEXIST on a 409, or an error. */
static int secret_write(struct wh_selfsign *s, const struct pems *p, bool create, const char *rv,
                        char *err, size_t errlen) {
  json_t *obj = secret_json(s, p, rv);
  int rc;
  if (!obj)
    return -ENOMEM;
  rc = !create ? kube_put(s->k, s->path, obj, NULL, err, errlen)
               : kube_post(s->k, s->coll, obj, NULL, err, errlen);
  json_object_clear(obj); /* the keys' base64 copies */
  json_decref(obj);
  return rc;
}

/* ---- the files -------------------------------------------------------------------------- */

static int write_files(struct wh_selfsign *s, const struct pems *p, char *err, size_t errlen) {
  /* The key first: the server takes a pair only when the two match (httpd.h). */
  static const char *const names[3] = {"tls.key", "tls.crt", "ca.crt"};
  const char *data[3] = {p->tls_key, p->tls_crt, p->ca_crt};
  for (int i = 0; i < 3; i++) {
    int rc = gs_file_write_atomic(s->dirfd, names[i], data[i], strlen(data[i]), 0600);
    if (rc) {
      snprintf(err, errlen, "writing %s/%s: %s", s->dir, names[i], strerror(-rc));
      return rc;
    }
  }
  return 0;
}

/* One round: 0 done, -EEXIST a 409 (go again), -EAGAIN the renewal not written but the
 * Secret's pair still usable (written to the files: err says why), else an error. */
static int round_once(struct wh_selfsign *s, struct pems *p, bool *ret_renewed, char *err,
                      size_t errlen) {
  json_t *obj = NULL;
  bool fresh = false, usable = false;
  long end = 0;
  int rc = kube_get(s->k, s->path, &obj, err, errlen), kept = 0;

  if (rc == -ENOENT) {
    if ((rc = make_all(p, s->service)) || (rc = secret_write(s, p, true, NULL, err, errlen)))
      return rc; /* -EEXIST: another replica made it first */
    *ret_renewed = true;
  } else if (rc) {
    return rc;
  } else {
    const char *rv = kube_meta_str(obj, "resourceVersion");
    secret_read(obj, p);
    if ((rc = judge(s, p, &end, &usable, &fresh, err, errlen)) == 0 && !fresh) {
      if (!(rc = issue(p, s->service)) && !(rc = secret_write(s, p, false, rv, err, errlen)))
        *ret_renewed = true;
      else if (rc != -EEXIST && usable) { /* serve the old pair meanwhile */
        secret_read(obj, p);
        kept = -EAGAIN;
      }
    }
    json_decref(obj);
    if (rc && !kept)
      return rc;
  }
  char jerr[512]; /* err keeps the failed renewal's reason */
  if ((rc = judge(s, p, &end, &usable, &fresh, jerr, sizeof jerr))) {
    snprintf(err, errlen, "%s", jerr);
    return rc;
  }
  if ((rc = write_files(s, p, err, errlen)))
    return rc;
  s->not_after = end;
  return kept;
}

int wh_selfsign_run(struct wh_selfsign *s, bool *ret_renewed, char *err, size_t errlen) {
  struct pems p = {0};
  int rc = -EEXIST;
  *ret_renewed = false;
  for (int i = 0; i < TRIES && rc == -EEXIST; i++)
    rc = round_once(s, &p, ret_renewed, err, errlen);
  if (rc == -ENOMEM)
    snprintf(err, errlen, "out of memory making the certificates");
  else if (rc == -EEXIST)
    snprintf(err, errlen, "Secret %s: changed by another writer %d times in a row", s->path, TRIES);
  pems_free(&p);
  return rc;
}

bool wh_selfsign_due(const struct wh_selfsign *s, long now) {
  return s->not_after == 0 || now + WH_RENEW_BEFORE_S > s->not_after;
}

struct wh_selfsign_files wh_selfsign_files(const struct wh_selfsign *s) {
  return (struct wh_selfsign_files){s->cert, s->key, s->ca};
}

/* ---- setting up ------------------------------------------------------------------------- */

/* A DNS subdomain (a Secret's name, a namespace, a Service's DNS name). */
static bool dns_name(const char *n) {
  size_t len = strlen(n);
  return len > 0 && len <= 253 && strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-.") == len &&
         n[0] != '-' && n[0] != '.' && n[len - 1] != '-' && n[len - 1] != '.' && !strstr(n, "..");
}

int wh_selfsign_new(const struct wh_selfsign_cfg *cfg, struct wh_selfsign **ret, char *err,
                    size_t errlen) {
  struct wh_selfsign *s;
  int rc;
  const char *flags[3] = {"--self-signed-secret", "--namespace", "--service-name"};
  const char *vals[3] = {cfg->secret, cfg->ns, cfg->service};
  for (int i = 0; i < 3; i++)
    if (!dns_name(vals[i])) {
      snprintf(err, errlen, "%s \"%s\" is not a DNS name (lower-case letters, digits, '-', '.')",
               flags[i], vals[i]);
      return -EINVAL;
    }
  if (!(s = calloc(1, sizeof(*s))))
    return -ENOMEM;
  s->dirfd = -1;
  if (asprintf(&s->coll, "/api/v1/namespaces/%s/secrets", cfg->ns) < 0 ||
      asprintf(&s->path, "%s/%s", s->coll, cfg->secret) < 0 ||
      asprintf(&s->cert, "%s/tls.crt", cfg->dir) < 0 ||
      asprintf(&s->key, "%s/tls.key", cfg->dir) < 0 ||
      asprintf(&s->ca, "%s/ca.crt", cfg->dir) < 0 || !(s->name = strdup(cfg->secret)) ||
      !(s->service = strdup(cfg->service)) || !(s->dir = strdup(cfg->dir))) {
    wh_selfsign_free(s);
    return -ENOMEM;
  }
  if ((s->dirfd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
    rc = -errno;
    snprintf(err, errlen, "the certificate directory %s: %s", cfg->dir, strerror(-rc));
    wh_selfsign_free(s);
    return rc;
  }
  if ((rc = kube_open(cfg->kubeconfig, &s->k, err, errlen))) {
    wh_selfsign_free(s);
    return rc;
  }
  *ret = s;
  return 0;
}

void wh_selfsign_free(struct wh_selfsign *s) {
  if (!s)
    return;
  kube_close(s->k);
  if (s->dirfd >= 0)
    close(s->dirfd);
  free(s->coll);
  free(s->path);
  free(s->name);
  free(s->service);
  free(s->dir);
  free(s->cert);
  free(s->key);
  free(s->ca);
  free(s);
}
