# SPDX-License-Identifier: Apache-2.0
"""PyTorch under the hook: torch.cuda.mem_get_info() shows the slice's cap, and allocating past
it raises PyTorch's out-of-memory error. Prints PASS/FAIL lines; exit status 0 if all pass."""
import os
import subprocess
import sys

import torch

cap = int(os.environ["HOOK_CAP_BYTES"])
ok = True
free, total = torch.cuda.mem_get_info()
if total == cap:
    print(f"PASS: mem_get_info total={total} free={free}")
else:
    print(f"FAIL: mem_get_info total={total}, want the cap {cap}")
    ok = False
held = []
try:
    for _ in range(100000):
        held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    print("FAIL: no out-of-memory error past the cap")
    ok = False
except torch.cuda.OutOfMemoryError as e:
    print(f"PASS: torch.cuda.OutOfMemoryError after {len(held)} x 256MiB ({str(e).splitlines()[0][:80]})")
# What the device itself holds for this process (nvidia-smi, without the hook).
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
try:
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         env=env, timeout=30).stdout
    mine = [int(l.split(",")[1]) for l in out.splitlines() if l.split(",")[0].strip() == str(os.getpid())]
    if mine:
        used = mine[0] << 20
        verdict = "PASS" if used <= cap else "FAIL"
        ok = ok and used <= cap
        print(f"{verdict}: nvidia-smi says this process holds {used} bytes (cap {cap})")
    else:
        print("PASS: (nvidia-smi does not list this pid here; device usage not checked)")
except (OSError, subprocess.TimeoutExpired):
    print("PASS: (no nvidia-smi; device usage not checked)")
sys.exit(0 if ok else 1)
