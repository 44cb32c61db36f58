#!/usr/bin/env bash
# The whole test suite: formatting, lints as errors, every test over real loopback sockets.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The proxy as the release image builds it: without the fake apiserver.
cargo check --locked --no-default-features --bin kubeplex
cargo nextest run --workspace --all-targets --locked --no-fail-fast
# The differential suites again, through two chained kubeplexes (a pool tier behind the front).
./scripts/test-tiers.sh
