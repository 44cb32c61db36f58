#!/usr/bin/env bash
# The proxy's differential suites — kubeplex's answers against the apiserver's, byte for byte —
# through two chained kubeplexes (KUBEPLEX_TEST_TIERS=2: every test stack is a front tier in
# front of a pool tier in front of the fake apiserver), as the pool tier of issue 21 runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBEPLEX_TEST_TIERS=2 cargo nextest run --locked --test proxy --no-fail-fast \
  proxy_reads proxy_watch_rules proxy_watch proxy_tables proxy_protobuf_fields
