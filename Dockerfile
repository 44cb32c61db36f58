# syntax=docker/dockerfile:1
#
# kubeplex container image: a static (musl) release binary on distroless/static, running as a
# non-root numeric user, so `runAsNonRoot` can be verified by the kubelet.
#
#   docker build -t kubeplex:latest .
#
# The build stage is Alpine because its Rust toolchain targets musl natively: the binary comes
# out fully static on amd64 and arm64 alike without naming a target or a cross linker. Nothing in
# the dependency tree needs a C library at run time (zlib-rs backend for gzip, rustls for TLS).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-alpine AS build
# musl-dev: libc headers and crt objects for the static link. cmake/make/perl/clang are only
# there so a C-backed crypto provider (aws-lc-rs) can build if it is the one selected.
RUN apk add --no-cache musl-dev binutils cmake make perl clang
WORKDIR /src
COPY . .
# Cache mounts keep the registry and build artefacts between builds without baking them into a
# layer; the binary is copied out of the cache mount before the step ends. The last check refuses
# to ship a dynamically linked binary: a static executable has no ELF program interpreter.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --no-default-features --bin kubeplex \
 && cp target/release/kubeplex /kubeplex \
 && strip /kubeplex \
 && if readelf -l /kubeplex | grep -q 'program interpreter'; then \
      echo 'kubeplex is not statically linked' >&2; exit 1; \
    fi

# distroless/static: CA certificates, /etc/passwd with the nonroot user, no shell, ~2 MB.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kubeplex /usr/local/bin/kubeplex
# Numeric, so the kubelet can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# 8001: the API (kubectl proxy's port); 9090: admin (/healthz, /readyz, /metrics).
EXPOSE 8001 9090
ENTRYPOINT ["/usr/local/bin/kubeplex"]
CMD ["serve", "--listen", "127.0.0.1:8001", "--admin-listen", "127.0.0.1:9090"]
