#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The gate's cost against the physical limit (issue 20.3): bench/gate_bench.c (zero-length
# kernels on the sim in batches of 8 and 64 launches, each ended by a synchronize) run directly
# and under the hook in each mode, in alternated rounds on one simulated GPU and daemon; per mode
# the ns added per launch and per synchronize (fitted over the batch sizes, each round against
# the direct run of that round), median and range over the rounds; in wall time (what a program
# sees on a quiet host) and in the launching threads' CPU time (what the gate itself spends, which
# a loaded host moves far less: there a thread is off the CPU for most of each slice).
# A hard-limited slice is run twice: at its limit, where a launch-bound loop (the gate counts its
# token's time from a launch to the synchronize that waited for it, docs/compute.md) is paced to
# half its speed by the limit itself; and below it, each batch followed by GATE_IDLE_NS of the
# thread's own time (a spin, in the direct run too), where only the gate's cost is left.
# Threads: 2 (no more than this machine's CPUs) and GATE_THREADS. And a program that works
# between its batches (GATE_EVICT_KB of its own data written after each, 2048: more than this
# host's 1 MB L2), which takes what the launch and the synchronize touch out of the CPU's caches:
# there each line the gate touches is a miss, and each token cycle weighs on fewer batches.
#   GATE_SECONDS (2) per batch size per run, GATE_ROUNDS (5), GATE_THREADS (4: the threaded
#   modes), GATE_IDLE_NS (4000), GATE_BATCHES ("8 64"), GATE_SHORT=1: a smoke test (0.2 s, 2
#   rounds).
#   GATE_BEFORE=DIR: another build (of an earlier commit: a change's before) run beside this one
#   in the same rounds, in the token and hard modes ("..., before" rows), against the same direct
#   runs and daemon: a change's cost side by side, which two runs on a shared host do not give.
#   GATE_ONLY=REGEX: only the modes whose names match it (and the direct runs).
source "$GSLICE_SRC/bench/compute_env.inc"
SECS=${GATE_SECONDS:-2} ROUNDS=${GATE_ROUNDS:-5} THREADS=${GATE_THREADS:-4} IDLE=${GATE_IDLE_NS:-4000}
EVICT=${GATE_EVICT_KB:-2048}
BATCHES=${GATE_BATCHES:-8 64}
if [ "${GATE_SHORT:-0}" = 1 ]; then SECS=0.2 ROUNDS=2; fi
GB="$GSLICE_BUILD/bench/gate_bench"
bench_daemon
# name|threads|idle ns after each synchronize|how it runs|KB of its own work after each batch
# (its baseline: the direct run of the same threads, idle and work)
H50="$BIN/gslice run --compute 50 --compute-limit 50 --"
MODES=(
  "direct|1|0|"
  "hook, no slice (gate off)|1|0|env LD_PRELOAD=$HOOK"
  "slice, best effort (token)|1|0|$BIN/gslice run --"
  "soft: --compute 50 (token)|1|0|$BIN/gslice run --compute 50 --"
  "hard 50/50, at its limit (paced)|1|0|$H50"
  "direct, idle ${IDLE} ns a batch|1|$IDLE|"
  "hard 50/50, below its limit (idle ${IDLE} ns a batch)|1|$IDLE|$H50"
  "direct, 2 threads|2|0|"
  "soft, 2 threads|2|0|$BIN/gslice run --compute 50 --"
  "hard 50/50, 2 threads, below its limit|2|$IDLE|$H50"
  "direct, 2 threads, idle|2|$IDLE|"
  "direct, $THREADS threads|$THREADS|0|"
  "soft, $THREADS threads|$THREADS|0|$BIN/gslice run --compute 50 --"
  "hard 50/50, $THREADS threads|$THREADS|0|$H50"
  "direct, $EVICT KB of work a batch|1|$IDLE||$EVICT"
  "soft, $EVICT KB of work a batch|1|$IDLE|$BIN/gslice run --compute 50 --|$EVICT"
  "hard 50/50, $EVICT KB of work a batch|1|$IDLE|$H50|$EVICT"
)
if [ -n "${GATE_BEFORE:-}" ]; then
  G0="$GATE_BEFORE/bin/gslice run"
  MODES+=(
    "soft: --compute 50 (token), before|1|0|$G0 --compute 50 --"
    "hard 50/50, below its limit (idle ${IDLE} ns a batch), before|1|$IDLE|$G0 --compute 50 --compute-limit 50 --"
    "soft, 2 threads, before|2|0|$G0 --compute 50 --"
    "soft, $EVICT KB of work a batch, before|1|$IDLE|$G0 --compute 50 --|$EVICT"
  )
