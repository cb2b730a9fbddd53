#!/usr/bin/env bash
# Builds the control-plane binaries that envtest and the local cluster run, the Prometheus server
# test/prometheus runs and the promtool test/alerts runs, from source through the Go module proxy,
# and caches them under bin/k8s/ (git-ignored). Nothing prebuilt is downloaded.
#
# Usage: hack/build-binaries.sh [etcd] [kube-apiserver] [kubectl] [kube-controller-manager]
#                               [kube-scheduler] [kwok] [prometheus] [promtool] [helm]
#                               [source-controller] [kustomize-controller]
#        (no arguments: etcd kube-apiserver kubectl, the set envtest needs)
#
# Flux's source-controller and kustomize-controller (the GitOps stories) are built from hack/flux;
# each gets its CRDs beside it as <name>.crds.yaml, copied from the module it is built from.
#
# Each binary gets a stamp recording what it was built from (the helper module's go.sum and the Go
# version); a binary whose stamp matches is not built again. A second cache outside the checkout
# ($SCHEMAGATE_BIN_CACHE, default ~/.cache/schemagate/bin) lets a fresh clone on the same machine
# reuse binaries instead of relinking them (kube-apiserver: ~7.5 min cold, ~3 GB memory).
# Prints the folder holding the binaries as its last line.
#
# K8S_SET=oldest builds the Kubernetes binaries of the oldest minor schemagate supports instead
# (hack/k8s-oldest, into bin/k8s-oldest/, cached apart), for `make test-compat`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="${SCHEMAGATE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/schemagate/bin}"
case "${K8S_SET:-current}" in
  current) k8s_version=v1.37.2; k8s_module="$root/hack/k8s"; out="$root/bin/k8s" ;;
  oldest) k8s_version=v1.35.4; k8s_module="$root/hack/k8s-oldest"; out="$root/bin/k8s-oldest"; cache="$cache/k8s-oldest" ;;
  *) echo "K8S_SET must be current or oldest, not ${K8S_SET}" >&2; exit 2 ;;
esac
mkdir -p "$out" "$cache"

etcd_version=v3.6.16
kwok_version=v0.8.0
# The helm CLI the release tests run (`helm repo add`, `helm install`); the same version as the
# Helm library in go.mod, which renders and lints the chart in test/install.
helm_version=v4.3.1
# Must match the require of hack/prometheus/go.mod; module v0.316.0 is Prometheus 3.16.0.
prometheus_version=v0.316.0
prometheus_release=3.16.0
# Service discovery: file and http (always built in) and kubernetes only. Without the cloud providers'
# SDKs the cold build takes half the time and a third of the memory (measured: 2 min 19 s and 1.3 GB
# instead of 4 min 47 s and 3.3 GB). Without builtinassets the web UI's assets are not embedded
# either: tests use the API.
prometheus_tags=remove_all_sd,enable_kubernetes_sd
# Must match the requires of hack/flux/go.mod (v1.10.x cannot be built from the module proxy: it
# answers 403 for fluxcd/pkg versions those need).
flux_version=v1.9.0
goversion=$(go env GOVERSION)

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(etcd kube-apiserver kubectl)

k8s_ldflags() {
  local minor=${k8s_version#v1.}; minor=${minor%%.*}
  local f="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f="$f -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    f="$f -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$f"
}

stamp_of() {
  case "$1" in
    etcd) echo "etcd $etcd_version $goversion $(sha256sum "$root/hack/etcd/go.sum" | cut -c1-16)" ;;
    kwok) echo "kwok $kwok_version $goversion" ;;
    helm) echo "helm $helm_version $goversion" ;;
    source-controller|kustomize-controller) echo "$1 $flux_version $goversion $(sha256sum "$root/hack/flux/go.sum" | cut -c1-16)" ;;
    prometheus|promtool) echo "$1 $prometheus_version $goversion $(sha256sum "$root/hack/prometheus/go.sum" | cut -c1-16) $prometheus_tags" ;;
    *) echo "$1 $k8s_version $goversion $(sha256sum "$k8s_module/go.sum" | cut -c1-16)" ;;
  esac
}

