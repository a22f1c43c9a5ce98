#!/usr/bin/env bash
# Build kubectl, at the test bed's release, into BIN_DIR/kubectl.
#
#   xtask/k8s-testbed/kubectl/build.sh BIN_DIR
#
# A script and a stamp of its own (BIN_DIR/.kubectl.stamp: the hash of `go version`,
# go.mod, go.sum, this script, main.go and ../common.sh), beside the testbed's and the kstatus
# helper's, so that neither changes the testbed's stamp (which would rebuild
# kube-apiserver). k8s.io/kubectl at v0.37.2, the release of the bed's kube-apiserver
# (v1.37.2): the tests and the release's downstream step run this kubectl, never one
# from the machine's PATH (a fresh Debian 12 has none; Debian's kubernetes-client is
# 1.20 and cannot read the manifests' `patches:`). Builds strictly from the committed
# go.mod/go.sum (-mod=readonly).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/../common.sh"

cd "$here"

version=$(awk '$1 == "k8s.io/kubectl" && $2 ~ /^v0\./ { print $2; exit }' go.mod)
if [[ -z $version ]]; then
  echo "kubectl/build.sh: cannot read k8s.io/kubectl's version from go.mod" >&2
  exit 1
fi
# k8s.io/kubectl v0.N.P is Kubernetes v1.N.P.
minor=${version#v0.}; minor=${minor%%.*}
release="v1.${version#v0.}"

stamp=$(
  {
    "$GO" version
    cat go.mod go.sum build.sh main.go "$here/../common.sh"
  } | sha256sum | cut -d' ' -f1
)

if [[ -f $bin/.kubectl.stamp && $(cat "$bin/.kubectl.stamp") == "$stamp" && -x $bin/kubectl ]]; then
  echo "kubectl/build.sh: $bin/kubectl is up to date ($release)"
  exit 0
fi

export CGO_ENABLED=0
export GOFLAGS=-mod=readonly

tmp=$(mktemp -d "$bin/.build-kubectl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# `kubectl version --client` reports the release, as an official build does.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$release -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
done

t0=$SECONDS
echo "kubectl/build.sh: building kubectl $release ..."
"$GO" build -trimpath -ldflags "$ldflags" -o "$tmp/kubectl" .
rm -f "$bin/.kubectl.stamp"
mv -f "$tmp/kubectl" "$bin/kubectl"
echo "$stamp" > "$bin/.kubectl.stamp"
echo "kubectl/build.sh: done in $((SECONDS - t0))s -> $bin/kubectl ($release)"
