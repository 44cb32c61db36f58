#!/usr/bin/env bash
# Builds informer-check (real client-go informers, ../shared/tools/informer-check) for
# tests/clients/informer_check.rs and prints the binary's path as its last line. Idempotent:
# seconds when its cache (${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-informer-check) is warm,
# minutes from scratch. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

build=../shared/tools/informer-check/build.sh
if [ ! -f "$build" ]; then
  echo "informer-check: $build is missing (the shared dir sits next to the repository)" >&2
  exit 1
fi
bin=$(bash "$build" | tail -n 1)
if [ ! -x "$bin" ]; then
  echo "informer-check: build.sh did not produce an executable (got '$bin')" >&2
  exit 1
fi
echo "$bin"
