#!/usr/bin/env bash
# The whole test suite: formatting, lints as errors, every test over real loopback sockets.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --all-targets --locked --no-fail-fast
