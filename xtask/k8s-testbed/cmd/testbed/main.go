// Command testbed runs a real etcd + kube-apiserver on 127.0.0.1 for lookout's
// Kubernetes tests. No controllers, scheduler or kubelet run: objects are stored and
// watched, nothing reconciles them.
//
//	testbed up                --dir DIR [--bin BINDIR] [--apiserver-arg ARG]... [--etcd-arg ARG]...
//	testbed down              --dir DIR [--keep-logs]
//	testbed status            --dir DIR
//	testbed env               --dir DIR
//	testbed kill-apiserver    --dir DIR
//	testbed restart-apiserver --dir DIR
//	testbed compact           --dir DIR [--no-bump]
//	testbed selftest          --dir DIR
//
// BINDIR holds kube-apiserver and etcd (default: the directory of this program).
// DIR defaults to $LOOKOUT_K8S_TESTBED_DIR.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func usage() {
	fmt.Fprint(os.Stderr, `usage: testbed COMMAND --dir DIR [flags]

commands:
  up                 start etcd + kube-apiserver (idempotent), write DIR/kubeconfig and DIR/env
  down               stop both (SIGTERM, then SIGKILL) and delete DIR (idempotent)
  status             exit 0 if etcd and kube-apiserver are healthy
  env                print DIR/env
  kill-apiserver     SIGKILL kube-apiserver and wait until it is gone
  restart-apiserver  start kube-apiserver again with DIR/apiserver.args, wait for /readyz
  compact            write a dummy etcd key twice, then compact etcd (physical) at its
                     current revision and print it: every resourceVersion handed out
                     before the call is then expired (watch -> ERROR 410 Expired)
  selftest           list/create/scale a Deployment, compact, expect 410 on an old watch

flags:
  --dir DIR          state directory (default $LOOKOUT_K8S_TESTBED_DIR)
  --bin DIR          where kube-apiserver and etcd are (up only; default: this program's dir)
  --apiserver-arg A  extra kube-apiserver flag, repeatable (up only), e.g. --apiserver-arg=--v=2
  --etcd-arg A       extra etcd flag, repeatable (up only)
  --keep-logs        down: keep DIR/*.log
  --no-bump          compact: skip the two dummy writes (then only resourceVersions
                     <= revision-2 expire; revision-1 gives a 500 PrevKv=nil on watch)
`)
}

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	fs.Usage = usage
	dir := fs.String("dir", os.Getenv("LOOKOUT_K8S_TESTBED_DIR"), "")
	bin := fs.String("bin", "", "")
	keepLogs := fs.Bool("keep-logs", false, "")
	noBump := fs.Bool("no-bump", false, "")
	var apiArgs, etcdArgs stringList
	fs.Var(&apiArgs, "apiserver-arg", "")
	fs.Var(&etcdArgs, "etcd-arg", "")
	_ = fs.Parse(os.Args[2:])
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "testbed: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "testbed: --dir is required")
		os.Exit(2)
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		fatal(err)
	}

	switch cmd {
	case "up", "down", "kill-apiserver", "restart-apiserver":
		if err := lockDir(absDir); err != nil {
			fatal(err)
		}
	}

	switch cmd {
	case "up":
		binDir := *bin
		if binDir == "" {
			exe, err := os.Executable()
			if err != nil {
				fatal(err)
			}
			binDir = filepath.Dir(exe)
		}
		binDir, err = filepath.Abs(binDir)
		if err != nil {
			fatal(err)
		}
		err = cmdUp(absDir, binDir, apiArgs, etcdArgs)
	case "down":
		err = cmdDown(absDir, *keepLogs)
	case "status":
		err = cmdStatus(absDir)
	case "env":
		err = cmdEnv(absDir)
	case "kill-apiserver":
		err = cmdKillAPIServer(absDir)
	case "restart-apiserver":
		err = cmdRestartAPIServer(absDir)
	case "compact":
		err = cmdCompact(absDir, *noBump)
	case "selftest":
		err = cmdSelftest(absDir)
	case "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "testbed: unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "testbed:", err)
	os.Exit(1)
}
