#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in gsliced for the hook's compute-link tests: it serves one slice's hook over the wire
protocol of src/common/proto.h, sends what a test scripts (a grant and its revoke in one write),
and logs every message either way, one "key=value" line each, for the test to check.

Usage: fake_gsliced.py --proto PROTO_H --socket PATH --log FILE [--quantum-ms N]
                       [--revoke-first] [--timeout S]

The message types and the token structs' layouts are read from proto.h, not written down here:
a field added to TOKEN_RELEASE or a version bump does not silently shift what this reads. The
reply's header version echoes the client's HELLO (what the hook speaks is what it checks).
Grants: on a TOKEN_REQUEST, or a TOKEN_RELEASE with more=1 that is no handoff's charge, the next
generation for --quantum-ms, valid_until on CLOCK_MONOTONIC (time.monotonic_ns()). With
--revoke-first, the first TOKEN_REQUEST gets a GRANT and a REVOKE of the same generation in one
write: the hook's helper reads both in one pass under its mutex, so no launching thread can open
a burst under that grant between the two. Exits when the last hook has gone (after one came),
or after --timeout seconds.
"""
import argparse
import os
import re
import select
import socket
import struct
import sys
import time

MAGIC = 0x434C5347
HDR = struct.Struct("<IHHII")  # magic, version, type, length (header included), seq
SCALARS = {"uint32_t": "I", "int32_t": "i", "uint64_t": "Q", "int64_t": "q", "uint16_t": "H"}


def read_proto(path):
    """Message type numbers and the token structs' fields (name, struct format) from proto.h."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    enum = re.search(r"enum\s+gs_msg_type\s*\{(.*?)\}", text, re.S).group(1)
    types, value = {}, 0
    for item in enum.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, init = item.partition("=")
        value = int(init.strip(), 0) if init.strip() else value + 1
        types[name.strip()[len("GS_MSG_"):]] = value
    structs = {}
    for name in ("token_request", "token_grant", "token_release", "token_revoke", "ping"):
        body = re.search(r"struct\s+gs_msg_%s\s*\{(.*?)\};" % name, text, re.S).group(1)
        fields = []
        for decl in body.split(";"):
            decl = decl.split()
            if not decl:
                continue
            if len(decl) != 2 or decl[0] not in SCALARS:
                sys.exit("fake_gsliced: cannot read struct gs_msg_%s in %s: %s" % (name, path, decl))
            fields.append((decl[1], SCALARS[decl[0]]))
        # Native alignment ("@"), as the C compiler lays these out, and the struct padded to its
        # largest member.
        fmt = "@" + "".join(f for _, f in fields)
        largest = max(struct.calcsize(f) for _, f in fields)
        size = (struct.calcsize(fmt) + largest - 1) // largest * largest
        pinned = re.search(r"sizeof\(struct gs_msg_%s\)\s*==\s*(\d+)" % name, text)
        if pinned and int(pinned.group(1)) != size:
            sys.exit("fake_gsliced: struct gs_msg_%s read from %s as %d bytes, proto.h says %s"
                     % (name, path, size, pinned.group(1)))
        structs[name] = (fields, fmt, size)
    return types, structs


