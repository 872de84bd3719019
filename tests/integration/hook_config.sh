#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Configuration without a daemon: GSLICE_MEMORY_LIMIT forms, malformed values stop the program
# with a message naming the variable, a foreign or corrupt region is refused, the cap changes
# live in the region (the daemon's value then wins over the environment), NVML shows the slice.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
run() { client --lookup dlsym --path alloc --chunk 256MiB --script "${SCRIPT:-info;fill}"; }

# Malformed: exit status 1 at the first CUDA call, the variable named, nothing on stdout.
for bad in 4GB abc 0 "0=" "=1GiB" "0=1GiB,0=2GiB" "0=1GiB,x" "1GiB,0=2GiB" "-1"; do
  rc=0
  GSLICE_MEMORY_LIMIT="$bad" run > "$T/out" 2> "$T/err" || rc=$?
  expect_eq "GSLICE_MEMORY_LIMIT='$bad' exit status" "$rc" 1
  grep -q "GSLICE_MEMORY_LIMIT" "$T/err" || fail "'$bad': message does not name the variable: $(cat "$T/err")"
  [ ! -s "$T/out" ] || fail "'$bad': the program ran: $(cat "$T/out")"
done
rc=0
GSLICE_STATE_DIR=relative/dir run > "$T/out" 2> "$T/err" || rc=$?
expect_eq "relative GSLICE_STATE_DIR exit status" "$rc" 1
grep -q "GSLICE_STATE_DIR" "$T/err" || fail "no GSLICE_STATE_DIR in: $(cat "$T/err")"

# Unset: no cap, the device's real figures pass through.
out=$(SCRIPT=info run 2>&1)
expect_eq "no cap: total" "$(field "$out" total)" $((8 * GiB))
out=$(SCRIPT=info "$TBIN/hook_nvml" 2>&1 | grep '^nvml ')
expect_eq "no cap: NVML total (no hook)" "$(field "$out" total)" $((8 * GiB))

# Per device index; the daemon-less default state dir is per user under TMPDIR.
out=$(GSLICE_MEMORY_LIMIT=0=512MiB SCRIPT="info;fill" run 2>/dev/null | grep '^fill')
expect_eq "0=512MiB chunks" "$(field "$out" n)" 1
mkdir -p "$T/tmp"
out=$(env -u GSLICE_STATE_DIR TMPDIR="$T/tmp" GSLICE_MEMORY_LIMIT=768MiB bash -c \
  'LD_PRELOAD="$0" "$1" --lookup dlsym --path alloc --script fill' "$HOOK_PRELOAD" "$TBIN/hook_client" 2>/dev/null)
expect_eq "default state dir chunks" "$(field "$out" n)" 2
[ -f "$T/tmp/gslice-$(id -u)/memory.region" ] || fail "no region under \$TMPDIR/gslice-<uid>"
# Someone else's directory in the default place is refused (can only be staged as root).
if [ "$(id -u)" = 0 ] && id nobody > /dev/null 2>&1; then
  mkdir -p "$T/tmp2/gslice-0"
  chown nobody "$T/tmp2/gslice-0"
  rc=0
  env -u GSLICE_STATE_DIR TMPDIR="$T/tmp2" bash -c 'LD_PRELOAD="$0" "$1" --lookup dlsym --path alloc --script info' \
    "$HOOK_PRELOAD" "$TBIN/hook_client" > "$T/out" 2> "$T/err" || rc=$?
  expect_eq "foreign default dir exit status" "$rc" 1
  grep -q "refusing the default slice directory" "$T/err" || fail "no refusal: $(cat "$T/err")"
else
  skip_part "a foreign default slice directory is refused (needs root and user nobody to stage)"
fi

