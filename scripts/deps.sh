#!/bin/sh
# Checks what the build needs and installs what is missing (apt-get, as root).
set -e
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
missing=""
for tool in cmake gcc make; do
  command -v $tool >/dev/null 2>&1 || missing="$missing $tool"
done
pkgs=""
for t in $missing; do
  case $t in
    gcc) pkgs="$pkgs gcc libc6-dev" ;;
    *) pkgs="$pkgs $t" ;;
  esac
done
# Extra packages other parts of the build need are listed here (one place).
for p in $GSLICE_EXTRA_PKGS; do pkgs="$pkgs $p"; done
if [ -n "$pkgs" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "gslice: installing missing build dependencies:$pkgs" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null
  else
    echo "gslice: missing build dependencies:$pkgs" >&2
    echo "        install them with: sudo apt-get install$pkgs" >&2
    exit 1
  fi
fi
if [ ! -f "$CUDA_HOME/include/cuda.h" ]; then
  echo "gslice: cuda.h not found under $CUDA_HOME/include." >&2
  echo "        Install the CUDA toolkit (headers are enough) or set CUDA_HOME." >&2
  exit 1
fi
