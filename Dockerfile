# syntax=docker/dockerfile:1
# One build, three images: `--target manager` (the default), `--target sidecar` and
# `--target sample-server`. Static binaries on an empty base running as the distroless
# "nonroot" user (65532): no shell or package manager at runtime. To run on a distroless image
# instead, pass --build-arg RUNTIME_IMAGE=<your distroless/static:nonroot mirror>.
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG RUNTIME_IMAGE=scratch

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -trimpath \
      -ldflags "-s -w -X github.com/switchboard-mcp/switchboard/internal/version.Version=${VERSION}" \
      -o /out/ ./cmd/...

FROM ${RUNTIME_IMAGE} AS runtime
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
USER 65532:65532

FROM runtime AS sidecar
COPY --from=build /out/sidecar /sidecar
ENTRYPOINT ["/sidecar"]

FROM runtime AS sample-server
COPY --from=build /out/sample-server /sample-server
ENTRYPOINT ["/sample-server", "--listen=127.0.0.1:8080"]

FROM runtime AS manager
COPY --from=build /out/manager /manager
ENTRYPOINT ["/manager"]
