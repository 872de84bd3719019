# SPDX-License-Identifier: Apache-2.0
# The node image: gsliced, gslice-node, the gslice CLI and the hook libgslice.so.
#   docker build -f deploy/node.Dockerfile -t REGISTRY/gslice-node:TAG .
# (then set it as the image gslice-node in deploy/common/kustomization.yaml).
# Only cuda.h is taken from the CUDA image (the hook is built against the driver API's
# declarations); the GPU's own libcuda/libnvidia-ml come from the NVIDIA container toolkit at
# run time, never from this image.
ARG CUDA_IMAGE=nvidia/cuda:12.4.1-devel-ubuntu22.04
FROM ${CUDA_IMAGE} AS cuda

FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libmicrohttpd-dev libgrpc-dev libprotobuf-c-dev \
      protobuf-c-compiler libjansson-dev libcurl4-openssl-dev libyaml-dev \
    && rm -rf /var/lib/apt/lists/*
COPY --from=cuda /usr/local/cuda/include /usr/local/cuda/include
COPY . /src
# scripts/deps.sh checks what it needs and installs nothing here: all of it is above.
RUN cmake -S /src -B /build -DCUDA_HOME=/usr/local/cuda -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    && cmake --build /build -j "$(nproc)" \
    && cmake --install /build --prefix /opt/gslice

FROM debian:12
RUN apt-get update && apt-get install -y --no-install-recommends \
      libmicrohttpd12 libgrpc29 libprotobuf-c1 libjansson4 libcurl4 libyaml-0-2 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/gslice /opt/gslice
ENV PATH=/opt/gslice/bin:$PATH
# The DaemonSet runs gsliced and gslice-node from this image (deploy/base/node/node.yaml), and the
# scheduler's pod gslice-extender (deploy/overlays/*).
CMD ["gslice-node", "--help"]
