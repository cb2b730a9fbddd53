# The manager's image, for those who build with a container engine (make docker-build). `make image`
# builds the same image without one (hack/image, internal/image, docs/image.md): the same two
# static binaries, the same /etc/passwd and /etc/group, the CA bundle, user, entrypoint and labels.
# test/image fails when this file and internal/image/spec.go disagree.

# Build the manager and the schema reporter: static (CGO_ENABLED=0), no paths, no VCS stamp, no
# symbols, as internal/image.BuildFlags.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY api/ api/
COPY controllers/ controllers/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/ ./cmd/manager ./cmd/schemagate-schema

# schemagate-schema (docker build --target schemagate-schema): the reporter for migration and
# check Jobs (docs/schemagate-schema.md). Static, so it can also be copied into a migration image:
# COPY --from=<this image> /schemagate-schema /usr/local/bin/schemagate-schema
FROM scratch AS schemagate-schema
COPY internal/image/rootfs/etc/passwd internal/image/rootfs/etc/group /etc/
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/schemagate-schema /schemagate-schema
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/schemagate-schema"]

# The manager (the default target): an empty base, the nonroot user 65532, no shell.
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/schemagate/schemagate" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}"
COPY internal/image/rootfs/etc/passwd internal/image/rootfs/etc/group /etc/
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/manager /out/schemagate-schema /
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/manager"]
