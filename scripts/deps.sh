#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
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
# /metrics is served with libmicrohttpd (build); jq, curl, tmux drive the status/top/set
# tests and the demo (test-only: installed when we can, otherwise named below and the tests
# that need them say so); promtool is fetched by scripts/promtool.sh when a test needs it.
command -v pkg-config >/dev/null 2>&1 || pkgs="$pkgs pkg-config"
pkg-config --exists libmicrohttpd 2>/dev/null || pkgs="$pkgs libmicrohttpd-dev"
# Kubernetes parts: gRPC core C API + protobuf-c (gslice-node's device plugin),
# jansson (JSON) and libcurl (the API server) for gslice-node and gslice-extender.
pkg-config --exists grpc 2>/dev/null || pkgs="$pkgs libgrpc-dev"
pkg-config --exists libprotobuf-c 2>/dev/null || pkgs="$pkgs libprotobuf-c-dev"
command -v protoc-c >/dev/null 2>&1 || pkgs="$pkgs protobuf-c-compiler"
pkg-config --exists jansson 2>/dev/null || pkgs="$pkgs libjansson-dev"
pkg-config --exists libcurl 2>/dev/null || pkgs="$pkgs libcurl4-openssl-dev"
# libyaml: kubeconfig files are YAML (src/k8s/common/kube.c).
pkg-config --exists yaml-0.1 2>/dev/null || pkgs="$pkgs libyaml-dev"
# libcrypto (OpenSSL): gslice.io/assigned is signed with HMAC-SHA256 (src/k8s/common/sign.c).
pkg-config --exists libcrypto 2>/dev/null || pkgs="$pkgs libssl-dev"
test_pkgs=""
for tp in jq:jq curl:curl tmux:tmux clang-format:clang-format protoc:protobuf-compiler; do
  command -v "${tp%%:*}" >/dev/null 2>&1 || test_pkgs="$test_pkgs ${tp#*:}"
done
# The Kubernetes stand-ins (tests/k8s/) run on Debian's python3 (/usr/bin/python3),
# which is where python3-grpcio and python3-protobuf install.
for mp in grpc:python3-grpcio google.protobuf:python3-protobuf yaml:python3-yaml; do
  /usr/bin/python3 -c "import ${mp%%:*}" >/dev/null 2>&1 || test_pkgs="$test_pkgs ${mp#*:}"
done
if [ -n "$test_pkgs" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    pkgs="$pkgs$test_pkgs"
  else
    echo "gslice: the tests also want:$test_pkgs (sudo apt-get install$test_pkgs)" >&2
  fi
fi
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
# The admission policies' CEL evaluator for the tests (npm; optional: without it those tests
# skip their CEL part and say so). Fetched once into the cache dir CMake looks in.
sh "$(dirname "$0")/celjs.sh" >/dev/null 2>&1 || true
