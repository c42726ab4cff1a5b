# crossreg: multi-stage build -> slim runtime.
#
#   docker build -t crossreg .                                   # CPU backend (Debian 12)
#   docker build --build-arg CROSSREG_CUDA=ON \
#     --build-arg BUILD_BASE=nvidia/cuda:13.0.0-devel-ubuntu24.04 \
#     --build-arg RUNTIME_BASE=nvidia/cuda:13.0.0-runtime-ubuntu24.04 -t crossreg:cuda .
#
# The CPU image runs the embedded default model with no arguments:
#   docker run -p 50051:50051 -p 8000:8000 -p 9090:9090 crossreg
# BUILD_BASE and RUNTIME_BASE take any image name, a registry's or a local one:
# scripts/docker_smoke.sh builds on a Debian 12 base it makes with debootstrap
# (crossreg-base:bookworm), with no registry at all, and smoke-tests the image.
# The CUDA image needs the NVIDIA container runtime (docker run --gpus all ...; on
# Kubernetes the device plugin), which injects the driver library libcuda.so.1.
#
# The runtime stage installs no library packages: the build stage copies the shared
# libraries the programs load (found with ldd) into /usr/local/lib/crossreg. Debian and
# Ubuntu name the runtime packages differently (bookworm: libgrpc++1.51, libprotobuf32,
# libabsl20220623, libspdlog1.10; noble: libgrpc++1.51t64, libprotobuf32t64,
# libabsl20220623t64, libspdlog1.12), so one package list cannot serve both bases.
# Not copied: glibc (libc, libm, the loader...: must be the base image's own), libstdc++
# and libgcc_s (in every base image, and the runtime base is the same distribution release
# as the build base), the CUDA driver (libcuda, libnvidia-*: injected at run time) and the
# CUDA toolkit libraries under /usr/local/cuda* (cuBLAS, cudart: in the nvidia/cuda
# runtime image).
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
ARG CROSSREG_CUDA=OFF
# GPU architectures for -DCROSSREG_CUDA=ON: A100 (80) and H100/H200 (90).
ARG CUDA_ARCHITECTURES="80;90"
# An ARG, not an ENV: set for this stage's RUN commands only, never part of an image's
# configuration (the runtime stage sets its own the same way).
ARG DEBIAN_FRONTEND=noninteractive
# The -dev package names are the same on Debian 12 (bookworm) and Ubuntu 24.04 (noble).
# Checked on packages.ubuntu.com for noble: libgrpc++-dev and protobuf-compiler-grpc
# (source grpc 1.51.1-4.1build5, universe), libprotobuf-dev and protobuf-compiler
# (3.21.12-8.2*), libabsl-dev (20220623.1-3.1ubuntu3*), nlohmann-json3-dev (3.11.3-1,
# universe), libspdlog-dev (1:1.12.0+ds-2build1, universe), prometheus-cpp-dev
# (1.0.2-2build2, universe), libpcre2-dev (10.42-4ubuntu2); cmake on noble is 3.28.3
# (>= the 3.25 CMakeLists.txt needs). The ubuntu:24.04 image that nvidia/cuda builds on
# enables the universe component.
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config git \
      libabsl-dev nlohmann-json3-dev libpcre2-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libspdlog-dev prometheus-cpp-dev libcpp-httplib-dev \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the build reads: the top-level CMakeLists.txt and the directories it adds with
# tests and fuzz targets off (common, engine, scheduler; proto, server, clients for the
# server). tests/, fuzz/, training/, docs/, scripts/, deploy/ and the model are not copied
# (.dockerignore does not even send most of them), so editing them reuses the compile
# layer below. The model goes into the runtime stage on its own.
COPY CMakeLists.txt ./
COPY common/ common/
COPY proto/ proto/
COPY engine/ engine/
COPY scheduler/ scheduler/
COPY distill/ distill/
COPY server/ server/
COPY clients/ clients/
# CROSSREG_BUILD_TESTS and CROSSREG_FUZZ must stay OFF: tests/ and fuzz/ are not here.
RUN cuda_args=""; \
    if [ "${CROSSREG_CUDA}" = "ON" ]; then cuda_args="-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"; fi; \
    cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCROSSREG_BUILD_TESTS=OFF -DCROSSREG_FUZZ=OFF \
      -DCROSSREG_CUDA=${CROSSREG_CUDA} ${cuda_args} \
    && cmake --build /build \
    && mkdir -p /out/bin /out/lib/crossreg \
    && cp /build/bin/crossreg-server /build/bin/crossreg /build/bin/crossreg-generate \
          /build/bin/crossreg-loadgen /build/bin/crossreg-distill-data /out/bin/
