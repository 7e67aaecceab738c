#!/usr/bin/env bash
# Builds kubelet, kube-proxy, kube-controller-manager and kube-scheduler from the
# k8s.io/kubernetes Go module, the way framework/control-plane/build-control-plane.sh builds
# kube-apiserver (same module graph, same ldflags, so the Go build cache is shared), and
# installs them into the store folder given as $1 beside kube-apiserver. A binary already
# there is kept: the store is the cache.
set -euo pipefail
dest=${1:?usage: build-node-binaries.sh <store-dir>}
k8s_version=${K8S_VERSION:-1.36.2}
minor=${k8s_version#*.}; minor=${minor%%.*}
bins=(kubelet kube-proxy kube-controller-manager kube-scheduler)
step() { printf '[node build] %s\n' "$*" >&2; }

missing=()
for b in "${bins[@]}"; do [ -x "$dest/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then step "all in $dest"; exit 0; fi
command -v go >/dev/null || { echo "go not found on PATH (needed to build ${missing[*]})" >&2; exit 3; }

work=$(mktemp -d -t proxy-operator-node-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
gomod=$(go mod download -json "k8s.io/kubernetes@v$k8s_version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
cd "$work"
cat > go.mod <<MOD
module proxyoperator.local/nodebuild

go 1.26

require k8s.io/kubernetes v$k8s_version
MOD
grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" | awk '{print $1}' | sort -u |
  while read -r m; do echo "replace $m => $m v0.${k8s_version#*.}"; done >> go.mod
step "fetching dependencies of ${missing[*]}"
pkgs=(); for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b@v$k8s_version"); done
go get "${pkgs[@]}" >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=v$k8s_version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
mkdir -p "$dest"
for b in "${missing[@]}"; do
  start=$SECONDS
  step "compiling $b (kubelet: ~1 min warm, ~5 min cold on two cores)"
  go build -trimpath -ldflags "$ldflags" -o "$work/$b" "k8s.io/kubernetes/cmd/$b"
  install -m 0755 "$work/$b" "$dest/$b.tmp" && mv -f "$dest/$b.tmp" "$dest/$b"
  step "$b built in $((SECONDS - start)) s"
done
step "installed into $dest"