# extras_of names the files built beside a binary (in the same folder), cached with it.
extras_of() {
  case "$1" in
    source-controller|kustomize-controller) echo "$1.crds.yaml" ;;
  esac
}

build() {
  local name=$1 dest=$2
  case "$name" in
    etcd) (cd "$root/hack/etcd" && go build -trimpath -ldflags "-s -w" -o "$dest" go.etcd.io/etcd/server/v3) ;;
    kwok) GOBIN=$(dirname "$dest") go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
          [ "$(dirname "$dest")/kwok" = "$dest" ] || mv "$(dirname "$dest")/kwok" "$dest" ;;
    helm) GOBIN=$(dirname "$dest") go install -trimpath \
            -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" "helm.sh/helm/v4/cmd/helm@$helm_version"
          [ "$(dirname "$dest")/helm" = "$dest" ] || mv "$(dirname "$dest")/helm" "$dest" ;;
    prometheus|promtool) (cd "$root/hack/prometheus" && go build -trimpath -tags "$prometheus_tags" \
                   -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prometheus_release" \
                   -o "$dest" "github.com/prometheus/prometheus/cmd/$name") ;;
    source-controller|kustomize-controller)
      (cd "$root/hack/flux" && go build -trimpath -ldflags "-s -w" -o "$dest" "github.com/fluxcd/$name")
      local src
      src=$(cd "$root/hack/flux" && go list -m -f '{{.Dir}}' "github.com/fluxcd/$name")
      for f in "$src"/config/crd/bases/*.yaml; do echo "---"; cat "$f"; done > "$dest.crds.yaml" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl)
      (cd "$k8s_module" && go build -trimpath -ldflags "$(k8s_ldflags)" -o "$dest" "k8s.io/kubernetes/cmd/$name") ;;
    *) echo "unknown binary: $name" >&2; exit 2 ;;
  esac
}

for name in "${names[@]}"; do
  # One build of a binary at a time: make test and make test-e2e may run together.
  exec 9>"$out/.$name.lock"
  flock 9
  want=$(stamp_of "$name")
  if [ -x "$out/$name" ] && [ "$(cat "$out/.$name.stamp" 2>/dev/null)" = "$want" ]; then
    continue
  fi
  if [ -x "$cache/$name" ] && [ "$(cat "$cache/.$name.stamp" 2>/dev/null)" = "$want" ]; then
    for x in $(extras_of "$name"); do cp "$cache/$x" "$out/$x"; done
    cp "$cache/$name" "$out/$name.tmp" && mv "$out/$name.tmp" "$out/$name"
    echo "$want" > "$out/.$name.stamp"
    echo "reused $name from $cache" >&2
    continue
  fi
  start=$(date +%s)
  note=""
  [ "$name" = kube-apiserver ] && note="; a cold build takes ~8-10 minutes and ~3 GB of memory"
  [ "$name" = prometheus ] && note="; a cold build takes ~2.5 minutes and ~1.3 GB of memory"
  [ "$name" = promtool ] && note="; a cold build takes a few minutes"
  [ "${name%-controller}" != "$name" ] && note="; a cold build takes several minutes"
  echo "building $name ($want)$note" >&2
  build "$name" "$out/$name.tmp"
  for x in $(extras_of "$name"); do mv "$out/${x/$name/$name.tmp}" "$out/$x"; cp "$out/$x" "$cache/$x"; done
  mv "$out/$name.tmp" "$out/$name"
  echo "$want" > "$out/.$name.stamp"
  cp "$out/$name" "$cache/$name.tmp" && mv "$cache/$name.tmp" "$cache/$name" && echo "$want" > "$cache/.$name.stamp"
  echo "built $name in $(( $(date +%s) - start ))s" >&2
done
echo "$out"