# Bundle the programs' shared libraries (see the top of this file for what is left out).
# cp -L writes each library under the name the loader looks for (its soname link).
RUN set -eu; \
    ldd /out/bin/* > /tmp/ldd.txt; \
    if grep 'not found' /tmp/ldd.txt | grep -v -E '^[[:space:]]*libcuda\.so'; then \
      echo "unresolved shared libraries (above)" >&2; exit 1; \
    fi; \
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' /tmp/ldd.txt | sort -u > /tmp/libs.txt; \
    while read -r lib; do \
      case "${lib##*/}" in \
        ld-linux*|libc.so.*|libm.so.*|libmvec.so.*|libdl.so.*|libpthread.so.*|librt.so.*) continue ;; \
        libresolv.so.*|libutil.so.*|libstdc++.so.*|libgcc_s.so.*) continue ;; \
        libcuda.so*|libnvidia-*) continue ;; \
      esac; \
      case "$lib" in /usr/local/cuda*) continue ;; esac; \
      cp -L "$lib" /out/lib/crossreg/; \
    done < /tmp/libs.txt; \
    ls /out/lib/crossreg

FROM ${RUNTIME_BASE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# Only package names that Debian and Ubuntu share; the libraries come from the build stage.
# apt's package lists and caches are removed in the same layer: the official debian and
# ubuntu images clean them by themselves (/etc/apt/apt.conf.d/docker-clean), a base made
# another way (debootstrap, as scripts/docker_smoke.sh does) does not, and they would
# otherwise add tens of MB to the image.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
    && groupadd --system --gid 10001 crossreg \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
         --shell /usr/sbin/nologin crossreg
# The embedded default model, straight from the build context and before the programs:
# a change to the code makes a new layer of programs only, and the model's layer (50 MB)
# is reused, by the build and by registries and nodes that already have it.
# The binary finds it in /usr/local/share/crossreg/models/default.
COPY models/default/ /usr/local/share/crossreg/models/default/
COPY --from=build /out/ /usr/local/
# Searched before the system directories, so the programs get the libraries they were
# built against; the base image's own LD_LIBRARY_PATH (nvidia/cuda sets one) is kept.
ENV LD_LIBRARY_PATH=/usr/local/lib/crossreg${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}
# Fail the build, not the first start, if a library is still missing (libcuda.so.1
# comes from the NVIDIA container runtime).
RUN if ldd /usr/local/bin/* | grep 'not found' | grep -v -E '^[[:space:]]*libcuda\.so'; then \
      echo "unresolved shared libraries in the runtime image (above)" >&2; exit 1; \
    fi
# Numeric, so that Kubernetes' runAsNonRoot can check it without a runAsUser.
USER 10001:10001
EXPOSE 50051 8000 9090
# Health for plain docker and compose (Kubernetes ignores HEALTHCHECK and uses the
# manifests' gRPC probes): GET /ready on the metrics port, 200 once the model is loaded
# and gRPC serves, 503 while loading or draining. The metrics port stays plain HTTP under
# --tls_cert_file (the HTTP port then speaks TLS only) and needs no token under
# --auth_token_file, as deploy/kubernetes/examples/tls-auth's probes rely on.
# The probe is bash's /dev/tcp, because the runtime image has no HTTP client (no curl,
# wget or python; adding one would be a package, and a name that differs between bases,
# for one request) and crossreg has no health subcommand; bash is in every base this
# Dockerfile supports (Debian, Ubuntu, nvidia/cuda, a debootstrap minbase).
# A server started with another metrics port: docker run -e CROSSREG_HEALTHCHECK_PORT=...;
# with --metrics_port=0, probe the plaintext HTTP port's GET /health instead
# (-e CROSSREG_HEALTHCHECK_PORT=8000 -e CROSSREG_HEALTHCHECK_PATH=/health), or run with
# --no-healthcheck.
# --start-period: loading a large model (or --adaptive_gamma's cost measurement) may take
# minutes, as the Kubernetes startupProbe allows 10; the image is healthy as soon as a
# probe passes, failures count only after the start period. Exit status 1 on any failure
# (connection refused, no answer within 4 s, a status other than 200).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10m --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${CROSSREG_HEALTHCHECK_PORT:-9090} && printf 'GET %s HTTP/1.0\\r\\n\\r\\n' \"${CROSSREG_HEALTHCHECK_PATH:-/ready}\" >&3 && read -r -t 4 _ code _ <&3 && [ \"$code\" = 200 ] || exit 1"]
# --threads is left to its default, which follows the container's CPU limit.
ENTRYPOINT ["/usr/local/bin/crossreg-server", "--host=0.0.0.0", "--port=50051", "--http_port=8000", "--metrics_port=9090"]
