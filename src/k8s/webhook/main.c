/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook: the mutating admission webhook that sends every pod asking for gslice.io
 * resources to gslice-scheduler, and denies at creation one whose request gslice-extender
 * could never place (docs/kubernetes.md, "The admission webhook"). Flags, then the server. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "cabundle.h"
#include "fileio.h"
#include "httpd.h"
#include "kube.h"
#include "log.h"
#include "progmain.h"
#include "proto.h"
#include "selfsign.h"
#include "serve.h"
#include "words.h"

static const char usage[] =
    "usage: gslice-webhook [--listen [HOST:]PORT] --tls-cert FILE --tls-key FILE\n"
    "                      [--kubeconfig FILE] [--request-timeout SECS]\n"
    "                      [--ca-bundle-from FILE --webhook-config NAME]\n"
    "   or: gslice-webhook [--listen [HOST:]PORT] --self-signed-secret NAME\n"
    "                      --webhook-config NAME [--service-name DNSNAME]\n"
    "                      [--namespace NS] [--kubeconfig FILE] ...\n"
    "                      [--max-connections-per-ip N]\n"
    "                      [--priority-class NAME=high|normal|low[:weight=N][:limit=P]]...\n"
    "\n"
    "The mutating admission webhook of gslice (AdmissionReview v1): a pod created with\n"
    "gslice.io/gpu, gslice.io/gpu-memory or gslice.io/gpu-compute in any container's\n"
    "requests or limits gets spec.schedulerName " WH_SCHEDULER " (a JSONPatch); one whose\n"
    "request gslice-extender would refuse is denied with the extender's message, as is one\n"
    "naming a scheduler other than default-scheduler or " WH_SCHEDULER ". Anything else\n"
    "is allowed unchanged.\n"
    "\n"
    "  --listen [HOST:]PORT  where POST /mutate and GET /healthz are served over HTTPS\n"
    "                        (default 8443, all IPv4 addresses; port 0 picks a free one,\n"
    "                        logged at start)\n"
    "  --tls-cert FILE, --tls-key FILE\n"
    "                        the PEM certificate (its name the Service's DNS name, signed\n"
    "                        by the caBundle of the MutatingWebhookConfiguration) and key;\n"
    "                        required: the API server calls webhooks over HTTPS only.\n"
    "                        Read again when they change (a renewal), checked every 5 s\n"
    "  --ca-bundle-from FILE, --webhook-config NAME\n"
    "                        keep the caBundle of every webhook of the\n"
    "                        MutatingWebhookConfiguration NAME equal to FILE (the PEM CA\n"
    "                        that signed --tls-cert), written at start and when FILE\n"
    "                        changes (checked every 5 s): for certificates that are not\n"
    "                        cert-manager's. Needs get and update of that object\n"
    "  --self-signed-secret NAME\n"
    "                        instead of --tls-cert and --tls-key: the certificates made\n"
    "                        at start, kept in the kubernetes.io/tls Secret NAME of the\n"
    "                        namespace that every replica shares (made by the first:\n"
    "                        a CA, EC P-256 for 10 years, ca.crt and ca.key; a serving\n"
    "                        certificate from it for 1 year, tls.crt and tls.key,\n"
    "                        renewed from the same CA within 30 days of its end), and\n"
    "                        the CA written into the caBundle of --webhook-config NAME\n"
    "                        (required with it). Needs get, create and update of the\n"
    "                        Secret; the files go to a private directory in $TMPDIR\n"
    "  --service-name DNSNAME\n"
    "                        the name the serving certificate is for (default\n"
    "                        gslice-webhook.NS.svc; also DNSNAME.cluster.local)\n"
    "  --namespace NS        the Secret's namespace (default: the service account's,\n"
    "                        " KUBE_SA_DIR "/namespace)\n"
    "  --kubeconfig FILE     reach the API server for that write as FILE says (default:\n"
    "                        in-cluster service account); unused without it\n"
    "  --request-timeout SECS\n"
    "                        a peer sends a request's headers and body, or waits idle,\n"
    "                        within SECS or is cut (default 10, 1..300)\n"
    "  --max-connections-per-ip N\n"
    "                        connections one address may hold (default 32, 1..256)\n"
    "  --priority-class NAME=PRIO[:weight=N][:limit=P]\n"
    "                        the same as gslice-extender's (give both the same): a pod of\n"
    "                        class NAME asking for more compute per GPU than limit P is\n"
    "                        denied, as the extender would refuse it; repeatable\n"
    "  --help                this text\n";

