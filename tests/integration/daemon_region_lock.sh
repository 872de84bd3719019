#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The memory region's robust mutex lives in a file the slice's processes write. glibc links a
# robust mutex it locks into the thread's robust list through pointers inside the mutex (__list)
# and follows them at unlock: a daemon that locked a region through glibc wrote pointers a slice
# chose (root gsliced died of SIGSEGV within seconds). The daemon must never hand that mutex to
# glibc (docs/memory.md, "The slice's region"), and must survive whatever a slice writes there
# (tests/progs/daemon_region_lock.c):
#  1. a slice process rewrites the mutex's __list and owner in a loop while it lowers its own cap
#     with `gslice set --memory` again and again: the daemon lives, answers, and the last cap is
#     the slice's;
#  2. a container holds its region's lock word with a fake owner (and raised its own cap) while
#     gsliced restarts, then lets go and scribbles while the cap is set again: the daemon lives,
#     and its cap is in the region while the word is still held (it needs no lock to write it);
#  3. a well-behaved hook obeys a cap lowered while it runs;
#  4. a region file grown past its size is cut back at the daemon's next look, logged once.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
export GSLICE_SIM_MEMORY=8GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB
A="$TBIN/daemon_region_lock"
alive() { kill -0 "$DAEMON_PID" 2>/dev/null || { tail -5 "$T/gsliced.log"; fail "gsliced died: $1"; }; }
answers() { "$BIN/gslice" status > "$T/st" 2>&1 || fail "gsliced does not answer: $1"; }
start_daemon

# 1. Scribbling over the mutex while the daemon writes the cap, ~6 s of `gslice set`.
gsrun --name atk --memory 1GiB -- bash -c \
  'exec "$0" scribble "$GSLICE_STATE_DIR/memory.region" 6 "$1" "$GSLICE_SLICE" $((1 << 30))' \
  "$A" "$BIN/gslice" > "$T/atk" 2>&1 || { cat "$T/atk"; alive "scribbler"; fail "the scribbler failed"; }
cat "$T/atk"
alive "a slice scribbled over its region's mutex while lowering its cap"
answers "after the scribbler"
sets=$(sed -n 's/.*sets=\([0-9]*\).*/\1/p' "$T/atk")
last=$(sed -n 's/.*last=\([0-9]*\).*/\1/p' "$T/atk")
[ "${sets:-0}" -ge 20 ] || fail "only ${sets:-0} caps set in 6 s: $(cat "$T/atk")"
echo "ok: $sets caps set under the scribbler, gsliced alive"

# 2. A held (container) slice: the lock word held with a fake owner across a restart.
"$TBIN/daemon_k8s" register "$GSLICE_SOCKET" ctr 0x1 30 30 1073741824 3 > "$T/reg" ||
  fail "register: $(cat "$T/reg")"
id=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/reg")
dir=$(sed -n 's/.* dir=\(.*\)$/\1/p' "$T/reg")
[ -f "$dir/memory.region" ] || fail "no region in $dir"
mkfifo "$T/hold.in"
"$A" hold "$dir/memory.region" < "$T/hold.in" > "$T/hold.out" 2>&1 &
H=$!
exec {HF}> "$T/hold.in"
for _ in $(seq 100); do grep -q held "$T/hold.out" && break; sleep 0.05; done
grep -q held "$T/hold.out" || fail "the holder did not start: $(cat "$T/hold.out")"
stop_daemon
start_daemon
alive "restarted over a region whose lock word a container holds"
echo show >&$HF
for _ in $(seq 100); do grep -q "^cap=" "$T/hold.out" && break; sleep 0.05; done
echo "after the restart: $(grep '^cap=' "$T/hold.out")"
grep -q "^cap=1073741824 source=2 lock=0x1234" "$T/hold.out" ||
  fail "the daemon's cap is not in the region while its lock word is held: $(cat "$T/hold.out")"
echo "release 3" >&$HF
for m in 900 800 700 600 500; do
  "$BIN/gslice" set "$id" --memory ${m}MiB > "$T/set" 2>&1 || fail "set $id: $(cat "$T/set")"
  sleep 0.3
  alive "a container scribbled over its region's mutex after holding it across a restart"
done
echo quit >&$HF # the restarted daemon holds the fifo open too: no end of input
exec {HF}>&-
wait $H
alive "after the holder"
answers "after the holder"

# 3. A well-behaved hook obeys a cap lowered while it runs (256 MiB chunks, 256 MiB context).
mkfifo "$T/good.in"
gsrun --name good --memory 1GiB -- "$TBIN/hook_client_linked" --lookup link --path alloc \
  --chunk 256MiB < "$T/good.in" > "$T/good.out" 2> "$T/good.err" &
G=$!
exec {GF}> "$T/good.in"
echo "alloc 1" >&$GF
for _ in $(seq 200); do grep -q "^alloc " "$T/good.out" && break; sleep 0.05; done
grep -q "^alloc n=1 err=0" "$T/good.out" || fail "the good hook: $(cat "$T/good.out" "$T/good.err")"
"$BIN/gslice" set good --memory 768MiB > "$T/set" 2>&1 || fail "lowering good's cap: $(cat "$T/set")"
echo fill >&$GF
for _ in $(seq 200); do grep -q "^fill " "$T/good.out" && break; sleep 0.05; done
echo quit >&$GF
exec {GF}>&-
wait $G || true
grep -q "^fill n=1 err=2" "$T/good.out" ||
  fail "a cap lowered to 768MiB over 512MiB in use should allow one more 256MiB chunk: $(cat "$T/good.out")"
echo "ok: the lowered cap holds for a well-behaved hook"

# 4. A region file grown by its slice is cut back to the region's size at the daemon's next look.
size=$(stat -c %s "$dir/memory.region")
head -c $((8 << 20)) /dev/zero >> "$dir/memory.region"
for _ in $(seq 100); do [ "$(stat -c %s "$dir/memory.region")" -eq "$size" ] && break; sleep 0.05; done
expect_eq "the grown region's size after a look" "$(stat -c %s "$dir/memory.region")" "$size"
head -c $((8 << 20)) /dev/zero >> "$dir/memory.region"
for _ in $(seq 100); do [ "$(stat -c %s "$dir/memory.region")" -eq "$size" ] && break; sleep 0.05; done
expect_eq "grown again, after a look" "$(stat -c %s "$dir/memory.region")" "$size"
n=$(grep -c "had grown by" "$T/gsliced.log" || true)
expect_eq "warnings about the grown region" "$n" 1
alive "the end"
answers "the end"
pass "whatever a slice writes in its region's mutex, gsliced lives and its caps hold"
