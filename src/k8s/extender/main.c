/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-extender: the kube-scheduler extender that places gslice slices on GPUs
 * (docs/kubernetes.md). Flags (parse, then check), the process's settings, and wiring of the
 * watch and the server. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cluster.h"
#include "event.h"
#include "httpd.h"
#include "log.h"
#include "progmain.h"
#include "proto.h"
#include "server.h"
#include "sign.h"
#include "watch.h"

static const char usage[] =
    "usage: gslice-extender [--listen [HOST:]PORT] [--kubeconfig FILE]\n"
    "                       [--policy binpack|spread] [--node-timeout SECS]\n"
    "                       [--lease-namespace NS]\n"
    "                       [--tls-cert FILE --tls-key FILE [--client-ca FILE]]\n"
    "                       [--insecure-listen] [--metrics-listen [HOST:]PORT|off]\n"
    "                       [--scheduler-name NAME[,NAME]]... [--request-timeout SECS]\n"
    "                       [--max-connections-per-ip N]\n"
    "                       [--signing-key FILE [--signing-key FILE]]\n"
    "                       [--priority-class NAME=high|normal|low[:weight=N][:limit=P]]...\n"
    "\n"
    "The kube-scheduler extender of gslice: places pods that ask for gslice.io/gpu,\n"
    "gslice.io/gpu-memory and gslice.io/gpu-compute on a node and GPUs where they fit,\n"
    "and binds them with their gslice.io/assigned annotation.\n"
    "\n"
    "  --listen [HOST:]PORT  where the verbs are served: default 127.0.0.1:8765 (for\n"
    "                        a sidecar of kube-scheduler), 8765 (all IPv4 addresses)\n"
    "                        with --client-ca; port 0 picks a free one, logged at start\n"
    "  --tls-cert FILE, --tls-key FILE\n"
    "                        serve the verbs over HTTPS with this PEM certificate and key\n"
    "  --client-ca FILE      and only to peers whose client certificate these PEM CA\n"
    "                        certificates signed (kube-scheduler's extender tlsConfig);\n"
    "                        others are refused in the TLS handshake\n"
    "  --insecure-listen     allow the verbs on an address other than loopback without\n"
    "                        --client-ca: anyone who reaches it can bind pods\n"
    "  --metrics-listen [HOST:]PORT|off\n"
    "                        GET /metrics, /healthz (503 until the first sync), /livez,\n"
    "                        plain HTTP (default 8766, all IPv4 addresses)\n"
    "  --scheduler-name NAME /bind takes only pods whose spec.schedulerName is NAME\n"
    "                        (repeatable, or a comma list; default default-scheduler)\n"
    "  --request-timeout SECS\n"
    "                        a peer sends a request's headers and body, or waits idle,\n"
    "                        within SECS or is cut (default 10, 1..300)\n"
    "  --max-connections-per-ip N\n"
    "                        connections one address may hold on the verbs listener\n"
    "                        (default 32, 1..256)\n"
    "  --kubeconfig FILE     reach the API server as FILE says (default: in-cluster\n"
    "                        service account)\n"
    "  --policy P            binpack (default: fill used GPUs first, keep whole GPUs\n"
    "                        free) or spread (emptiest GPU first); a pod may choose\n"
    "                        with the annotation gslice.io/policy\n"
    "  --node-timeout SECS   a node whose gslice-node heartbeat is older is out of\n"
    "                        placement (default 60)\n"
    "  --lease-namespace NS  where gslice-node renews each node's liveness Lease\n"
    "                        gslice-node-<node> (default gslice-system); a node without\n"
    "                        one is judged by its gslice.io/gpus heartbeat\n"
    "  --signing-key FILE    the key that signs each assignment (HMAC-SHA256, the\n"
    "                        gslice.io/assigned-signature annotation); given twice, the\n"
    "                        first signs and both verify (rotation). Default\n"
    "                        /etc/gslice/signing/key, and /etc/gslice/signing/previous\n"
    "                        when it exists. A file of 32 bytes or more, not readable\n"
    "                        by others; gslice-node mounts the same Secret\n"
    "  --priority-class NAME=PRIO[:weight=N][:limit=P]\n"
    "                        pods of PriorityClass NAME get gslice priority PRIO (high,\n"
    "                        normal, low), weight N (%u..%u, default %u) and compute\n"
    "                        ceiling P%% (1..%u, default %u) at most; repeatable.\n"
    "                        Other pods: normal, 1, 100. The annotations\n"
    "                        gslice.io/priority, weight, compute-limit only lower them\n"
    "  --help                this text\n"
    "\n"
    "Serves POST /filter, /prioritize, /bind (nodeCacheCapable: true) on --listen and\n"
    "GET /metrics, /healthz, /livez on --metrics-listen. See deploy/ for the\n"
    "KubeSchedulerConfiguration.\n";

