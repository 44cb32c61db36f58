#!/usr/bin/env bash
# The proxy's differential suites — kubeplex's answers against the apiserver's, byte for byte —
# through two chained kubeplexes (KUBEPLEX_TEST_TIERS=2: every test stack is a front tier in
# front of a pool tier in front of the fake apiserver), as the pool tier of issue 21 runs them;
# and the node-mode identity suites (tests/node) through a node tier in front of a pool tier in
# node mode, which authenticates the node tier by its certificate (group kubeplex:node-tiers).
# The same package selection as scripts/test.sh's run, so nothing is built again.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBEPLEX_TEST_TIERS=2 cargo nextest run --workspace --all-targets --locked --no-fail-fast \
  -E 'binary(node) | (binary(proxy) & (test(/^proxy_reads::/) | test(/^proxy_watch::/) | test(/^proxy_watch_rules::/) | test(/^proxy_tables::/) | test(/^proxy_protobuf_fields::/) | test(/^proxy_encodings::/)))'
