#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Times the kubelet's calls to gslice-node (tests/k8s/node_slowapi.sh): dials the plugin's
socket as the kubelet does and, for --duration seconds, calls GetDevicePluginOptions,
GetPreferredAllocation and Allocate in turn every --interval seconds, each with a 30 s
deadline (a call held up shows its whole wait). Prints one JSON line:
{"calls": N, "errors": N, "max_ms": M, "p50_ms": M, "slowest": "Method", "error": "..."}.
Allocate is harmless to repeat: gslice-node makes nothing until PreStartContainer.

  node_call.py --socket DIR/gslice.sock --pb-dir PB [--duration S] [--interval S]
               [--slots gpu1-7] [--methods Options,Preferred,Allocate]
"""

import argparse
import json
import sys
import time

import grpc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--pb-dir", required=True)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--slots", default="gpu1-7")
    ap.add_argument("--methods", default="Options,Preferred,Allocate")
    a = ap.parse_args()
    sys.path.insert(0, a.pb_dir)
    import deviceplugin_pb2 as dp  # noqa: E402

    ch = grpc.insecure_channel("unix:" + a.socket)
    slots = a.slots.split(",")
    calls = {
        "Options": ("GetDevicePluginOptions", dp.Empty(), dp.DevicePluginOptions),
        "Preferred": ("GetPreferredAllocation", None, dp.PreferredAllocationResponse),
        "Allocate": ("Allocate", None, dp.AllocateResponse),
    }
    pref = dp.PreferredAllocationRequest()
    pref.container_requests.add(available_deviceIDs=slots, allocation_size=len(slots))
    alloc = dp.AllocateRequest()
    alloc.container_requests.add(devices_ids=slots)
    reqs = {"Preferred": pref, "Allocate": alloc}
    order = a.methods.split(",")
    times, errors, last_err, slowest = [], 0, "", ("", 0.0)
    end = time.monotonic() + a.duration
    i = 0
    while time.monotonic() < end:
        name = order[i % len(order)]
        i += 1
        method, req, resp = calls[name]
        req = req if req is not None else reqs[name]
        fn = ch.unary_unary("/v1beta1.DevicePlugin/" + method,
                            request_serializer=req.SerializeToString,
                            response_deserializer=resp.FromString)
        t0 = time.monotonic()
        try:
            fn(req, timeout=30)
        except grpc.RpcError as e:
            errors += 1
            last_err = "%s: %s %s" % (method, e.code(), e.details())
        ms = (time.monotonic() - t0) * 1000
        times.append(ms)
        if ms > slowest[1]:
            slowest = (method, ms)
        time.sleep(a.interval)
    times.sort()
    print(json.dumps({"calls": len(times), "errors": errors,
                      "max_ms": round(times[-1]) if times else -1,
                      "p50_ms": round(times[len(times) // 2]) if times else -1,
                      "slowest": slowest[0], "error": last_err}))


if __name__ == "__main__":
    main()
