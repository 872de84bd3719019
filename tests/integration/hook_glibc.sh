#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# libgslice.so loads into any image: /etc/ld.so.preload puts it into every program of a container,
# and one symbol version the image's glibc lacks fails the load of each of them. Its needs stay at
# glibc 2.17 or below (manylinux2014: Ubuntu 20.04, RHEL 8, Debian 11, Amazon Linux 2), each
# symbol that older glibc keeps in libdl.so.2 or libpthread.so.0 comes with that library named as
# NEEDED (an image's sh links neither), and it needs no library an image may lack.
source "$GSLICE_SRC/tests/integration/lib.sh"
command -v readelf > /dev/null || skip "readelf (binutils) is not installed"
[ -f "$HOOK" ] || fail "no hook at $HOOK"
FLOOR=2.17

# newer VERSION: true when glibc VERSION (2.34, 2.3.3) is above FLOOR.
newer() {
  [ "$1" != "$FLOOR" ] && [ "$(printf '%s\n%s\n' "$1" "$FLOOR" | sort -V | tail -n 1)" = "$1" ]
}

# The undefined dynamic symbols as NAME@VERSION (readelf --dyn-syms: "UND dlopen@GLIBC_2.34 (2)").
syms=$(readelf -W --dyn-syms "$HOOK" | awk '$7 == "UND" && $8 ~ /@/ { print $8 }')
[ -n "$syms" ] || fail "readelf listed no versioned symbol in $HOOK"
# Every version the library needs, whatever names it (readelf -V: "Name: GLIBC_2.34  Flags: ...").
needs=$(readelf -W -V "$HOOK" |
  awk '/Version needs section/ { on = 1 } on && $2 == "Name:" { print $3 }')
[ -n "$needs" ] || fail "readelf listed no version need in $HOOK"

bad_syms=""
for s in $syms; do
  v=${s#*@}
  v=${v#@}
  case $v in
  GLIBC_[0-9]*) newer "${v#GLIBC_}" && bad_syms="$bad_syms ${s%%@*}@$v" ;;
  esac
done
bad_needs=""
for v in $needs; do
  case $v in
  GLIBC_[0-9]*) newer "${v#GLIBC_}" && bad_needs="$bad_needs $v" ;;
  esac
done
[ -z "$bad_syms$bad_needs" ] ||
  fail "libgslice.so needs more than GLIBC_$FLOOR:$bad_syms (versions needed:$bad_needs)"

needed=$(readelf -W -d "$HOOK" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if grep -q '^dl' <<< "$syms"; then
  grep -qx 'libdl.so.2' <<< "$needed" ||
    fail "dl* functions used, libdl.so.2 not NEEDED (glibc < 2.34 defines them there)"
fi
if grep -q '^pthread_' <<< "$syms"; then
  grep -qx 'libpthread.so.0' <<< "$needed" ||
    fail "pthread_* used, libpthread.so.0 not NEEDED (glibc < 2.34 defines many only there)"
fi
for lib in $needed; do
  case $lib in
  libc.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | libm.so.6 | ld-linux*.so.*) ;;
  libasan.so.* | libubsan.so.*)
    [ "${GSLICE_SANITIZE:-0}" = 1 ] || fail "NEEDED $lib outside a sanitizer build"
    ;;
  *) fail "libgslice.so needs $lib, which an image may not have" ;;
  esac
done

# And it still loads and runs here, where these versions are libc.so.6's compat symbols.
preload="$HOOK"
[ "${GSLICE_SANITIZE:-0}" = 1 ] && preload="$(${CC:-cc} -print-file-name=libasan.so) $HOOK"
out=$(LD_PRELOAD="$preload" GSLICE_STATE_DIR="$T/slice" sh -c 'echo loaded' 2>&1) ||
  fail "sh with the hook: $out"
expect_eq "sh with the hook preloaded" "$out" loaded

# GSLICE_OLD_GLIBC_ROOT: a directory holding an older glibc's files (Debian 11's libc6 and dash
# packages, each extracted there with dpkg-deb -x): sh runs on that glibc's dynamic linker and
# libraries with the hook preloaded, as in a container of such an image. Not part of make test:
# nothing fetches such a root here.
old_root="${GSLICE_OLD_GLIBC_ROOT:-}"
tried="not tried on an older glibc (GSLICE_OLD_GLIBC_ROOT unset)"
if [ -n "$old_root" ]; then
  found=("$old_root"/lib/*-linux-gnu/ld-[0-9]*.so)
  ldso=${found[0]}
  [ -x "$ldso" ] || fail "no dynamic linker ld-<version>.so under $old_root/lib/*-linux-gnu"
  [ -x "$old_root/bin/sh" ] || fail "no $old_root/bin/sh"
  libs=$(dirname "$ldso")
  out=$(LD_PRELOAD="$preload" GSLICE_STATE_DIR="$T/slice" \
    "$ldso" --library-path "$libs" "$old_root/bin/sh" -c 'echo loaded' 2>&1) ||
    fail "sh of $(basename "$ldso") with the hook: $out"
  expect_eq "sh of $(basename "$ldso") with the hook preloaded" "$out" loaded
  tried="loads on $(basename "$ldso")"
fi
pass "libgslice.so needs at most GLIBC_$FLOOR ($(wc -w <<< "$syms") versioned symbols;" \
  "NEEDED: ${needed//$'\n'/ }); $tried"
