#!/usr/bin/env bash
# Build kube-apiserver, etcd and the testbed launcher into BIN_DIR.
#
#   xtask/k8s-testbed/build.sh BIN_DIR
#
# Skips the build when BIN_DIR/.stamp equals the hash of go.mod, go.sum, this script,
# common.sh, the launcher sources and `go version`. Needs only Go (>= 1.26.0, or any Go that can
# fetch that toolchain) and the Go module proxy; go.sum is committed, no -mod=mod.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

cd "$here"

# Versions come from go.mod (no network needed to read them).
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' go.mod)
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v3\./ { print $2; exit }' go.mod)
if [[ -z $k8s_version || -z $etcd_version ]]; then
  echo "build.sh: cannot read k8s.io/kubernetes / etcd versions from go.mod" >&2
  exit 1
fi
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}

stamp=$(
  {
    "$GO" version
    cat go.mod go.sum build.sh "$here/common.sh"
    find cmd -type f -name '*.go' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1
)

if [[ -f $bin/.stamp && $(cat "$bin/.stamp") == "$stamp" \
      && -x $bin/kube-apiserver && -x $bin/etcd && -x $bin/testbed ]]; then
  echo "build.sh: $bin is up to date (kube-apiserver $k8s_version, etcd $etcd_version)"
  exit 0
fi

export CGO_ENABLED=0
# Build strictly from the committed go.mod/go.sum, whatever the caller's GOFLAGS say.
export GOFLAGS=-mod=readonly

tmp=$(mktemp -d "$bin/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
done

t0=$SECONDS
echo "build.sh: building kube-apiserver $k8s_version ..."
"$GO" build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
t1=$SECONDS
echo "build.sh: building etcd $etcd_version ..."
"$GO" build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
t2=$SECONDS
echo "build.sh: building testbed launcher ..."
"$GO" build -trimpath -o "$tmp/testbed" ./cmd/testbed
t3=$SECONDS

rm -f "$bin/.stamp"
mv -f "$tmp/kube-apiserver" "$tmp/etcd" "$tmp/testbed" "$bin/"
echo "$stamp" > "$bin/.stamp"
echo "build.sh: done in $((t3 - t0))s (kube-apiserver $((t1 - t0))s, etcd $((t2 - t1))s, testbed $((t3 - t2))s) -> $bin"
