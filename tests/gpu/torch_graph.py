# SPDX-License-Identifier: Apache-2.0
"""torch.cuda.graph under a slice (run by tests/gpu/torch_graph.sh), as PyTorch and vLLM use it:
a graph of OPS half-precision matmuls of SIZE x SIZE (by the identity, so the result is known).

  torch_graph.py calibrate [--ops K] [--size N] [--replays R]
      with nothing else on the GPU and no gslice: the capture with another thread at work
      (prints capture=ok or capture=error:...), then R replays back to back: replay_s= is one
      replay's device time as the wall clock sees it; init_s= how long import and setup took.
  torch_graph.py capture [--mode global|thread_local|relaxed] [--worker-mode global|relaxed]
      [--replays R] [--ops K] [--size N]
      warm-up on a side stream, torch.cuda.graph in MODE while another thread launches and
      synchronizes on its own stream, R (1000) replays; the graph's result checked. With
      --worker-mode relaxed that thread first makes itself relaxed (cuThreadExchangeStreamCapture-
      Mode through ctypes): the driver then prohibits it nothing, so an error is the hook's.
  torch_graph.py share --replay-s T [--batch B] [--start EPOCH_S] [--warmup S] [--duration S]
      [--label L] [--ops K] [--size N]
      replays in batches of B (4), synchronized; the replays inside the window (a batch counted by
      its part inside it) x T over the window, printed as compute_spin prints its share
      (label= kernels= device_s= share= window_s=), with late_s= when setup ended after the
      window began.
Exit status 0, or 1 with the error on stderr."""
import argparse
import ctypes
import sys
import threading
import time

T0 = time.time()
import torch  # noqa: E402  (its import is part of init_s)


def build(ops, size):
    x = torch.randn(size, size, device="cuda", dtype=torch.half)
    w = torch.eye(size, device="cuda", dtype=torch.half)

    def step(pause=None):
        y = x
        for _ in range(ops):
            y = y @ w
            if pause:
                pause()
        return y

    return x, step


class Worker:
    """Another thread launching on its own stream and synchronizing it, in a loop."""

    def __init__(self, mode="global"):
        self.mode = mode
        self.stream = torch.cuda.Stream()
        self.z = torch.ones(1 << 16, device="cuda")
        self.rounds, self.error, self.stop = 0, None, False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        if self.mode == "relaxed":
            m = ctypes.c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED
            torch.cuda.current_stream()  # this thread's context first
            if ctypes.CDLL("libcuda.so.1").cuThreadExchangeStreamCaptureMode(ctypes.byref(m)):
                self.error = "cuThreadExchangeStreamCaptureMode failed"
                return
        try:
            while not self.stop:
                with torch.cuda.stream(self.stream):
                    self.z.mul_(1.0)
                self.stream.synchronize()
                self.rounds += 1
        except RuntimeError as e:  # torch turns CUDA errors into RuntimeError
            self.error = str(e).splitlines()[0]

    def wait_rounds(self, n):
        r = self.rounds
        while self.rounds < r + n and self.error is None and self.thread.is_alive():
            time.sleep(0.0001)
        time.sleep(0.002)


def capture(step, mode, worker):
    """The documented pattern: warm-up on a side stream, then the capture (in MODE)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    pause = (lambda: worker.wait_rounds(2)) if worker else None
    with torch.cuda.graph(g, capture_error_mode=mode):
        out = step(pause)
    return g, out


def replay(g, n, stream):
    with torch.cuda.stream(stream):
        for _ in range(n):
            g.replay()
    stream.synchronize()


def cmd_calibrate(a):
    x, step = build(a.ops, a.size)
    worker = Worker()
    worker.thread.start()
    try:
        g, out = capture(step, "global", worker)
        verdict = "ok" if worker.error is None else "error:worker: " + worker.error
    except RuntimeError as e:
        verdict = "error:" + str(e).splitlines()[0]
        g = None
    worker.stop = True
    worker.thread.join()
    if g is None:  # the driver refuses the pattern itself: calibrate on a plain capture
        torch.cuda.synchronize()
        g, out = capture(step, "global", None)
    rs = torch.cuda.Stream()
    replay(g, 20, rs)
    init = time.time() - T0
    t = time.time()
    replay(g, a.replays, rs)
    per = (time.time() - t) / a.replays
    ok = torch.equal(out, x)
    print(f"replay_s={per:.6f} init_s={init:.1f} replays={a.replays} ops={a.ops} size={a.size} "
          f"result={'ok' if ok else 'wrong'} rounds={worker.rounds} capture={verdict}")
    return 0 if ok else 1


def cmd_capture(a):
    x, step = build(a.ops, a.size)
    worker = Worker(a.worker_mode)
    worker.thread.start()
    try:
        g, out = capture(step, a.mode, worker)
    finally:
        worker.stop = True
        worker.thread.join()
    if worker.error:
        print(f"torch_graph: the other thread: {worker.error}", file=sys.stderr)
        return 1
    rs = torch.cuda.Stream()
    t = time.time()
    replay(g, a.replays, rs)
    wall = time.time() - t
    if not torch.equal(out, x):
        print("torch_graph: the replayed graph's result is wrong", file=sys.stderr)
        return 1
    print(f"mode={a.mode} worker={a.worker_mode} rounds={worker.rounds} replays={a.replays} wall_s={wall:.4f}")
    return 0


def cmd_share(a):
    _, step = build(a.ops, a.size)
    g, _ = capture(step, "global", None)
    rs = torch.cuda.Stream()
    replay(g, 2, rs)
    start = a.start or time.time()
    m0, late = start + a.warmup, max(0.0, time.time() - start - a.warmup)
    m1, counted = m0 + a.duration, 0.0
    while time.time() < start:
        time.sleep(0.001)
    while True:
        t0 = time.time()
        if t0 >= m1:
            break
        with torch.cuda.stream(rs):
            g.replay()
            queued = time.time()
            for _ in range(a.batch - 1):
                g.replay()
        rs.synchronize()
        t1 = time.time()
        i0, i1 = max(queued, m0), min(t1, m1)
        if i1 > i0:
            counted += a.batch * ((i1 - i0) / (t1 - queued) if t1 > queued else 1)
    dev = counted * a.replay_s
    print(f"label={a.label} kernels={counted:.0f} device_s={dev:.4f} share={dev / a.duration:.4f} "
          f"window_s={a.duration:.1f} late_s={late:.1f}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["calibrate", "capture", "share"])
    p.add_argument("--ops", type=int, default=8)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--replays", type=int, default=None)
    p.add_argument("--mode", default="global", choices=["global", "thread_local", "relaxed"])
    p.add_argument("--worker-mode", default="global", choices=["global", "relaxed"])
    p.add_argument("--replay-s", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--start", type=float, default=0.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=6.0)
    p.add_argument("--label", default="t")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_graph: torch finds no CUDA device", file=sys.stderr)
        return 1
    if a.what == "share" and a.replay_s <= 0:
        print("torch_graph: share needs --replay-s (from calibrate)", file=sys.stderr)
        return 2
    a.replays = a.replays or (200 if a.what == "calibrate" else 1000)
    return {"calibrate": cmd_calibrate, "capture": cmd_capture, "share": cmd_share}[a.what](a)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"torch_graph: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(1)