/* A whole number in lo..hi, or false. */
static bool whole(const char *text, unsigned long lo, unsigned long hi, unsigned *ret) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(text, &end, 10);
  if (!*text || *end || errno || v < lo || v > hi || text[0] == '-' || text[0] == '+')
    return false;
  *ret = (unsigned)v;
  return true;
}

static int bad(const char *fmt, const char *what) {
  return k8s_prog_bad("gslice-extender", fmt, what);
}

/* What the flags say. */
struct flags {
  struct cluster_cfg ccfg;
  struct ext_server_cfg scfg;
  const char *listen_at, *kubeconfig, *metrics_at, *lease_ns;
  const char *key_paths[K8S_SIGN_MAX_KEYS];
  size_t nkeys;
  struct podspec_class classes[64];
  const char *sched_names[16];
  size_t nsched;
};

static int flag_scheduler_names(struct flags *f, char *arg) {
  if (!*arg || strspn(arg, ",") == strlen(arg))
    return bad("--scheduler-name \"%s\" names no scheduler", arg);
  for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
    if (f->nsched == sizeof f->sched_names / sizeof f->sched_names[0])
      return bad("--scheduler-name \"%s\": at most 16 names", tok);
    if (!*tok || strlen(tok) >= K8S_NAME_MAX)
      return bad("--scheduler-name \"%s\" is not a scheduler name", tok);
    f->sched_names[f->nsched++] = tok;
  }
  return 0;
}

static int flag_priority_class(struct flags *f, const char *arg) {
  char perr[K8S_ERR_MAX];
  if (f->ccfg.nclasses == sizeof f->classes / sizeof f->classes[0])
    return bad("--priority-class \"%s\": at most 64 classes", arg);
  if (podspec_class_parse(arg, &f->classes[f->ccfg.nclasses], perr, sizeof perr))
    return bad("%s", perr);
  f->ccfg.classes = f->classes;
  f->ccfg.nclasses++;
  return 0;
}

/* One flag (getopt's opt, its value arg) into the struct flags at ctx: 0, or the exit status
 * of a refusal. */
