# syntax=docker/dockerfile:1
#
# The katalog image: one static binary (musl, no libc needed) on an empty
# base, run as a non-root user; no shell, no package manager, nothing else.
#
#   docker build --build-arg GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t katalog:0.1.0 .
#   docker run --rm katalog:0.1.0 version
#
# The same binary is built and run outside a container by CI
# (.ci/run: `cargo build --release --target x86_64-unknown-linux-musl`).

FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
# .dockerignore leaves .git out: the commit comes in as a build argument.
ARG GIT_COMMIT=unknown
ENV KATALOG_GIT_COMMIT=${GIT_COMMIT}
# Symbols out: 27 MB -> 21 MB for the binary (the whole image).
ENV CARGO_PROFILE_RELEASE_STRIP=symbols
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --locked --release --target x86_64-unknown-linux-musl -p katalog-cli \
 && cp target/x86_64-unknown-linux-musl/release/katalog /katalog \
 && mkdir -p /rootfs/tmp /rootfs/etc \
 && echo 'katalog:x:65532:65532:katalog:/nonexistent:/sbin/nologin' > /rootfs/etc/passwd \
 && echo 'katalog:x:65532:' > /rootfs/etc/group

FROM scratch
COPY --from=build /rootfs/ /
COPY --from=build --chmod=0755 /katalog /katalog
# Numeric, so that runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# mimalloc returns freed memory to the OS after 50 ms instead of 1 s: the
# peak under bursts of large reviews stays near the live data (docs/server.md).
ENV MIMALLOC_PURGE_DELAY=50
# The webhook port and the plain-HTTP metrics port (deploy/base).
EXPOSE 8443 9090
ENTRYPOINT ["/katalog"]
CMD ["--help"]