# Live cap change, as the daemon does it: new allocations obey it, and it stands over the env.
export GSLICE_MEMORY_LIMIT=1GiB
start a --lookup dlsym --path alloc --chunk 256MiB
send a fill
expect_eq "fill at 1GiB" "$(field "$(await a '^fill' 1)" n)" 3
"$TBIN/hook_region" "$GSLICE_STATE_DIR" set-limit 2GiB
send a fill
expect_eq "fill after raising to 2GiB" "$(field "$(await a '^fill' 2)" n)" 4
# NVML (nvidia-smi's way in) shows the slice: total = cap, used = the slice's.
LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_nvml" > "$T/nvml" 2>&1 || fail "hook_nvml: $(cat "$T/nvml")"
line=$(grep '^nvml ' "$T/nvml")
expect_eq "NVML total" "$(field "$line" total)" $((2 * GiB))
expect_eq "NVML used" "$(field "$line" used)" $((2 * GiB))
expect_eq "NVML free" "$(field "$line" free)" 0
line=$(grep '^nvml2 ' "$T/nvml")
expect_eq "NVML v2 total" "$(field "$line" total)" $((2 * GiB))
expect_eq "NVML v2 free" "$(field "$line" free)" 0
# Lowered below use: held memory stays, new allocations fail.
"$TBIN/hook_region" "$GSLICE_STATE_DIR" set-limit 1GiB
send a "alloc 1"
expect_eq "alloc under a lowered cap" "$(field "$(await a '^alloc' 1)" err)" 2
send a free
await a '^free' > /dev/null
# A new process with GSLICE_MEMORY_LIMIT=1GiB does not undo the daemon's cap.
"$TBIN/hook_region" "$GSLICE_STATE_DIR" set-limit 1536MiB
out=$(SCRIPT=info run 2>/dev/null)
expect_eq "the daemon's cap over the env" "$(field "$out" total)" $((1536 * MiB))
send a fill
expect_eq "fill after freeing under 1.5GiB" "$(field "$(await a '^fill' 3)" n)" 5
finish a

# A foreign or corrupt region is refused with a message, never trusted or overwritten.
mkdir -p "$T/foreign"
echo "not a region" > "$T/foreign/memory.region"
rc=0
GSLICE_STATE_DIR="$T/foreign" run > "$T/out" 2> "$T/err" || rc=$?
expect_eq "foreign region exit status" "$rc" 1
grep -q "refusing .*memory.region" "$T/err" || fail "no refusal message: $(cat "$T/err")"
expect_eq "foreign file untouched" "$(cat "$T/foreign/memory.region")" "not a region"
# The hook exports only what it wraps (the version script): driver and NVML entry points, dlsym.
if command -v nm > /dev/null; then
  extra=$(nm -D --defined-only "$HOOK" | awk '{print $3}' | grep -v '^dlsym$' | grep -Ev '^(cu|nvml)[A-Z]' || true)
  [ -z "$extra" ] || fail "libgslice.so exports more than its wrappers: $extra"
  nm -D --defined-only "$HOOK" | qgrep ' cuGetProcAddress_v2$' || fail "cuGetProcAddress_v2 not exported"
else
  skip_part "exported symbols (no nm: install binutils)"
fi

# GSLICE_LOG_FILE takes the hook's lines; stderr stays the program's.
GSLICE_LOG_FILE="$T/hook.log" GSLICE_MEMORY_LIMIT=512MiB SCRIPT=fill run > "$T/out" 2> "$T/err"
[ ! -s "$T/err" ] || fail "hook wrote to stderr with GSLICE_LOG_FILE set: $(cat "$T/err")"
grep -q "out of memory on device 0" "$T/hook.log" || fail "no over-cap line in GSLICE_LOG_FILE"

# Everything the hook does not count passes through untouched: the sim's own client (copies,
# memsets, modules, events, streams, graphs, launches) passes under the hook, both lookup styles.
for c in sim_client_linked sim_client_dlopen; do
  if [ -x "$TBIN/$c" ]; then
    GSLICE_MEMORY_LIMIT=4GiB LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/$c" basic "$GSLICE_SRC/tests/gpu/spin.ptx" \
      > "$T/out" 2>&1 || fail "$c basic under the hook: $(tail -3 "$T/out")"
  fi
done

# dlsym(RTLD_NEXT) keeps meaning "after the caller" for other interposers preloaded after us.
out=$(LD_PRELOAD="$HOOK_PRELOAD $TBIN/libhook_next_lib.so" "$TBIN/hook_next")
expect_eq "RTLD_NEXT through the hook" "$out" "wrapped: hello"
pass "configuration, live cap, daemon precedence, NVML view, refusal"

# A cap for a device index this process does not have caps nothing: said on stderr (issue 8),
# while the caps of the devices that are there still hold.
unset GSLICE_MEMORY_LIMIT
out=$(GSLICE_STATE_DIR="$T/ordinals" GSLICE_MEMORY_LIMIT=0=512MiB,1=1GiB SCRIPT="fill" run 2>"$T/err" | grep '^fill')
expect_eq "0=512MiB,1=1GiB chunks on device 0" "$(field "$out" n)" 1
grep -q "GSLICE_MEMORY_LIMIT gives device 1 a cap, but this process sees 1 device" "$T/err" ||
  fail "no warning for a cap of a missing device: $(cat "$T/err")"
pass "a cap for a missing device is a warning line"
