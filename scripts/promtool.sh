#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints the path of a promtool (Debian's, from the prometheus package), fetching it if needed.
# Installing the prometheus package would also start a Prometheus server on the machine, so
# when promtool is not on PATH we take only the binary out of Debian's package (apt-get
# download works without root) and keep it in a cache dir.
set -e
if command -v promtool >/dev/null 2>&1; then
  command -v promtool
  exit 0
fi
dir=${GSLICE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/gslice}
if [ -x "$dir/promtool" ]; then
  echo "$dir/promtool"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "gslice: promtool not found and no apt-get to fetch it: install Prometheus's promtool" >&2
  echo "        (Debian/Ubuntu: sudo apt-get install prometheus) or put it on PATH" >&2
  exit 1
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
  echo "gslice: could not download Debian's prometheus package (for promtool)." >&2
  echo "        Refresh the package lists (sudo apt-get update) and retry, or install" >&2
  echo "        promtool yourself (sudo apt-get install prometheus)." >&2
  exit 1
fi
dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool
mv "$tmp/usr/bin/promtool" "$dir/promtool"
echo "$dir/promtool"