class Fake:
    def __init__(self, args):
        self.types, self.structs = read_proto(args.proto)
        self.names = {v: k for k, v in self.types.items()}
        self.quantum_ns = int(args.quantum_ms * 1e6)
        self.revoke_first = args.revoke_first
        self.generation = 0
        self.log = open(args.log, "w", buffering=1, encoding="utf-8")
        self.conns = {}  # socket -> [buffer, version]
        self.seen_hook = False

    def note(self, what, **kv):
        line = "t=%d %s %s" % (time.monotonic_ns(), what, " ".join("%s=%s" % i for i in kv.items()))
        self.log.write(line.rstrip() + "\n")

    def pack(self, name, **kv):
        fields, fmt, size = self.structs[name]
        body = struct.pack(fmt, *[kv.get(f, 0) for f, _ in fields])
        return body + b"\0" * (size - len(body))

    def unpack(self, name, body):
        fields, fmt, size = self.structs[name]
        # By the header's length: a shorter body (an older peer) reads its missing fields as 0.
        body = body[:size] + b"\0" * (size - len(body))
        return dict(zip((f for f, _ in fields), struct.unpack_from(fmt, body)))

    def frame(self, conn, mtype, body, seq=0):
        version = self.conns[conn][1]
        return HDR.pack(MAGIC, version, self.types[mtype], HDR.size + len(body), seq) + body

    def grant(self, conn, gpu):
        self.generation += 1
        now = time.monotonic_ns()
        g = self.pack("token_grant", gpu=gpu, generation=self.generation,
                      quantum_ns=self.quantum_ns, valid_until_ns=now + self.quantum_ns)
        self.note("out", type="TOKEN_GRANT", gpu=gpu, gen=self.generation)
        return self.frame(conn, "TOKEN_GRANT", g)

    def handle(self, conn, mtype, seq, body):
        name = self.names.get(mtype, "?%d" % mtype)
        out = b""
        if name == "HELLO":
            role, slice_id, pid, _, nonce = struct.unpack_from("<IIiIQ", body)
            self.note("in", type=name, role=role, slice=slice_id, pid=pid)
            if role == 2:
                self.seen_hook = True
            # struct gs_msg_hello_ok: daemon_version, slice_id, window_ns, then the slice's spec
            # (name[64], gpu_mask, request, limit, priority, weight, reserved, memory_cap).
            # gs_slice_spec: name, mask, request, limit, priority, weight, per_gpu, memory cap,
            # then the per-GPU requests (16 x u32) and caps (16 x u64) of protocol 8, all 0.
            spec = b"\0" * 64 + struct.pack("<IIIiIIQ", 0, 0, 100, 0, 1, 0, 0) + b"\0" * 192
            ok = struct.pack("<IIQ", self.conns[conn][1], slice_id, 1000000000) + spec
            assert len(ok) == 304
            out = self.frame(conn, "HELLO_OK", ok, seq)
        elif name == "TOKEN_REQUEST":
            rq = self.unpack("token_request", body)
            self.note("in", type=name, gpu=rq["gpu"])
            out = self.grant(conn, rq["gpu"])
            if self.revoke_first:
                # The grant and its revoke in one write: one read of the hook's helper.
                self.revoke_first = False
                rv = self.pack("token_revoke", gpu=rq["gpu"], generation=self.generation)
                self.note("out", type="TOKEN_REVOKE", gpu=rq["gpu"], gen=self.generation)
                out += self.frame(conn, "TOKEN_REVOKE", rv)
        elif name == "TOKEN_RELEASE":
            rl = self.unpack("token_release", body)
            self.note("in", type=name, gpu=rl["gpu"], gen=rl["generation"], used=rl["used_ns"],
                      launches=rl["launches"], more=rl["more"], flags=rl["flags"],
                      start=rl["start_ns"], size=len(body) + HDR.size)
            if rl["more"] and not rl["flags"] & 2:
                out = self.grant(conn, rl["gpu"])
        elif name == "PING":
            p = self.unpack("ping", body)
            self.note("in", type=name)
            out = self.frame(conn, "PONG", self.pack("ping", cookie=p["cookie"]), seq)
        else:
            self.note("in", type=name, length=len(body) + HDR.size)
        if out:
            conn.sendall(out)

    def serve(self, sock_path, timeout):
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(sock_path):
            os.unlink(sock_path)
        lsock.bind(sock_path)
        lsock.listen(8)
        self.note("listening")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.seen_hook and not self.conns:
                break
            ready, _, _ = select.select([lsock] + list(self.conns), [], [], 0.2)
            for s in ready:
                if s is lsock:
                    c, _ = lsock.accept()
                    self.conns[c] = [b"", 0]
                    continue
                try:
                    data = s.recv(65536)
                except ConnectionResetError:
                    # The hook exited with a grant of ours unread: its end of the connection.
                    data = b""
                if not data:
                    self.note("closed")
                    del self.conns[s]
                    s.close()
                    continue
                st = self.conns[s]
                st[0] += data
                while len(st[0]) >= HDR.size:
                    magic, version, mtype, length, seq = HDR.unpack_from(st[0])
                    if magic != MAGIC or length < HDR.size:
                        sys.exit("fake_gsliced: bad header from the client: magic %#x length %d"
                                 % (magic, length))
                    if len(st[0]) < length:
                        break
                    if st[1] == 0:
                        st[1] = version
                    body, st[0] = st[0][HDR.size:length], st[0][length:]
                    try:
                        self.handle(s, mtype, seq, body)
                    except (BrokenPipeError, ConnectionResetError):
                        break  # gone: the next read says so
        self.note("done", timed_out=int(time.monotonic() >= end))
        os.unlink(sock_path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--quantum-ms", type=float, default=5.0)
    ap.add_argument("--revoke-first", action="store_true")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    Fake(args).serve(args.socket, args.timeout)


if __name__ == "__main__":
    main()
