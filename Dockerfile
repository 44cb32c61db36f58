# syntax=docker/dockerfile:1
#
# kubeplex container image: a release binary linked against Debian 12's glibc, on
# distroless/cc (glibc, libgcc, CA certificates; no shell), running as a non-root numeric user,
# so `runAsNonRoot` can be verified by the kubelet.
#
#   docker build -t kubeplex:latest .
#
# glibc rather than a static musl binary for memory and speed: kubeplex holds its caches on the
# heap, and sets glibc's malloc thresholds and arenas at start (src/bin/kubeplex/allocator.rs), which musl's
# allocator has no equivalent of. Measured against the real apiserver with 100,000 ConfigMaps
# (scripts/realcluster/memory.sh; BENCHMARKS.md, "The C allocator's settings"): RSS above idle
# over the bytes the caches hold 1.35× / 1.36× with glibc against 1.58× / 1.52× for the same
# commit built static with musl, and a protobuf list of the 100,000 from the cache 0.37 s against
# 0.43 s. The build stage is Debian 12 like the runtime, so the binary needs no newer glibc than
# the image has. Nothing in the dependency tree needs another C library at run time (zlib-rs
# backend for gzip, rustls for TLS).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and build artefacts between builds without baking them into a
# layer; the binary is copied out of the cache mount before the step ends. The last check refuses
# to ship a binary that needs a library distroless/cc does not have (only glibc's and libgcc's).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --no-default-features --bin kubeplex \
 && cp target/release/kubeplex /kubeplex \
 && strip /kubeplex \
 && needed=$(readelf -d /kubeplex | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p') \
 && for lib in $needed; do \
      case $lib in \
        libc.so.6|libm.so.6|libgcc_s.so.1|ld-linux-*.so.*|libpthread.so.0|libdl.so.2|librt.so.1) ;; \
        *) echo "kubeplex needs $lib, which the runtime image lacks" >&2; exit 1 ;; \
      esac; \
    done

# distroless/cc: glibc, libgcc, CA certificates, /etc/passwd with the nonroot user, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kubeplex /usr/local/bin/kubeplex
# Numeric, so the kubelet can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# 8001: the API (kubectl proxy's port); 9090: admin (/healthz, /readyz, /metrics).
EXPOSE 8001 9090
ENTRYPOINT ["/usr/local/bin/kubeplex"]
CMD ["serve", "--listen", "127.0.0.1:8001", "--admin-listen", "127.0.0.1:9090"]
