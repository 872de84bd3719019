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

#include "cabundle.h"
#include "httpd.h"
#include "log.h"
#include "proto.h"
#include "serve.h"
#include "words.h"

static const char usage[] =
    "usage: gslice-webhook [--listen [HOST:]PORT] --tls-cert FILE --tls-key FILE\n"
    "                      [--kubeconfig FILE] [--request-timeout SECS]\n"
    "                      [--ca-bundle-from FILE --webhook-config NAME]\n"
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
  fprintf(stderr, "gslice-webhook: ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n(gslice-webhook --help shows the usage)\n");
  return 2;
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
};

static int flag(struct flags *f, int opt, char *arg) {
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
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int opt, rc;

  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage, stdout);
      return 0;
    }
    if (opt == ':')
      return bad("%s needs a value", argv[optind - 1]);
    if (opt == '?')
      return bad("unknown option \"%s\"", argv[optind - 1]);
    if ((rc = flag(f, opt, optarg)))
      return rc;
  }
  if (optind < argc)
    return bad("unexpected argument \"%s\"", argv[optind]);
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

int main(int argc, char **argv) {
  static struct flags f = {.scfg = {.listen = "8443", .log = true},
                           .pcfg = {.policy = PLACE_BINPACK}};
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
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* before any thread: they inherit the mask */
  signal(SIGPIPE, SIG_IGN);
  if (f.ca_file &&
      (rc = wh_ca_sync_new(f.kubeconfig, f.ca_file, f.config_name, &cs, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return 1;
  }
  if ((rc = wh_server_start(&f.scfg, &s, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    wh_ca_sync_free(cs);
    return 1;
  }
  gs_log(GS_LOG_INFO, "listening on port %u (https), scheduler %s, %zu priority class(es)%s%s",
         wh_server_port(s), WH_SCHEDULER, f.pcfg.nclasses, cs ? ", caBundle of " : "",
         cs ? f.config_name : "");
  const struct timespec every = {5, 0};
  do
    ca_sync(cs, f.config_name, last_err, sizeof last_err);
  while ((sig = sigtimedwait(&sigs, NULL, &every)) < 0);
  gs_log(GS_LOG_INFO, "%s, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  wh_server_stop(s);
  wh_ca_sync_free(cs);
  gs_log_flush();
  return 0;
}
