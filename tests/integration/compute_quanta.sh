#!/bin/bash
# One kernel-length estimate: the daemon makes a slice's quantum of the kernel length its hooks
# report with their releases (the longest of its latest token's processes), never of charges; a
# report of an hour gets the largest quantum, no more. Quanta far above a loaded machine's stalls
# (200 ms to 2 s), so that no token is revoked while the client talks: nothing here is timed.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon --set window_ms=10000 --set quantum_min_us=200000 --set quantum_init_us=300000 \
  --set quantum_max_us=2000000 --set quantum_kernels=8
gsrun --name quanta -- "$TBIN/daemon_attack" "$GSLICE_SOCKET" quanta > "$T/q" || { cat "$T/q" "$T/gsliced.log"; fail "quanta run failed"; }
cat "$T/q"
# init (300); still init after a charge of one 1 s launch; 8 x 100 (the longest of a's 30 and b's
# 100); 8 x 40 (b alone on the next token); the largest (2000).
grep -qx "quanta: 300 300 800 320 2000" "$T/q" || fail "quanta do not follow the hooks' kernel lengths: $(cat "$T/q")"
pass "quanta are made of the kernel lengths the hooks report"
