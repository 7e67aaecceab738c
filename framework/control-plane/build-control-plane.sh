#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from source with Go and installs them into the
# setup-envtest store folder given as $1. Used when no prebuilt binaries are available
# (machines that reach the Go module proxy but not the internet). Idempotent: the Go build
# cache makes a second run fast.
set -euo pipefail
dest=${1:?usage: build-control-plane.sh <install-dir>}
k8s_version=${K8S_VERSION:-1.36.2}
etcd_version=${ETCD_VERSION:-3.6.8}
minor=${k8s_version#*.}; minor=${minor%%.*}
work=$(mktemp -d -t control-plane-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
step() { printf '[control-plane build] %s\n' "$*" >&2; }

command -v go >/dev/null || { echo "go not found on PATH" >&2; exit 3; }

step "resolving k8s.io/kubernetes v$k8s_version go.mod"
gomod=$(go mod download -json "k8s.io/kubernetes@v$k8s_version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
mkdir -p "$work/apiserver" "$work/etcd"
cd "$work/apiserver"
cat > go.mod <<MOD
module proxyoperator.local/apiserverbuild

go 1.26

require k8s.io/kubernetes v$k8s_version
MOD
# Staging modules are replaced by their published v0.<minor>.<patch> versions before any go get.
grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" | awk '{print $1}' | sort -u |
  while read -r m; do echo "replace $m => $m v0.${k8s_version#*.}"; done >> go.mod
step "$(grep -c '^replace' go.mod) staging modules replaced"
step "fetching kube-apiserver dependencies (first run downloads ~1 GB of modules)"
go get k8s.io/kubernetes/cmd/kube-apiserver@v"$k8s_version" k8s.io/kubernetes/cmd/kubectl@v"$k8s_version" >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=v$k8s_version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
step "compiling kube-apiserver (several minutes on two cores when cold)"
go build -trimpath -ldflags "$ldflags" -o "$work/out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
step "compiling kubectl"
go build -trimpath -ldflags "$ldflags" -o "$work/out/kubectl" k8s.io/kubernetes/cmd/kubectl

cd "$work/etcd"
cat > go.mod <<MOD
module proxyoperator.local/etcdbuild

go 1.26
MOD
cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
step "fetching etcd v$etcd_version dependencies"
go get "go.etcd.io/etcd/server/v3@v$etcd_version" >&2
go mod tidy >&2
step "compiling etcd"
go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" .

mkdir -p "$dest"
for b in kube-apiserver kubectl etcd; do install -m 0755 "$work/out/$b" "$dest/$b.tmp" && mv -f "$dest/$b.tmp" "$dest/$b"; done
step "installed into $dest"
