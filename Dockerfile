# Build the manager and the schema reporter.
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
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o manager ./cmd
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o schemagate-schema ./cmd/schemagate-schema

# schemagate-schema (docker build --target schemagate-schema): the reporter for migration and
# check Jobs (docs/schemagate-schema.md). Static, so it can also be copied into a migration image:
# COPY --from=<this image> /schemagate-schema /usr/local/bin/schemagate-schema
FROM gcr.io/distroless/static:nonroot AS schemagate-schema
WORKDIR /
COPY --from=builder /workspace/schemagate-schema .
USER 65532:65532
ENTRYPOINT ["/schemagate-schema"]

# The manager (the default target), as a non-root user on distroless.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532
ENTRYPOINT ["/manager"]
