#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make install's layout, staged with DESTDIR: the programs, the hook where gslice-node and
# gslice run look for it (../lib from bin/), gsliced's systemd unit naming the installed binary.
source "$GSLICE_SRC/tests/k8s/lib.sh"
command -v cmake >/dev/null || { echo "SKIP: no cmake"; exit 77; }
DESTDIR="$T/root" cmake --install "$GSLICE_BUILD" --prefix /opt/gs >"$T/install.log" 2>&1 ||
  fail "cmake --install: $(tail -5 "$T/install.log")"
R="$T/root/opt/gs"
for f in bin/gsliced bin/gslice bin/gslice-node lib/libgslice.so lib/systemd/system/gsliced.service \
  share/doc/gslice/kubernetes.md; do
  [ -f "$R/$f" ] || fail "make install did not install $f"
done
grep -q "^ExecStart=/opt/gs/bin/gsliced " "$R/lib/systemd/system/gsliced.service" ||
  fail "the unit does not start the installed gsliced: $(grep ExecStart "$R/lib/systemd/system/gsliced.service")"
# The installed gslice-node finds the installed hook by itself (it refuses to start without one).
mkdir -p "$T/dp"
out=$("$R/bin/gslice-node" --no-api-server --kubelet-dir "$T/nope" 2>&1) && fail "started without a kubelet dir"
grep -q "is not a directory" <<<"$out" || fail "the installed gslice-node did not find its hook: $out"
pass "make install: programs, hook beside them, systemd unit"
