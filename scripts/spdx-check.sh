#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fails (and lists them) where a tracked source file lacks its SPDX line in its first two lines.
missing=$(git ls-files '*.c' '*.h' '*.cu' '*.map' '*.sh' '*.py' '*.awk' '*.cmake' '*.inc' \
  '*.service' '*.yaml' '*.proto' '*.ptx' 'CMakeLists.txt' '*/CMakeLists.txt' Makefile \
  '*Dockerfile' .ci/run | while read -r f; do
  head -n 2 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || echo "$f"
done)
if [ -n "$missing" ]; then
  echo "no SPDX line (add '/* SPDX-License-Identifier: Apache-2.0 */' or '# ...' as the first line):" >&2
  echo "$missing" >&2
  exit 1
fi