static int flag(void *ctx, int opt, char *arg) {
  struct flags *f = ctx;
  char host[256], perr[320];
  uint16_t port;
  unsigned secs;

  switch (opt) {
  case 'l':
    if (httpd_listen_parse(arg, host, sizeof host, &port, perr, sizeof perr))
      return bad("--listen %s (e.g. 8765 or 127.0.0.1:8765)", perr);
    f->listen_at = arg;
    return 0;
  case 'k': f->kubeconfig = arg; return 0;
  case 'p':
    if (place_policy_parse(arg, &f->ccfg.policy))
      return bad("--policy \"%s\": use binpack or spread", arg);
    return 0;
  case 't':
    if (!whole(arg, 1, 86400, &secs))
      return bad("--node-timeout \"%s\" must be whole seconds, 1..86400", arg);
    f->ccfg.node_timeout_ms = secs * 1000ull;
    return 0;
  case 'K':
    if (f->nkeys == K8S_SIGN_MAX_KEYS)
      return bad("--signing-key \"%s\": at most two (the new key, then the old one)", arg);
    f->key_paths[f->nkeys++] = arg;
    return 0;
  case 'P': return flag_priority_class(f, arg);
  case 'L':
    if (!*arg || strlen(arg) > 63 ||
        strspn(arg, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(arg))
      return bad("--lease-namespace \"%s\" is not a namespace name", arg);
    f->lease_ns = arg;
    return 0;
  case 'C': f->scfg.tls_cert = arg; return 0;
  case 'Y': f->scfg.tls_key = arg; return 0;
  case 'A': f->scfg.client_ca = arg; return 0;
  case 'I': f->scfg.insecure_listen = true; return 0;
  case 'M':
    if (strcmp(arg, "off") != 0 && httpd_listen_parse(arg, host, sizeof host, &port, NULL, 0))
      return bad("--metrics-listen \"%s\" is not [HOST:]PORT or off", arg);
    f->metrics_at = strcmp(arg, "off") == 0 ? NULL : arg;
    return 0;
  case 'S': return flag_scheduler_names(f, arg);
  case 'T':
    if (!whole(arg, 1, 300, &f->scfg.request_timeout_s))
      return bad("--request-timeout \"%s\" must be whole seconds, 1..300", arg);
    return 0;
  case 'N':
    if (!whole(arg, 1, 256, &f->scfg.per_ip_connections))
      return bad("--max-connections-per-ip \"%s\" must be 1..256", arg);
    return 0;
  }
  return 2;
}

static void help(void) {
  printf(usage, GS_WEIGHT_MIN, GS_WEIGHT_MAX, GS_WEIGHT_MIN, GS_PERCENT_MAX, GS_PERCENT_MAX);
}

/* The flags: -1 to go on, else the exit status (0 after --help). */
static int parse(int argc, char **argv, struct flags *f) {
  static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                       {"kubeconfig", required_argument, NULL, 'k'},
                                       {"policy", required_argument, NULL, 'p'},
                                       {"node-timeout", required_argument, NULL, 't'},
                                       {"lease-namespace", required_argument, NULL, 'L'},
                                       {"signing-key", required_argument, NULL, 'K'},
                                       {"priority-class", required_argument, NULL, 'P'},
                                       {"tls-cert", required_argument, NULL, 'C'},
                                       {"tls-key", required_argument, NULL, 'Y'},
                                       {"client-ca", required_argument, NULL, 'A'},
                                       {"insecure-listen", no_argument, NULL, 'I'},
                                       {"metrics-listen", required_argument, NULL, 'M'},
                                       {"scheduler-name", required_argument, NULL, 'S'},
                                       {"request-timeout", required_argument, NULL, 'T'},
                                       {"max-connections-per-ip", required_argument, NULL, 'N'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  return k8s_prog_parse("gslice-extender", argc, argv, opts, help, flag, f);
}

/* The flags together: -1 to go on, else the exit status. */
static int check(struct flags *f) {
  struct ext_server_cfg *scfg = &f->scfg;
  if (!scfg->tls_cert != !scfg->tls_key)
    return bad("%s: --tls-cert and --tls-key go together",
               scfg->tls_cert ? "--tls-cert" : "--tls-key");
  if (scfg->client_ca && !scfg->tls_cert)
    return bad("%s: --client-ca needs --tls-cert and --tls-key", scfg->client_ca);
  if (!f->listen_at)
    f->listen_at = scfg->client_ca ? "8765" : "127.0.0.1:8765";
  if (!scfg->client_ca && !scfg->insecure_listen) {
    char lerr[512];
    int loop = httpd_listen_loopback(f->listen_at, lerr, sizeof lerr);
    if (loop < 0)
      return bad("--listen %s", lerr);
    if (!loop)
      return bad("--listen %s: refusing to serve the verbs off loopback to any peer: give "
                 "--tls-cert, --tls-key and --client-ca (kube-scheduler's client certificate), "
                 "or say --insecure-listen",
                 f->listen_at);
  }
  return -1;
}

/* The process's settings; SIGINT and SIGTERM blocked, for sigwait in *ret_sigs. */
static void process_setup(sigset_t *ret_sigs) {
  /* A large request's buffers are mmapped and unmapped when freed: glibc's sliding
   * threshold would otherwise serve the next ones from the heap and keep them. */
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  /* Up to 1,024 verb and 512 metrics connections, beside the API server's: the soft limit
   * of 1,024 descriptors would refuse connections before the server's own limits do. */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < 8192 &&
      nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max < 8192 ? nofile.rlim_max : 8192;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  k8s_prog_signals(ret_sigs); /* before any thread: they inherit the mask */
}

/* The parts, started in order (each stopped by main when a later one fails). */
struct parts {
  struct k8s_keys keys;
  struct kube *k;
  struct kube *ek; /* the Events' own connection */
  struct kube_events *events;
  struct cluster *c;
  struct ext_watch *w;
  struct verbs *v;
  struct ext_server *s;
};

static int start(struct flags *f, struct parts *p) {
  char err[KUBE_ERR_MAX] = "out of memory";
  int rc;

  if ((rc = kube_open(f->kubeconfig, &p->k, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return rc;
  }
  if ((rc = k8s_keys_load(f->key_paths, f->nkeys, &p->keys, err, sizeof err))) {
    gs_log(GS_LOG_ERROR,
           "%s; every assignment is signed, so a key is needed: make one (openssl rand -hex 32 "
           ">key; kubectl -n gslice-system create secret generic gslice-signing "
           "--from-file=key) and mount it at /etc/gslice/signing as deploy/ does, or give "
           "--signing-key FILE",
           err);
    return rc;
  }
  f->ccfg.keys = &p->keys;
  f->ccfg.lease_namespace = f->lease_ns;
  if ((rc = cluster_new(&f->ccfg, &p->c)))
    return rc;
  if ((rc = ext_watch_start(p->c, f->kubeconfig, f->lease_ns, &p->w, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return rc;
  }
  /* Events go out on a thread and connection of their own: a slow API server never holds up
   * a bind for its Event. */
  if ((rc = kube_open(f->kubeconfig, &p->ek, err, sizeof err)) ||
      (rc = kube_events_new("gslice-extender", "", &p->events)) ||
      (rc = kube_events_start(p->events, p->ek, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return rc;
  }
  struct verbs_cfg vcfg = {.cluster = p->c,
                           .kube = p->k,
                           .log = true,
                           .events = p->events,
                           .scheduler_names = f->nsched ? f->sched_names : NULL,
                           .nscheduler_names = f->nsched};
  if ((rc = verbs_new(&vcfg, &p->v)))
    return rc;
  f->scfg.listen = f->listen_at;
  f->scfg.metrics_listen = f->metrics_at;
  f->scfg.verbs = p->v;
  f->scfg.log = true;
  if ((rc = ext_server_start(&f->scfg, &p->s, err, sizeof err))) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return rc;
  }
  return 0;
}

static void stop(struct parts *p) {
  ext_server_stop(p->s);
  verbs_free(p->v);
  kube_events_stop(p->events);
  kube_events_free(p->events);
  kube_close(p->ek);
  ext_watch_stop(p->w);
  cluster_free(p->c);
  kube_close(p->k);
  k8s_keys_clear(&p->keys);
}

int main(int argc, char **argv) {
  static struct flags f = {.ccfg = {.policy = PLACE_BINPACK, .node_timeout_ms = 60000},
                           .metrics_at = "8766",
                           .lease_ns = "gslice-system"};
  static struct parts p;
  sigset_t sigs;
  int rc, sig;

  if ((rc = parse(argc, argv, &f)) >= 0 || (rc = check(&f)) >= 0)
    return rc;
  gs_log_open("gslice-extender", GS_LOG_INFO);
  process_setup(&sigs);
  if ((rc = start(&f, &p))) {
    stop(&p);
    return 1;
  }
  struct ext_server_cfg *scfg = &f.scfg;
  gs_log(GS_LOG_INFO,
         "listening on port %u (%s), metrics on port %u (policy %s, node timeout %llu s, API "
         "server %s, signing key %s%s%s, %zu priority class(es))",
         ext_server_port(p.s),
         scfg->client_ca  ? "https, client certificates of --client-ca"
         : scfg->tls_cert ? "https, any client"
                          : "http",
         ext_server_metrics_port(p.s), place_policy_name(f.ccfg.policy),
         (unsigned long long)(f.ccfg.node_timeout_ms / 1000), kube_server(p.k), p.keys.key[0].id,
         p.keys.n > 1 ? ", also verifying " : "", p.keys.n > 1 ? p.keys.key[1].id : "",
         f.ccfg.nclasses);
  sigwait(&sigs, &sig);
  gs_log(GS_LOG_INFO, "%s, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  stop(&p);
  gs_log_flush();
  return 0;
}