fi
if [ -n "${GATE_ONLY:-}" ]; then
  kept=()
  for m in "${MODES[@]}"; do [[ "${m%%|*}" =~ ^direct || "${m%%|*}" =~ $GATE_ONLY ]] && kept+=("$m"); done
  MODES=("${kept[@]}")
fi
echo "gate cost: $(nproc) CPU(s), load $(cut -d' ' -f1-3 /proc/loadavg), ${SECS}s per batch" \
  "size per run, $ROUNDS rounds, batches $BATCHES"
R="$BT/results"
for round in $(seq "$ROUNDS"); do
  for m in "${MODES[@]}"; do
    IFS='|' read -r name threads idle how evict <<<"$m"
    # shellcheck disable=SC2086 # `how` is words
    out=$(GATE_IDLE_NS=$idle GATE_EVICT_KB=${evict:-0} $how "$GB" "$SECS" "$threads" $BATCHES \
      2>>"$BT/gate.err") ||
      { echo "gate_bench failed in '$name':"; cat "$BT/gate.err"; exit 1; }
    echo "$round|$name|$threads,$idle,${evict:-0}|$out" >>"$R"
  done
done
# The fit per round against that round's direct run of the same thread count; p: "" (wall time)
# or "cpu_" (CPU time).
table() {
awk -F'|' -v batches="$BATCHES" -v p="$1" '
function val(s, k,   r) { r = " " s; sub(".* " p k "=", "", r); sub(" .*", "", r); return r + 0 }
function stats(a, n,   i, j, t, s) {
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  s = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  return sprintf("%+.1f [%+.1f, %+.1f]", s, a[1], a[n])
}
{ round = $1; name = $2; th = $3; out = $4
  if (!(name in seen)) { seen[name] = 1; order[++nm] = name; thr[name] = th }
  if (name ~ /^direct/) base[round, th] = out
  res[name, round] = out; if (round > nr) nr = round }
END {
  nb = split(batches, bs, " ")
  printf "| mode | direct ns/launch | added ns/launch | direct ns/sync | added ns/sync |"
  for (k = 1; k <= nb; k++) printf " added ns/launch at %d |", bs[k]
  printf " <= 20 / <= 100 |\n|---|---:|---:|---:|---:|"
  for (k = 1; k <= nb; k++) printf "---:|"
  print "---|"
  for (i = 1; i <= nm; i++) {
    name = order[i]; if (name ~ /^direct/) continue
    dl = ds = 0; delete al; delete as; delete ab
    for (r = 1; r <= nr; r++) {
      b = base[r, thr[name]]; o = res[name, r]
      dl += val(b, "launch_ns") / nr; ds += val(b, "sync_ns") / nr
      al[r] = val(o, "launch_ns") - val(b, "launch_ns"); as[r] = val(o, "sync_ns") - val(b, "sync_ns")
      for (k = 1; k <= nb; k++)
        ab[k, r] = (val(o, "batch" bs[k] "_ns") - val(b, "batch" bs[k] "_ns")) / bs[k]
    }
    la = stats(al, nr); sa = stats(as, nr)
    met = ((la + 0 <= 20) ? "yes" : "no") " / " ((sa + 0 <= 100) ? "yes" : "no")
    printf "| %s | %.1f | %s | %.1f | %s |", name, dl, la, ds, sa
    for (k = 1; k <= nb; k++) { delete t; for (r = 1; r <= nr; r++) t[r] = ab[k, r]; printf " %s |", stats(t, nr) }
    printf " %s |\n", met
  }
}' "$R"
}
echo "wall time:"
table ""
echo
echo "CPU time of the launching threads:"
table cpu_
echo "(added: median [min, max] over the rounds, each round against its own direct run;" \
  "load at the end $(cut -d' ' -f1-3 /proc/loadavg))"
