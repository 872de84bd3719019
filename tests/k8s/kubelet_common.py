# SPDX-License-Identifier: Apache-2.0
"""What the two kubelet stand-ins share (kubelet.py: the device plugin API's kubelet;
dra_kubelet.py: the DRA kubelet plugin API's): the container runtime under them and their
control server. What each kubelet says to its plugins stays in its own file.

The runtime: a container is a process with its spec's environment and the runtime's edits over
it (a device plugin's Allocate answer, CDI containerEdits), in its own mount and pid namespaces
(unshare --mount --pid --fork --mount-proc, as root) with real bind mounts of the edits' mounts
under /run, in order of destination depth as containerd and CRI-O mount, read_only honoured,
over a fresh tmpfs on /run. Mounts outside /run (the hook, /etc/ld.so.preload) are not made:
the libraries /etc/ld.so.preload names become LD_PRELOAD of their host paths. Without
namespaces (not root, no unshare; or the stand-in's --no-namespaces) the edits' values under a
mount's container path are rewritten to the host path instead.

The control server: HTTP JSON on 127.0.0.1 (ctlhttp.JSONHandler), GET /state,
GET /pods/NS/NAME and POST /restart the same in both, its port written to a file the tests
wait for; SIGTERM kills every container at once and exits."""
import http.server
import os
import signal
import socketserver
import subprocess

import ctlhttp

# The container's init, run by unshare in the new mount and pid namespaces: a tmpfs on /run,
# then "DEST SRC RO" triples (sorted by destination depth) bind-mounted, read-only where asked,
# then "--" and the command. A mount point that is missing under a read-only mount cannot be
# made (EROFS) and the container does not start, as with a runtime.
CONTAINER_INIT = r"""
set -e
mount -t tmpfs -o mode=0755 gslice-test-run /run
while [ "$1" != "--" ]; do
  dest=$1 src=$2 ro=$3
  shift 3
  if [ -d "$src" ]; then
    mkdir -p "$dest"
  else
    mkdir -p "$(dirname "$dest")"
    [ -e "$dest" ] || : >"$dest"
  fi
  mount --bind "$src" "$dest"
  if [ "$ro" = 1 ]; then mount -o remount,bind,ro "$dest"; fi
done
shift
exec "$@"
"""


def namespaces_work():
    if os.geteuid() != 0:
        return False
    try:
        return subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "true"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def kill_container(c):
    """Kills a container's process group (a runtime's stop) and reaps it; a stopped one is left."""
    p = c.get("proc")
    if p and p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def launch(pod, c, edits, mounts, namespaces, log_dir, as_is=()):
    """Starts container c of pod (c["command"], c["env"]): edits ({name: value}, the runtime's)
    over its environment, mounts ([{"container_path", "host_path", "read_only"}]) made or mapped
    as the docstring says; without namespaces an edit named in as_is is not rewritten. Its
    output goes to log_dir/NS_POD_CONTAINER.log (c["log"]); returns the process (c["proc"])."""
    env = dict(os.environ)
    env.update(c.get("env") or {})

    def host(v):
        for m in sorted(mounts, key=lambda m: -len(m["container_path"])):
            cp = m["container_path"]
            if v == cp or v.startswith(cp + "/"):
                return m["host_path"] + v[len(cp):]
        return v
    for k, v in edits.items():
        env[k] = v if namespaces or k in as_is else ",".join(host(x) for x in v.split(","))
    for m in mounts:
        if m["container_path"] == "/etc/ld.so.preload":
            with open(m["host_path"]) as f:
                libs = [host(line.strip()) for line in f if line.strip()]
            pre = env.get("LD_PRELOAD", "")
            env["LD_PRELOAD"] = ":".join(libs + ([pre] if pre else []))
    cmd = list(c["command"])
    if namespaces:
        depth = lambda m: len([p for p in os.path.normpath(m["container_path"]).split("/") if p])
        args = []
        for m in sorted(mounts, key=depth):
            if (m["container_path"] + "/").startswith("/run/"):
                args += [m["container_path"], m["host_path"], "1" if m["read_only"] else "0"]
        cmd = ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation",
               "private", "/bin/sh", "-c", CONTAINER_INIT, "container-init"] + args + \
            ["--"] + cmd
    c["log"] = os.path.join(log_dir, "%s_%s_%s.log" % (pod["namespace"], pod["name"], c["name"]))
    with open(c["log"], "ab") as out:
        c["proc"] = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
    return c["proc"]


class Handler(ctlhttp.JSONHandler):
    """The control paths both stand-ins answer alike, from k (state(), pod_status(key),
    restart(down_s)): GET /state, GET /pods/NS/NAME, POST /restart {"down_s": 0.3}. A stand-in
    subclasses it with k and post(path): its other POSTs' (code, object), None for 404; an
    exception in one answers 500."""
    k = None

    def pod_key(self):
        """NS/NAME of /pods/NS/NAME, else None."""
        parts = self.path.strip("/").split("/")
        return parts[1] + "/" + parts[2] if len(parts) == 3 and parts[0] == "pods" else None

    def do_GET(self):
        if self.path.strip("/").split("/") == ["state"]:
            return self.reply(*self.k.state())
        if self.pod_key():
            return self.reply(*self.k.pod_status(self.pod_key()))
        self.reply(404, {"error": "no such endpoint"})

    def do_POST(self):
        try:
            if self.path == "/restart":
                self.k.restart(float(self.body().get("down_s", 0.3)))
                return self.reply(200, {})
            got = self.post(self.path)
            if got is not None:
                return self.reply(*got)
        except Exception as e:  # noqa: BLE001
            return self.reply(500, {"error": repr(e)})
        self.reply(404, {"error": "no such endpoint"})

    def post(self, path):
        return None


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def serve(handler, port, port_file, pods, up):
    """Serves handler on 127.0.0.1:port (0: one chosen), the port written to port_file (whole,
    by a rename); up(port) says so. SIGTERM and SIGINT kill the process group of every
    container of pods ({key: {"containers": [..]}}) at once, no lock taken, nothing waited for
    (the test's cleanup sends SIGKILL soon after SIGTERM, and a container left then runs on),
    and exit. Never returns."""
    srv = Server(("127.0.0.1", port), handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, port_file)
    up(srv.server_address[1])

    def stop(*_):
        for pod in list(pods.values()):
            for c in pod.get("containers") or []:
                p = c.get("proc")
                if p:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever()
