package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Files in the state directory.
const (
	markerFile     = ".k8s-testbed" // down only deletes directories that carry it
	stateFile      = "state.json"
	envFile        = "env"
	kubeconfigFile = "kubeconfig"
	etcdDataDir    = "etcd"
	etcdLog        = "etcd.log"
	etcdPidFile    = "etcd.pid"
	etcdArgsFile   = "etcd.args"
	apiLog         = "apiserver.log"
	apiPidFile     = "apiserver.pid"
	apiArgsFile    = "apiserver.args"
	pkiDir         = "pki"
)

// Time bounds.
const (
	etcdStartTimeout = 30 * time.Second
	apiStartTimeout  = 120 * time.Second
	apiStopGrace     = 15 * time.Second
	etcdStopGrace    = 10 * time.Second
	startAttempts    = 3  // new ports on each attempt when the process exits early
	restartAttempts  = 10 // same port: it may be taken for a moment
	restartPause     = time.Second
)

type state struct {
	Dir          string `json:"dir"`
	BinDir       string `json:"bin_dir"`
	Etcd         string `json:"etcd"`
	APIServer    string `json:"apiserver"`
	EtcdURL      string `json:"etcd_url"`
	EtcdPeerURL  string `json:"etcd_peer_url"`
	APIServerURL string `json:"apiserver_url"`
	Version      string `json:"version"`
}

func (st *state) path(name string) string { return filepath.Join(st.Dir, name) }

func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", stateFile, err)
	}
	st.Dir = dir
	return &st, nil
}

func (st *state) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(st.path(stateFile), append(b, '\n'), 0o644)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ---------------------------------------------------------------- HTTP clients

var plainClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// apiClient trusts DIR/pki/ca.crt and authenticates as admin (system:masters).
// timeout 0 means none (for watches).
func (st *state) apiClient(timeout time.Duration) (*http.Client, error) {
	caPEM, err := os.ReadFile(st.path(filepath.Join(pkiDir, caCert)))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no certificate in " + caCert)
	}
	cert, err := tls.LoadX509KeyPair(st.path(filepath.Join(pkiDir, adminCert)), st.path(filepath.Join(pkiDir, adminKey)))
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		},
	}, nil
}

func httpDo(c *http.Client, method, url, contentType string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// ---------------------------------------------------------------- health checks

func etcdHealthy(url string) error {
	code, body, err := httpDo(plainClient, "GET", url+"/health", "", nil)
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(body, &h)
	if code != 200 || h.Health != "true" {
		return fmt.Errorf("etcd /health: HTTP %d %s", code, strings.TrimSpace(string(body)))
	}
	return nil
}

func (st *state) apiReady(c *http.Client) error {
	code, body, err := httpDo(c, "GET", st.APIServerURL+"/readyz", "", nil)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("/readyz: HTTP %d %s", code, strings.TrimSpace(string(body)))
	}
	code, body, err = httpDo(c, "GET", st.APIServerURL+"/api/v1/namespaces/default", "", nil)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("namespace default: HTTP %d %s", code, strings.TrimSpace(string(body)))
	}
	return nil
}

