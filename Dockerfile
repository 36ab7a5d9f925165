# One image holding every Kagzi binary in /usr/local/bin, chosen by the
# command (there is no ENTRYPOINT):
#
#   docker build -t kagzi .
#   docker run kagzi dispatcher        # cmd/dispatcher, the service in services/dispatcher
#   docker run kagzi scheduler         # cmd/scheduler, the service in services/scheduler
#   docker run kagzi reaper            # cmd/reaper, the service in services/reaper
#   docker run kagzi worker            # cmd/worker, the service in services/worker (NATS only)
#   docker run kagzi kagzi migrate     # the CLI (cmd/kagzi)
#   docker run kagzi healthcheck URL   # exit 0 when GET URL answers 200 (cmd/healthcheck)
#
# Every binary is static (CGO_ENABLED=0), so the runtime stage is distroless
# "static": CA certificates, tzdata and /etc/passwd, no shell, running as
# the non-root user 65532. Configuration comes from KAGZI_* variables (see
# docs/configuration.md); the services serve /healthz and /readyz on :8080.
#
# The CLI is a module of its own (cmd/kagzi/go.mod, so that applications of
# the public packages do not depend on what only the CLI needs): it is built
# in its directory, with its own go.mod and go.sum, never through the
# workspace (GOWORK=off; go.work also names modules the build context
# leaves out), so each binary is built with exactly the versions its module
# selects. Its go.mod requires the root module at the release version
# (`go install .../cmd/kagzi@version` works); the build, here only, replaces
# that by the root's directory, which is the same tree, so nothing is asked
# of a proxy for it. deploy/dockerfile_test.go checks that the build lines
# name every main package of every module (each in its module's directory)
# and that GO_VERSION matches go.mod.
#
# There is no "# syntax=" line: BuildKit's built-in Dockerfile frontend
# (Docker 20.10 or newer) has everything used here, RUN --mount=type=cache
# included, while a syntax line makes every build first fetch the frontend
# image from Docker Hub, which fails where no registry is reachable.
# `make test-compose` builds this file unchanged through a real engine.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local GOWORK=off
# Modules first, in their own layer: it is rebuilt only when a go.mod or
# go.sum changes, not on every source edit. The CLI's module is pointed at
# the root's directory, so the root go.mod comes first; COPY . . brings the
# go.mod back as committed, so the build below points it again.
COPY go.mod go.sum ./
COPY cmd/kagzi/go.mod cmd/kagzi/go.sum ./cmd/kagzi/
RUN go mod download && go mod verify && \
    go -C cmd/kagzi mod edit -replace github.com/kagzi/kagzi=../.. && \
    go -C cmd/kagzi mod download && go -C cmd/kagzi mod verify
COPY . .
# Cross-compile for the platform being built (docker buildx --platform).
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/root/.cache/go-build \
    export GOOS=${TARGETOS} GOARCH=${TARGETARCH} && \
    go build -trimpath -ldflags="-s -w" -o /out/ \
        ./cmd/healthcheck \
        ./cmd/dispatcher \
        ./cmd/scheduler \
        ./cmd/reaper \
        ./cmd/worker && \
    go -C cmd/kagzi mod edit -replace github.com/kagzi/kagzi=../.. && \
    go -C cmd/kagzi build -trimpath -ldflags="-s -w" -o /out/ .

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="kagzi" \
      org.opencontainers.image.description="Kagzi durable workflow engine: dispatcher, scheduler, reaper, worker, kagzi CLI"
COPY --from=build /out/ /usr/local/bin/
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
EXPOSE 8080
CMD ["kagzi", "--help"]
