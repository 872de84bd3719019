/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-extender: the kube-scheduler extender that places gslice slices on GPUs
 * (docs/kubernetes.md). Flags, signals, and wiring of the watch and the server. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cluster.h"
#include "server.h"
#include "sign.h"
#include "watch.h"

static const char usage[] =
    "usage: gslice-extender [--listen [HOST:]PORT] [--kubeconfig FILE]\n"
    "                       [--policy binpack|spread] [--node-timeout SECS]\n"
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
    "  --signing-key FILE    the key that signs each assignment (HMAC-SHA256, the\n"
    "                        gslice.io/assigned-signature annotation); given twice, the\n"
    "                        first signs and both verify (rotation). Default\n"
    "                        /etc/gslice/signing/key, and /etc/gslice/signing/previous\n"
    "                        when it exists. A file of 32 bytes or more, not readable\n"
    "                        by others; gslice-node mounts the same Secret\n"
    "  --priority-class NAME=PRIO[:weight=N][:limit=P]\n"
    "                        pods of PriorityClass NAME get gslice priority PRIO (high,\n"
    "                        normal, low), weight N (1..1000, default 1) and compute\n"
    "                        ceiling P% (1..100, default 100) at most; repeatable.\n"
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
  fprintf(stderr, "gslice-extender: ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n(gslice-extender --help shows the usage)\n");
  return 2;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                       {"kubeconfig", required_argument, NULL, 'k'},
                                       {"policy", required_argument, NULL, 'p'},
                                       {"node-timeout", required_argument, NULL, 't'},
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
  static struct podspec_class classes[64];
  static struct k8s_keys keys;
  const char *key_paths[K8S_SIGN_MAX_KEYS];
  size_t nkeys = 0;
  struct cluster_cfg ccfg = {.policy = PLACE_BINPACK, .node_timeout_ms = 60000};
  const char *listen_at = NULL, *kubeconfig = NULL, *metrics_at = "8766";
  static const char *sched_names[16];
  size_t nsched = 0;
  struct ext_server_cfg scfg = {0};
  struct verbs *v = NULL;
  char host[256], err[KUBE_ERR_MAX];
  struct cluster *c = NULL;
  struct ext_watch *w = NULL;
  struct ext_server *s = NULL;
  struct kube *k = NULL;
  uint16_t port;
  sigset_t sigs;
  int opt, sig, rc;

  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (opt) {
    case 'l':
      if (ext_listen_parse(optarg, host, sizeof host, &port))
        return bad("--listen \"%s\" is not [HOST:]PORT (e.g. 8765 or 127.0.0.1:8765)", optarg);
      listen_at = optarg;
      break;
    case 'k': kubeconfig = optarg; break;
    case 'p':
      if (place_policy_parse(optarg, &ccfg.policy))
        return bad("--policy \"%s\": use binpack or spread", optarg);
      break;
    case 't': {
      unsigned secs;
      if (!whole(optarg, 1, 86400, &secs))
        return bad("--node-timeout \"%s\" must be whole seconds, 1..86400", optarg);
      ccfg.node_timeout_ms = secs * 1000ull;
      break;
    }
    case 'K':
      if (nkeys == K8S_SIGN_MAX_KEYS)
        return bad("--signing-key \"%s\": at most two (the new key, then the old one)", optarg);
      key_paths[nkeys++] = optarg;
      break;
    case 'P': {
      char perr[K8S_ERR_MAX];
      if (ccfg.nclasses == sizeof classes / sizeof classes[0])
        return bad("--priority-class \"%s\": at most 64 classes", optarg);
      if (podspec_class_parse(optarg, &classes[ccfg.nclasses], perr, sizeof perr))
        return bad("%s", perr);
      ccfg.classes = classes;
      ccfg.nclasses++;
      break;
    }
    case 'C': scfg.tls_cert = optarg; break;
    case 'Y': scfg.tls_key = optarg; break;
    case 'A': scfg.client_ca = optarg; break;
    case 'I': scfg.insecure_listen = true; break;
    case 'M':
      if (strcmp(optarg, "off") == 0) {
        metrics_at = NULL;
        break;
      }
      if (ext_listen_parse(optarg, host, sizeof host, &port))
        return bad("--metrics-listen \"%s\" is not [HOST:]PORT or off", optarg);
      metrics_at = optarg;
      break;
    case 'S':
      if (!*optarg || strspn(optarg, ",") == strlen(optarg))
        return bad("--scheduler-name \"%s\" names no scheduler", optarg);
      for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
        if (nsched == sizeof sched_names / sizeof sched_names[0])
          return bad("--scheduler-name \"%s\": at most 16 names", tok);
        if (!*tok || strlen(tok) >= K8S_NAME_MAX)
          return bad("--scheduler-name \"%s\" is not a scheduler name", tok);
        sched_names[nsched++] = tok;
      }
      break;
    case 'T':
      if (!whole(optarg, 1, 300, &scfg.request_timeout_s))
        return bad("--request-timeout \"%s\" must be whole seconds, 1..300", optarg);
      break;
    case 'N':
      if (!whole(optarg, 1, 256, &scfg.per_ip_connections))
        return bad("--max-connections-per-ip \"%s\" must be 1..256", optarg);
      break;
    case 'h': fputs(usage, stdout); return 0;
    case ':': return bad("%s needs a value", argv[optind - 1]);
    default: return bad("unknown option \"%s\"", argv[optind - 1]);
    }
  }
  if (optind < argc)
    return bad("unexpected argument \"%s\"", argv[optind]);
  if (!scfg.tls_cert != !scfg.tls_key)
    return bad("%s: --tls-cert and --tls-key go together",
               scfg.tls_cert ? "--tls-cert" : "--tls-key");
  if (scfg.client_ca && !scfg.tls_cert)
    return bad("%s: --client-ca needs --tls-cert and --tls-key", scfg.client_ca);
  if (!listen_at)
    listen_at = scfg.client_ca ? "8765" : "127.0.0.1:8765";
  if (!scfg.client_ca && !scfg.insecure_listen) {
    char lerr[512];
    int loop = ext_listen_loopback(listen_at, lerr, sizeof lerr);
    if (loop < 0)
      return bad("--listen %s", lerr);
    if (!loop)
      return bad("--listen %s: refusing to serve the verbs off loopback to any peer: give "
                 "--tls-cert, --tls-key and --client-ca (kube-scheduler's client certificate), "
                 "or say --insecure-listen",
                 listen_at);
  }

  setvbuf(stderr, NULL, _IOLBF, 0);
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
  /* Signals are taken by sigwait below; every thread started after this inherits the mask. */
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  rc = kube_open(kubeconfig, &k, err, sizeof err);
  if (rc) {
    fprintf(stderr, "gslice-extender: %s\n", err);
    return 1;
  }
  rc = k8s_keys_load(key_paths, nkeys, &keys, err, sizeof err);
  if (rc) {
    fprintf(stderr,
            "gslice-extender: %s\ngslice-extender: every assignment is signed, so a key is "
            "needed: make one (openssl rand -hex 32 >key; kubectl -n gslice-system create "
            "secret generic gslice-signing --from-file=key) and mount it at "
            "/etc/gslice/signing as deploy/ does, or give --signing-key FILE\n",
            err);
    rc = 1;
    goto out;
  }
  ccfg.keys = &keys;
  rc = cluster_new(&ccfg, &c);
  if (rc)
    goto out;
  rc = ext_watch_start(c, kubeconfig, stderr, &w, err, sizeof err);
  if (rc) {
    fprintf(stderr, "gslice-extender: %s\n", err);
    goto out;
  }
  struct verbs_cfg vcfg = {.cluster = c,
                           .kube = k,
                           .log = stderr,
                           .scheduler_names = nsched ? sched_names : NULL,
                           .nscheduler_names = nsched};
  rc = verbs_new(&vcfg, &v);
  if (rc)
    goto out;
  scfg.listen = listen_at;
  scfg.metrics_listen = metrics_at;
  scfg.verbs = v;
  scfg.log = stderr;
  rc = ext_server_start(&scfg, &s, err, sizeof err);
  if (rc) {
    fprintf(stderr, "gslice-extender: %s\n", err);
    goto out;
  }
  fprintf(stderr,
          "gslice-extender: listening on port %u (%s), metrics on port %u (policy %s, node "
          "timeout %llu s, API server %s, signing key %s%s%s, %zu priority class(es))\n",
          ext_server_port(s),
          scfg.client_ca  ? "https, client certificates of --client-ca"
          : scfg.tls_cert ? "https, any client"
                          : "http",
          ext_server_metrics_port(s), place_policy_name(ccfg.policy),
          (unsigned long long)(ccfg.node_timeout_ms / 1000), kube_server(k), keys.key[0].id,
          keys.n > 1 ? ", also verifying " : "", keys.n > 1 ? keys.key[1].id : "", ccfg.nclasses);
  sigwait(&sigs, &sig);
  fprintf(stderr, "gslice-extender: %s, stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  rc = 0;
out:
  ext_server_stop(s);
  verbs_free(v);
  ext_watch_stop(w);
  cluster_free(c);
  kube_close(k);
  k8s_keys_clear(&keys);
  return rc ? 1 : 0;
}