func (st *state) apiVersion(c *http.Client) string {
	_, body, err := httpDo(c, "GET", st.APIServerURL+"/version", "", nil)
	if err != nil {
		return ""
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	_ = json.Unmarshal(body, &v)
	return v.GitVersion
}

// health checks both processes; nil when all is well.
func (st *state) health() error {
	if pid := ownedPid(st.path(etcdPidFile), st.Etcd); pid == 0 {
		return errors.New("etcd is not running")
	}
	if err := etcdHealthy(st.EtcdURL); err != nil {
		return err
	}
	if pid := ownedPid(st.path(apiPidFile), st.APIServer); pid == 0 {
		return errors.New("kube-apiserver is not running")
	}
	c, err := st.apiClient(5 * time.Second)
	if err != nil {
		return err
	}
	return st.apiReady(c)
}

// waitFor polls check every 100 ms until it succeeds, p exits, or timeout.
func waitFor(name string, p *proc, timeout time.Duration, check func() error) (time.Duration, error) {
	start := time.Now()
	var last error
	for {
		if last = check(); last == nil {
			return time.Since(start), nil
		}
		if p != nil {
			select {
			case <-p.exited:
				return time.Since(start), fmt.Errorf("%s exited during start-up (%v)", name, p.err)
			default:
			}
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("%s not ready after %s: %v", name, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---------------------------------------------------------------- up

func cmdUp(dir, binDir string, extraAPI, extraEtcd []string) error {
	if st, err := loadState(dir); err == nil {
		if herr := st.health(); herr == nil {
			fmt.Printf("testbed already up in %s\n", dir)
			return cmdEnv(dir)
		} else {
			fmt.Printf("testbed in %s is not healthy (%v): recreating it\n", dir, herr)
		}
	}
	if err := teardown(dir, true, true); err != nil { // keep old logs
		return err
	}

	st := &state{
		Dir:       dir,
		BinDir:    binDir,
		Etcd:      filepath.Join(binDir, "etcd"),
		APIServer: filepath.Join(binDir, "kube-apiserver"),
	}
	for _, b := range []string{st.Etcd, st.APIServer} {
		if fi, err := os.Stat(b); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing or not executable (build it with xtask/k8s-testbed/build.sh %s)", b, binDir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(st.path(markerFile), []byte("state directory of lookout's k8s testbed; `testbed down` deletes it\n"), 0o644); err != nil {
		return err
	}
	t0 := time.Now()
	if err := generatePKI(st.path(pkiDir)); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	fmt.Printf("generated CA, serving cert (127.0.0.1, ::1, localhost), client CA, admin client cert (CN=admin, O=system:masters), service-account key in %s (%s)\n",
		st.path(pkiDir), time.Since(t0).Round(time.Millisecond))

	if err := st.startEtcd(extraEtcd); err != nil {
		return err
	}
	if err := st.startAPIServer(extraAPI); err != nil {
		if pid := ownedPid(st.path(etcdPidFile), st.Etcd); pid != 0 {
			_ = stopProcess("etcd", pid, etcdStopGrace)
		}
		return err
	}
	if err := st.writeClientFiles(); err != nil {
		return err
	}
	if err := st.save(); err != nil {
		return err
	}
	fmt.Printf("testbed up in %s (%s)\n", dir, time.Since(t0).Round(time.Millisecond))
	return cmdEnv(dir)
}

func (st *state) startEtcd(extra []string) error {
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		st.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		st.EtcdPeerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		_ = os.RemoveAll(st.path(etcdDataDir))
		argv := []string{
			st.Etcd,
			"--name=default",
			"--data-dir=" + st.path(etcdDataDir),
			"--listen-client-urls=" + st.EtcdURL,
			"--advertise-client-urls=" + st.EtcdURL,
			"--listen-peer-urls=" + st.EtcdPeerURL,
			"--initial-advertise-peer-urls=" + st.EtcdPeerURL,
			"--initial-cluster=default=" + st.EtcdPeerURL,
			"--unsafe-no-fsync=true",
			"--enable-grpc-gateway=true",
		}
		argv = append(argv, extra...)
		if err := writeArgs(st.path(etcdArgsFile), argv); err != nil {
			return err
		}
		p, err := startDetached(argv, st.path(etcdLog), st.Dir)
		if err != nil {
			return fmt.Errorf("starting etcd: %w", err)
		}
		if err := os.WriteFile(st.path(etcdPidFile), []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
			return err
		}
		took, err := waitFor("etcd", p, etcdStartTimeout, func() error { return etcdHealthy(st.EtcdURL) })
		if err == nil {
			fmt.Printf("etcd started: pid %d, client %s, peer %s, healthy after %s (log %s)\n",
				p.pid, st.EtcdURL, st.EtcdPeerURL, took.Round(time.Millisecond), st.path(etcdLog))
			return nil
		}
		lastErr = err
		_ = stopProcess("etcd", p.pid, 2*time.Second)
		select {
		case <-p.exited: // early exit (e.g. port taken): retry with new ports
			fmt.Printf("etcd attempt %d failed: %v; retrying\n", attempt, err)
			continue
		default:
		}
		break
	}
	return fmt.Errorf("%v\n--- last lines of %s:\n%s", lastErr, st.path(etcdLog), tail(st.path(etcdLog), 30))
}

func (st *state) apiserverArgv(port int, extra []string) []string {
	pki := func(name string) string { return filepath.Join(st.path(pkiDir), name) }
	argv := []string{
		st.APIServer,
		"--etcd-servers=" + st.EtcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + st.path(pkiDir),
		"--tls-cert-file=" + pki(servingCert),
		"--tls-private-key-file=" + pki(servingKey),
		"--client-ca-file=" + pki(clientCACert),
		"--service-cluster-ip-range=10.0.0.0/24",
		fmt.Sprintf("--service-account-issuer=https://127.0.0.1:%d/", port),
		"--service-account-key-file=" + pki(saPub),
		"--service-account-signing-key-file=" + pki(saKey),
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount",
		// No watch cache: a watch from a resourceVersion older than etcd's compaction
		// gets 410 Gone / Expired at once (see README).
		"--watch-cache=false",
		// Only `testbed compact` compacts etcd (the default would every 5 minutes).
		"--etcd-compaction-interval=0",
	}
	if !hasDefaultRoute() && !hasFlag(extra, "--advertise-address") {
		// Unset, kube-apiserver takes the address of the default-route interface and
		// fails without one; a loopback address is only accepted without the
		// endpoint reconciler (the "kubernetes" Service then has no endpoints).
		fmt.Println("no IPv4 default route: starting kube-apiserver with --advertise-address=127.0.0.1 --endpoint-reconciler-type=none")
		argv = append(argv, "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
	}
	return append(argv, extra...)
}

// hasDefaultRoute reports whether /proc/net/route has an IPv4 default route that is up.
func hasDefaultRoute() bool {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return true // cannot tell: keep kube-apiserver's own behaviour
	}
	return routeTableHasDefault(string(b))
}

func routeTableHasDefault(table string) bool {
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue // not destination 0.0.0.0/0
		}
		if flags, err := strconv.ParseUint(f[3], 16, 32); err == nil && flags&1 != 0 { // RTF_UP
			return true
		}
	}
	return false
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func (st *state) startAPIServer(extra []string) error {
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		st.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		argv := st.apiserverArgv(ports[0], extra)
		if err := writeArgs(st.path(apiArgsFile), argv); err != nil {
			return err
		}
		if err := st.save(); err != nil {
			return err
		}
		if err := st.launchAPIServer(argv); err == nil {
			return nil
		} else {
			lastErr = err
			if !errors.Is(err, errExitedEarly) {
				break
			}
			fmt.Printf("kube-apiserver attempt %d failed: %v; retrying\n", attempt, err)
		}
	}
	return fmt.Errorf("%v\n--- last lines of %s:\n%s", lastErr, st.path(apiLog), tail(st.path(apiLog), 40))
}

var errExitedEarly = errors.New("exited during start-up")

// launchAPIServer starts kube-apiserver with argv, writes its pid file and waits
// for /readyz and namespace default.
func (st *state) launchAPIServer(argv []string) error {
	c, err := st.apiClient(5 * time.Second)
	if err != nil {
		return err
	}
	p, err := startDetached(argv, st.path(apiLog), st.Dir)
	if err != nil {
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	if err := os.WriteFile(st.path(apiPidFile), []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
		return err
	}
	took, err := waitFor("kube-apiserver", p, apiStartTimeout, func() error { return st.apiReady(c) })
	if err != nil {
		_ = stopProcess("kube-apiserver", p.pid, 2*time.Second)
		select {
		case <-p.exited:
			return fmt.Errorf("kube-apiserver %w (%v)", errExitedEarly, p.err)
		default:
			return err
		}
	}
	st.Version = st.apiVersion(c)
	fmt.Printf("kube-apiserver %s started: pid %d, %s, ready after %s (log %s)\n",
		st.Version, p.pid, st.APIServerURL, took.Round(time.Millisecond), st.path(apiLog))
	return nil
}

func writeArgs(path string, argv []string) error {
	for _, a := range argv {
		if strings.ContainsAny(a, "\n\x00") {
			return fmt.Errorf("argument %q contains a newline", a)
		}
	}
	return writeFileAtomic(path, []byte(strings.Join(argv, "\n")+"\n"), 0o644)
}

func readArgs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var argv []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			argv = append(argv, l)
		}
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return argv, nil
}

func (st *state) writeClientFiles() error {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(st.path(pkiDir), name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read(caCert)
	if err != nil {
		return err
	}
	crt, err := read(adminCert)
	if err != nil {
		return err
	}
	key, err := read(adminKey)
	if err != nil {
		return err
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: lookout-testbed
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: lookout-testbed
  context:
    cluster: lookout-testbed
    user: admin
    namespace: default
current-context: lookout-testbed
preferences: {}
`, st.APIServerURL, ca, crt, key)
	if err := writeFileAtomic(st.path(kubeconfigFile), []byte(kubeconfig), 0o600); err != nil {
		return err
	}
	pki := func(name string) string { return filepath.Join(st.path(pkiDir), name) }
	vars := [][2]string{
		{"KUBECONFIG", st.path(kubeconfigFile)},
		{"LOOKOUT_K8S_SERVER", st.APIServerURL},
		{"LOOKOUT_K8S_VERSION", st.Version},
		{"LOOKOUT_K8S_CA_FILE", pki(caCert)},
		{"LOOKOUT_K8S_CLIENT_CERT_FILE", pki(adminCert)},
		{"LOOKOUT_K8S_CLIENT_KEY_FILE", pki(adminKey)},
		{"LOOKOUT_ETCD_URL", st.EtcdURL},
		{"LOOKOUT_ETCD_PID_FILE", st.path(etcdPidFile)},
		{"LOOKOUT_APISERVER_PID_FILE", st.path(apiPidFile)},
		{"LOOKOUT_APISERVER_ARGS_FILE", st.path(apiArgsFile)},
		{"LOOKOUT_APISERVER_LOG", st.path(apiLog)},
		{"LOOKOUT_K8S_TESTBED_DIR", st.Dir},
		{"LOOKOUT_K8S_TESTBED_BIN", filepath.Join(st.BinDir, "testbed")},
	}
	var b strings.Builder
	for _, kv := range vars {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	return writeFileAtomic(st.path(envFile), []byte(b.String()), 0o644)
}

// ---------------------------------------------------------------- down

func cmdDown(dir string, keepLogs bool) error {
	return teardown(dir, keepLogs, false)
}

// teardown stops both processes and deletes dir (keeping *.log when keepLogs). It
// refuses to delete a non-empty directory without the marker file.
func teardown(dir string, keepLogs, quiet bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		if !quiet {
			fmt.Printf("testbed down: %s does not exist, nothing to do\n", dir)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
		if len(entries) == 0 {
			return nil
		}
		return fmt.Errorf("%s is not empty and has no %s file: not a testbed directory, refusing to touch it", dir, markerFile)
	}
	apiBin, etcdBin := "kube-apiserver", "etcd"
	if st, err := loadState(dir); err == nil {
		apiBin, etcdBin = st.APIServer, st.Etcd
	}
	var errs []error
	if pid := ownedPidBase(filepath.Join(dir, apiPidFile), apiBin); pid != 0 {
		errs = append(errs, stopProcess("kube-apiserver", pid, apiStopGrace))
	}
	if pid := ownedPidBase(filepath.Join(dir, etcdPidFile), etcdBin); pid != 0 {
		errs = append(errs, stopProcess("etcd", pid, etcdStopGrace))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if keepLogs {
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".log") {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
			}
		}
	} else if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if !quiet {
		what := "removed " + dir
		if keepLogs {
			what = "removed everything but the logs in " + dir
		}
		fmt.Printf("testbed down: %s\n", what)
	}
	return nil
}

// ownedPidBase is ownedPid that also accepts a bare program name (no state file).
func ownedPidBase(pidFile, binary string) int {
	if strings.Contains(binary, "/") {
		return ownedPid(pidFile, binary)
	}
	pid := ownedPid(pidFile, "")
	if pid != 0 && filepath.Base(argv0(pid)) != binary {
		return 0
	}
	return pid
}

// ---------------------------------------------------------------- status, env

func cmdStatus(dir string) error {
	st, err := loadState(dir)
	if err != nil {
		return fmt.Errorf("no testbed in %s (%v)", dir, err)
	}
	if err := st.health(); err != nil {
		return err
	}
	fmt.Printf("healthy: etcd pid %d %s, kube-apiserver pid %d %s\n",
		ownedPid(st.path(etcdPidFile), st.Etcd), st.EtcdURL,
		ownedPid(st.path(apiPidFile), st.APIServer), st.APIServerURL)
	return nil
}

func cmdEnv(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, envFile))
	if err != nil {
		return err
	}
	fmt.Printf("# %s\n%s", filepath.Join(dir, envFile), b)
	return nil
}

// ---------------------------------------------------------------- kill / restart

func cmdKillAPIServer(dir string) error {
	st, err := loadState(dir)
	if err != nil {
		return fmt.Errorf("no testbed in %s (%v)", dir, err)
	}
	pid := ownedPid(st.path(apiPidFile), st.APIServer)
	if pid == 0 {
		fmt.Println("kube-apiserver is not running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if !waitGone(pid, 10*time.Second) {
		return fmt.Errorf("kube-apiserver (pid %d) still alive 10s after SIGKILL", pid)
	}
	fmt.Printf("kube-apiserver (pid %d) killed with SIGKILL\n", pid)
	return nil
}

func cmdRestartAPIServer(dir string) error {
	st, err := loadState(dir)
	if err != nil {
		return fmt.Errorf("no testbed in %s (%v)", dir, err)
	}
	c, err := st.apiClient(5 * time.Second)
	if err != nil {
		return err
	}
	if pid := ownedPid(st.path(apiPidFile), st.APIServer); pid != 0 {
		took, err := waitFor("kube-apiserver", nil, apiStartTimeout, func() error { return st.apiReady(c) })
		if err != nil {
			return err
		}
		fmt.Printf("kube-apiserver already running (pid %d), ready after %s\n", pid, took.Round(time.Millisecond))
		return nil
	}
	if err := etcdHealthy(st.EtcdURL); err != nil {
		return fmt.Errorf("etcd is not healthy (%v): run `testbed up` instead", err)
	}
	argv, err := readArgs(st.path(apiArgsFile))
	if err != nil {
		return err
	}
	// Its port is fixed (the kubeconfig and the certificates name it): when
	// something took it while the apiserver was down, the apiserver exits at
	// once; wait for the port to be free again, a bounded number of times.
	var lastErr error
	for attempt := 1; attempt <= restartAttempts; attempt++ {
		if lastErr = st.launchAPIServer(argv); lastErr == nil {
			return nil
		}
		if !errors.Is(lastErr, errExitedEarly) {
			break
		}
		fmt.Printf("kube-apiserver attempt %d failed: %v; retrying in %s\n", attempt, lastErr, restartPause)
		time.Sleep(restartPause)
	}
	return fmt.Errorf("%v\n--- last lines of %s:\n%s", lastErr, st.path(apiLog), tail(st.path(apiLog), 40))
}

// ---------------------------------------------------------------- compact

// etcdRevision asks etcd's JSON gateway for its current revision. The gateway
// wants keys base64-encoded; int64 fields come back as strings.
func etcdRevision(url string) (int64, error) {
	body := fmt.Sprintf(`{"key":%q,"limit":1}`, base64.StdEncoding.EncodeToString([]byte("/")))
	code, resp, err := httpDo(plainClient, "POST", url+"/v3/kv/range", "application/json", []byte(body))
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("POST /v3/kv/range: HTTP %d %s", code, strings.TrimSpace(string(resp)))
	}
	var r struct {
		Header struct {
			Revision json.Number `json:"revision"`
		} `json:"header"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return 0, fmt.Errorf("POST /v3/kv/range: %v in %s", err, resp)
	}
	rev, err := strconv.ParseInt(strings.Trim(string(r.Header.Revision), `"`), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("POST /v3/kv/range: no header.revision in %s", resp)
	}
	return rev, nil
}

// bumpKey is written by etcdCompact outside the apiserver's /registry prefix, so
// no Kubernetes watch sees it.
const bumpKey = "/lookout-testbed/compact-bump"

// etcdCompact compacts etcd (physically) at its current revision and returns it.
//
// With bump, it first writes bumpKey twice so that the revision compacted at is at
// least the newest resourceVersion the apiserver handed out + 2. That matters: a
// watch from resourceVersion RV starts at etcd revision RV+1 and etcd refuses it as
// compacted (-> 410 Expired) only if RV+1 < the compaction revision. A watch from
// RV = revision-1 is accepted and then fails with a 500 "etcd event received with
// PrevKv=nil" for a key changed at that revision (its previous value was compacted
// away). Two extra writes make every resourceVersion seen before the call expire.
func etcdCompact(url string, bump bool) (int64, error) {
	if bump {
		for i := 0; i < 2; i++ {
			body := fmt.Sprintf(`{"key":%q,"value":%q}`,
				base64.StdEncoding.EncodeToString([]byte(bumpKey)),
				base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(i))))
			code, resp, err := httpDo(plainClient, "POST", url+"/v3/kv/put", "application/json", []byte(body))
			if err != nil {
				return 0, err
			}
			if code != 200 {
				return 0, fmt.Errorf("POST /v3/kv/put: HTTP %d %s", code, strings.TrimSpace(string(resp)))
			}
		}
	}
	rev, err := etcdRevision(url)
	if err != nil {
		return 0, err
	}
	body := fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)
	code, resp, err := httpDo(plainClient, "POST", url+"/v3/kv/compaction", "application/json", []byte(body))
	if err != nil {
		return 0, err
	}
	if code != 200 {
		if strings.Contains(string(resp), "required revision has been compacted") {
			return rev, nil // already compacted at (or past) rev
		}
		return 0, fmt.Errorf("POST /v3/kv/compaction: HTTP %d %s", code, strings.TrimSpace(string(resp)))
	}
	return rev, nil
}

func cmdCompact(dir string, noBump bool) error {
	st, err := loadState(dir)
	if err != nil {
		return fmt.Errorf("no testbed in %s (%v)", dir, err)
	}
	rev, err := etcdCompact(st.EtcdURL, !noBump)
	if err != nil {
		return err
	}
	fmt.Println(rev)
	return nil
}