static int bad(const char *fmt, const char *what) {
  return k8s_prog_bad("gslice-webhook", fmt, what);
}

static bool whole(const char *text, unsigned lo, unsigned hi, unsigned *ret) {
  uint64_t v;
  if (gs_uint_parse(text, lo, hi, &v))
    return false;
  *ret = (unsigned)v;
  return true;
}

struct flags {
  struct wh_server_cfg scfg;
  struct wh_cfg review;
  struct podspec_cfg pcfg;
  struct podspec_class classes[64];
  const char *kubeconfig, *ca_file, *config_name;
  const char *secret, *service, *ns;
};

/* One flag (getopt's opt, its value arg) into the struct flags at ctx: 0, or the exit status
 * of a refusal. */
static int flag(void *ctx, int opt, char *arg) {
  struct flags *f = ctx;
  char host[256], perr[K8S_ERR_MAX], lerr[320];
  uint16_t port;

  switch (opt) {
  case 'l':
    if (httpd_listen_parse(arg, host, sizeof host, &port, lerr, sizeof lerr))
      return bad("--listen %s (e.g. 8443 or 127.0.0.1:8443)", lerr);
    f->scfg.listen = arg;
    return 0;
  case 'C': f->scfg.tls_cert = arg; return 0;
  case 'Y': f->scfg.tls_key = arg; return 0;
  case 'k': f->kubeconfig = arg; return 0;
  case 'F': f->ca_file = arg; return 0;
  case 'W': f->config_name = arg; return 0;
  case 'S': f->secret = arg; return 0;
  case 'V': f->service = arg; return 0;
  case 'n': f->ns = arg; return 0;
  case 'T':
    return whole(arg, 1, 300, &f->scfg.request_timeout_s)
               ? 0
               : bad("--request-timeout \"%s\" must be whole seconds, 1..300", arg);
  case 'N':
    return whole(arg, 1, 256, &f->scfg.per_ip_connections)
               ? 0
               : bad("--max-connections-per-ip \"%s\" must be 1..256", arg);
  case 'P':
    if (f->pcfg.nclasses == sizeof f->classes / sizeof f->classes[0])
      return bad("--priority-class \"%s\": at most 64 classes", arg);
    if (podspec_class_parse(arg, &f->classes[f->pcfg.nclasses], perr, sizeof perr))
      return bad("%s", perr);
    f->pcfg.nclasses++;
    return 0;
  }
  return 2;
}

/* --self-signed-secret's flags: -1 to go on, else 2. */
static int self_signed_flags(const struct flags *f) {
  if (f->scfg.tls_cert || f->scfg.tls_key || f->ca_file)
    return bad("%s: --self-signed-secret makes the certificates itself; give either it (and "
               "--webhook-config NAME) or --tls-cert FILE --tls-key FILE [--ca-bundle-from "
               "FILE --webhook-config NAME], not both",
               f->scfg.tls_cert  ? "--tls-cert"
               : f->scfg.tls_key ? "--tls-key"
                                 : "--ca-bundle-from");
  if (!f->config_name)
    return bad("%s: --self-signed-secret needs --webhook-config NAME (the "
               "MutatingWebhookConfiguration whose caBundle is its CA)",
               "--webhook-config");
  return -1;
}

static void help(void) {
  fputs(usage, stdout);
}

