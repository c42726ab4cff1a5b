# crossreg: multi-stage build -> slim runtime.
#   docker build -t crossreg .                               # CPU backend
#   docker build --build-arg CROSSREG_CUDA=ON \
#     --build-arg BUILD_BASE=nvidia/cuda:13.0.0-devel-ubuntu24.04 \
#     --build-arg RUNTIME_BASE=nvidia/cuda:13.0.0-runtime-ubuntu24.04 -t crossreg:cuda .
# The CPU image runs the embedded default model with no arguments:
#   docker run -p 50051:50051 -p 9090:9090 crossreg
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
ARG CROSSREG_CUDA=OFF
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config git \
      libabsl-dev nlohmann-json3-dev libpcre2-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libspdlog-dev prometheus-cpp-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSREG_BUILD_TESTS=OFF \
      -DCROSSREG_CUDA=${CROSSREG_CUDA} \
    && cmake --build /build \
    && mkdir -p /out/bin /out/share/crossreg/models \
    && cp /build/bin/crossreg-server /build/bin/crossreg /build/bin/crossreg-generate /out/bin/ \
    && if [ -d models/default ]; then cp -r models/default /out/share/crossreg/models/; fi

FROM ${RUNTIME_BASE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# Runtime shared libraries only (the -dev packages stay in the build stage).
RUN apt-get update && apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libpcre2-8-0 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 crossreg
COPY --from=build /out/ /usr/local/
USER crossreg
EXPOSE 50051 9090
# The binary finds the default model in /usr/local/share/crossreg/models/default.
ENTRYPOINT ["/usr/local/bin/crossreg-server", "--host=0.0.0.0", "--port=50051", "--metrics_port=9090"]
