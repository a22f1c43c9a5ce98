package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// freePorts returns n distinct TCP ports free on 127.0.0.1 now, chosen below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range). A port from that
// range can be handed to any outgoing connection or `bind(0)` — a test's fake
// server, a client redialing — while kube-apiserver is down for a
// restart test, and the restart then fails with "address already in use"
// (seen in CI). Below the range only an explicit bind can take it. When the
// range leaves no room below it, the kernel's choice is the fallback; a race
// with another process is handled by the callers' retries.
func freePorts(n int) ([]int, error) {
	lo := ephemeralLow()
	const floor = 20000 // above the well-known and registered services we run
	if lo-floor < 1000 {
		return kernelPorts(n)
	}
	seen := map[int]bool{}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return kernelPorts(n)
		}
		port := floor + rand.IntN(lo-floor)
		if seen[port] {
			continue
		}
		seen[port] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		l.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when
// it cannot be read: Linux's default).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

// kernelPorts returns n distinct ports the kernel picks (bind to port 0).
func kernelPorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// childEnv is the environment for etcd and kube-apiserver: ours without proxy
// settings (both only talk to 127.0.0.1).
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "KUBECONFIG":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1")
}

// proc is a detached child: its own session and process group (setsid), stdin
// /dev/null, stdout+stderr appended to a log file. exited is closed when it exits
// while this launcher still runs (so waits can stop early).
type proc struct {
	pid    int
	exited chan struct{}
	err    error
}

func startDetached(argv []string, logPath, workDir string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "\n===== %s testbed: starting %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = devnull
	cmd.Stdout = lf
	cmd.Stderr = lf
	cmd.Dir = workDir
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// processState returns the /proc state letter of pid ("" when there is no such
// process). A zombie ("Z") has exited but was not reaped yet.
func processState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	s := processState(pid)
	return s != "" && s != "Z" && s != "X"
}

// argv0 is the first element of pid's command line.
func argv0(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	a, _, _ := bytes.Cut(b, []byte{0})
	return string(a)
}

// ownedPid reads a pid file and returns the pid if that process is alive and runs
// the expected binary (guards against pid reuse); 0 otherwise.
func ownedPid(pidFile, binary string) int {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !alive(pid) {
		return 0
	}
	if binary != "" && argv0(pid) != binary {
		return 0
	}
	return pid
}

func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopProcess sends SIGTERM to pid's process group (it is a group leader since
// setsid), waits up to grace, then SIGKILLs and waits again.
func stopProcess(name string, pid int, grace time.Duration) error {
	if !alive(pid) {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	// A test may have SIGSTOPped it: a stopped process only sees SIGTERM once continued.
	_ = syscall.Kill(-pid, syscall.SIGCONT)
	if waitGone(pid, grace) {
		fmt.Printf("%s (pid %d) stopped with SIGTERM\n", name, pid)
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, 10*time.Second) {
		fmt.Printf("%s (pid %d) killed with SIGKILL after %s\n", name, pid, grace)
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, pid)
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// heldLock keeps the lock file referenced: an unreferenced *os.File is closed by
// its finalizer at the next GC, which would drop the flock.
var heldLock *os.File

// lockDir takes an exclusive flock on DIR.testbed.lock (a sibling of DIR, since down deletes
// DIR) so that concurrent up/down/restart calls on one testbed serialise. The lock
// is released when the process exits.
func lockDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dir+".testbed.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			heldLock = f // stays open (and locked) until exit
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("locking %s.testbed.lock: %w", dir, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s.testbed.lock is held by another testbed command for 5 minutes", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