/* The flags: -1 to go on, else the exit status (0 after --help). */
static int parse(int argc, char **argv, struct flags *f) {
  static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                       {"tls-cert", required_argument, NULL, 'C'},
                                       {"tls-key", required_argument, NULL, 'Y'},
                                       {"kubeconfig", required_argument, NULL, 'k'},
                                       {"ca-bundle-from", required_argument, NULL, 'F'},
                                       {"webhook-config", required_argument, NULL, 'W'},
                                       {"request-timeout", required_argument, NULL, 'T'},
                                       {"max-connections-per-ip", required_argument, NULL, 'N'},
                                       {"priority-class", required_argument, NULL, 'P'},
                                       {"self-signed-secret", required_argument, NULL, 'S'},
                                       {"service-name", required_argument, NULL, 'V'},
                                       {"namespace", required_argument, NULL, 'n'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int rc = k8s_prog_parse("gslice-webhook", argc, argv, opts, help, flag, f);

  if (rc >= 0)
    return rc;
  if (f->secret)
    return self_signed_flags(f);
  if (f->service || f->ns)
    return bad("%s goes with --self-signed-secret NAME only",
               f->service ? "--service-name" : "--namespace");
  if (!f->scfg.tls_cert || !f->scfg.tls_key)
    return bad("%s: --tls-cert FILE and --tls-key FILE are required (the API server calls "
               "admission webhooks over HTTPS only)",
               f->scfg.tls_cert ? "--tls-key" : "--tls-cert");
  if (!f->ca_file != !f->config_name)
    return bad("%s: --ca-bundle-from FILE and --webhook-config NAME go together",
               f->ca_file ? "--ca-bundle-from" : "--webhook-config");
  return -1;
}

/* One look at the CA file: the caBundle written when it changed. A failure is logged once
 * until its message changes, and tried again at the next look. */
static void ca_sync(struct wh_ca_sync *cs, const char *name, char *last_err, size_t errlen) {
  char err[512] = "";
  bool wrote = false;
  if (!cs)
    return;
  if (wh_ca_sync_run(cs, &wrote, err, sizeof err)) {
    if (strcmp(err, last_err) != 0)
      gs_log(GS_LOG_WARNING, "the caBundle of %s is not written: %s (tried again every 5 s)", name,
             err);
    snprintf(last_err, errlen, "%s", err);
    return;
  }
  last_err[0] = 0;
  if (wrote)
    gs_log(GS_LOG_INFO, "wrote the caBundle of MutatingWebhookConfiguration %s", name);
}

/* --self-signed-secret: the state of the certificates made at start. */
struct selfsigned {
  struct wh_selfsign *ss;
  char dir[256], ns[256], service[320];
  long next_try; /* after a failed renewal, the next one no sooner than this */
  char last_err[512];
};

/* The namespace: --namespace, else the service account's. 0, or -1 with err saying why. */
static int own_namespace(const struct flags *f, char *ns, size_t len, char *err, size_t errlen) {
  char *text = NULL;
  int rc;
  if (f->ns) {
    snprintf(ns, len, "%s", f->ns);
    return 0;
  }
  rc = gs_file_read(AT_FDCWD, KUBE_SA_DIR "/namespace", GS_FILE_REGULAR, 256, &text, NULL);
  if (rc || !text[0]) {
    snprintf(err, errlen,
             "--self-signed-secret: no --namespace NS given and %s/namespace: %s (mount the "
             "service account's token, or give --namespace)",
             KUBE_SA_DIR, rc ? strerror(-rc) : "is empty");
    free(text);
    return -1;
  }
  text[strcspn(text, "\n")] = 0;
  snprintf(ns, len, "%s", text);
  free(text);
  return 0;
}

/* The Secret read or made, its pair written into a private directory: 0, or -1 with err. */
static int selfsigned_start(const struct flags *f, struct selfsigned *st, char *err,
                            size_t errlen) {
  const char *tmp = getenv("TMPDIR");
  bool made;
  if (own_namespace(f, st->ns, sizeof st->ns, err, errlen))
    return -1;
  snprintf(st->service, sizeof st->service, "%s", f->service ? f->service : "");
  if (!f->service)
    snprintf(st->service, sizeof st->service, "gslice-webhook.%s.svc", st->ns);
  snprintf(st->dir, sizeof st->dir, "%s/gslice-webhook.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(st->dir)) { /* mode 0700 */
    snprintf(err, errlen,
             "--self-signed-secret: making a private directory in %s: %s (give "
             "a writable TMPDIR, e.g. an emptyDir)",
             tmp && tmp[0] ? tmp : "/tmp", strerror(errno));
    st->dir[0] = 0;
    return -1;
  }
  struct wh_selfsign_cfg c = {f->kubeconfig, st->ns, f->secret, st->service, st->dir};
  if (wh_selfsign_new(&c, &st->ss, err, errlen))
    return -1;
  int rc = wh_selfsign_run(st->ss, &made, err, errlen);
  if (rc == -EAGAIN) { /* the Secret's pair, near its end, served until a renewal is written */
    gs_log(GS_LOG_WARNING,
           "the serving certificate is not renewed: %s (serving the Secret's, "
           "tried again every minute)",
           err);
    snprintf(st->last_err, sizeof st->last_err, "%s", err);
    st->next_try = (long)time(NULL) + 60;
    return 0;
  }
  if (rc)
    return -1;
  gs_log(GS_LOG_INFO, "%s the serving certificate for %s in Secret %s/%s", made ? "made" : "read",
         st->service, st->ns, f->secret);
  return 0;
}

/* The reload tick: a serving certificate near its end renewed (after a failure, once a minute
 * at most, logged once until its message changes). */
static void selfsigned_tick(struct selfsigned *st) {
  char err[512] = "";
  long now = (long)time(NULL);
  bool made;
  if (!st->ss || !wh_selfsign_due(st->ss, now) || now < st->next_try)
    return;
  if (wh_selfsign_run(st->ss, &made, err, sizeof err)) { /* -EAGAIN: the old pair served */
    if (strcmp(err, st->last_err) != 0)
      gs_log(GS_LOG_WARNING,
             "the serving certificate is not renewed: %s (tried again every "
             "minute)",
             err);
    snprintf(st->last_err, sizeof st->last_err, "%s", err);
    st->next_try = now + 60;
    return;
  }
  st->last_err[0] = 0;
  gs_log(GS_LOG_INFO, "%s a renewed serving certificate for %s", made ? "made" : "read",
         st->service);
}

static void selfsigned_end(struct selfsigned *st) {
  static const char *const names[] = {"tls.key", "tls.crt", "ca.crt"};
  wh_selfsign_free(st->ss);
  if (!st->dir[0])
    return;
  int dfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  for (size_t i = 0; dfd >= 0 && i < sizeof names / sizeof names[0]; i++)
    unlinkat(dfd, names[i], 0);
  if (dfd >= 0)
    close(dfd);
  rmdir(st->dir);
}

int main(int argc, char **argv) {
  static struct flags f = {.scfg = {.listen = "8443", .log = true},
                           .pcfg = {.policy = PLACE_BINPACK}};
  static struct selfsigned st;
  char err[512];
  struct wh_server *s = NULL;
  struct wh_ca_sync *cs = NULL;
  char last_err[512] = "";
  sigset_t sigs;
  int rc, sig;

  if ((rc = parse(argc, argv, &f)) >= 0)
    return rc;
  f.pcfg.classes = f.classes;
  f.review = (struct wh_cfg){.scheduler = WH_SCHEDULER, .pod = &f.pcfg};
  f.scfg.review = &f.review;
  gs_log_open("gslice-webhook", GS_LOG_INFO);
  k8s_prog_signals(&sigs); /* before any thread: they inherit the mask */
  if (f.secret) {
    if (selfsigned_start(&f, &st, err, sizeof err)) {
      gs_log(GS_LOG_ERROR,
             "%s (--self-signed-secret reads or makes its certificates at start: it needs the "
             "API server, and get, create and update of that Secret)",
             err);
      selfsigned_end(&st);
      return 1;
    }
    struct wh_selfsign_files files = wh_selfsign_files(st.ss);
    f.scfg.tls_cert = files.cert;
    f.scfg.tls_key = files.key;
    f.ca_file = files.ca;
  }
  if (f.ca_file &&
      (rc = wh_ca_sync_new(f.kubeconfig, f.ca_file, f.config_name, &cs, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    selfsigned_end(&st);
    return 1;
  }
  if ((rc = wh_server_start(&f.scfg, &s, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    wh_ca_sync_free(cs);
    selfsigned_end(&st);
    return 1;
  }
  gs_log(GS_LOG_INFO, "listening on port %u (https), scheduler %s, %zu priority class(es)%s%s",
         wh_server_port(s), WH_SCHEDULER, f.pcfg.nclasses, cs ? ", caBundle of " : "",
         cs ? f.config_name : "");
  const struct timespec every = {5, 0};
  do {
    selfsigned_tick(&st);
    ca_sync(cs, f.config_name, last_err, sizeof last_err);
  } while ((sig = sigtimedwait(&sigs, NULL, &every)) < 0);
  gs_log(GS_LOG_INFO, "%s, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  wh_server_stop(s);
  wh_ca_sync_free(cs);
  selfsigned_end(&st);
  gs_log_flush();
  return 0;
}
