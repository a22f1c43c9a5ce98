#!/usr/bin/env bash
# Build the kstatus helper into BIN_DIR/kstatus.
#
#   xtask/k8s-testbed/kstatus/build.sh BIN_DIR
#
# A script of its own beside the testbed's build.sh, with a stamp of its own
# (BIN_DIR/.kstatus.stamp: the hash of `go version`, go.mod, go.sum, this script, ../common.sh and
# the *.go sources but tests), so that neither editing kstatus nor editing this script
# changes the testbed's stamp, which would rebuild kube-apiserver. Builds strictly from
# the committed go.mod/go.sum (-mod=readonly); k8s.io/* are at the testbed's versions,
# so after the testbed's build the module cache and build cache already hold them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/../common.sh"

cd "$here"

stamp=$(
  {
    "$GO" version
    cat go.mod go.sum build.sh "$here/../common.sh"
    find . -type f -name '*.go' ! -name '*_test.go' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1
)

if [[ -f $bin/.kstatus.stamp && $(cat "$bin/.kstatus.stamp") == "$stamp" && -x $bin/kstatus ]]; then
  echo "kstatus/build.sh: $bin/kstatus is up to date"
  exit 0
fi

export CGO_ENABLED=0
export GOFLAGS=-mod=readonly

tmp=$(mktemp -d "$bin/.build-kstatus.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

t0=$SECONDS
echo "kstatus/build.sh: building kstatus ..."
"$GO" build -trimpath -ldflags "-s -w" -o "$tmp/kstatus" .
rm -f "$bin/.kstatus.stamp"
mv -f "$tmp/kstatus" "$bin/kstatus"
echo "$stamp" > "$bin/.kstatus.stamp"
echo "kstatus/build.sh: done in $((SECONDS - t0))s -> $bin/kstatus"
