# Sourced by the bed's build scripts (build.sh, kstatus/build.sh,
# kubectl/build.sh) with the script's BIN_DIR argument: checks it, and sets
#   bin  BIN_DIR, created, as an absolute path;
#   GO   the Go to build with: $GO if set, else `go` on PATH, else
#        /usr/local/go/bin/go.
# Each script hashes this file into its stamp, so a change here rebuilds.
if [[ $# -ne 1 ]]; then
  echo "usage: $0 BIN_DIR" >&2
  exit 2
fi
mkdir -p "$1"
bin=$(cd "$1" && pwd)

GO=${GO:-}
if [[ -z $GO ]]; then
  if command -v go >/dev/null 2>&1; then GO=go
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else echo "$0: no go on PATH (set GO=/path/to/go)" >&2; exit 1
  fi
fi
