//! Docker contexts, side by side with the docker CLI: the store is written by
//! `docker context create` / `use` under a temporary `DOCKER_CONFIG`, each
//! context pointing at a relay to the real dockerd that counts its
//! connections; for each way of selecting an endpoint (`currentContext`,
//! `DOCKER_CONTEXT`, `--context`, `DOCKER_HOST`), `docker ps` and `lookout
//! docker` must reach the same relay. An unknown context exits 2 naming
//! it and the path tried, as the CLI fails; a `currentContext` changed
//! while watching does not move the running watch; a TCP context with TLS
//! material in the store reaches the real `dockerd --tlsverify` (`cargo xtask
//! engines up docker-tls`), with that material only; a context with
//! `SkipTLSVerify`, and `DOCKER_TLS` without `DOCKER_TLS_VERIFY`, reach it
//! with a client certificate and no CA, the server's certificate unverified
//! and said so, as the docker CLI does.
//!
//! Needs dockerd: `cargo xtask engines up docker` (CI sets `LOOKOUT_ENGINES=1`).

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lookout_e2e::engines;
use lookout_e2e::relay::Relay;

mod common;
use common::{Containers, Process, TempDir, WAIT};

/// The variables that select a docker endpoint: removed from every command
/// here, then set as each case says.
const SELECTORS: [&str; 6] = [
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_TLS_VERIFY",
    "DOCKER_TLS",
    "DOCKER_CERT_PATH",
];

/// Variables set for one command.
type Env<'a> = &'a [(&'a str, &'a str)];

/// A temporary docker configuration directory, removed on drop.
struct ConfigDir(TempDir);

impl ConfigDir {
    fn new(what: &str) -> Self {
        Self(TempDir::new("contexts", what))
    }

    fn path(&self) -> &Path {
        &self.0.0
    }

    /// The docker CLI with this configuration directory and `env` (nothing
    /// else of the test's environment selects the endpoint).
    fn docker(&self, args: &[&str], env: &[(&str, &str)]) -> engines::Output {
        let mut cmd = Command::new("docker");
        for var in SELECTORS {
            cmd.env_remove(var);
        }
        cmd.env("DOCKER_CONFIG", self.path())
            .envs(env.iter().copied())
            .args(args)
            .stdin(Stdio::null());
        engines::run_output(&mut cmd, WAIT).unwrap_or_else(|e| panic!("docker {args:?}: {e}"))
    }

    /// The docker CLI, which must succeed.
    fn docker_ok(&self, args: &[&str], env: &[(&str, &str)]) {
        let out = self.docker(args, env);
        assert!(out.status.success(), "docker {args:?}: {}", out.stderr);
    }

    /// `lookout ARGS` with this configuration directory and `env`.
    fn lookout(&self, args: &[&str], env: &[(&str, &str)]) -> Process {
        Process::start(self.lookout_command(args, env))
    }

    fn lookout_command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
        for var in SELECTORS {
            cmd.env_remove(var);
        }
        cmd.env("DOCKER_CONFIG", self.path())
            .envs(env.iter().copied())
            .args(args);
        cmd
    }

    /// `lookout ARGS` with its warnings on stderr (`RUST_LOG=warn`, no
    /// colours) among its JSON status lines.
    fn lookout_logging(&self, args: &[&str], env: &[(&str, &str)]) -> Process {
        let mut cmd = self.lookout_command(args, env);
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lookout");
        let out = common::lines(child.stdout.take().expect("stdout"));
        let err = common::lines(child.stderr.take().expect("stderr"));
        Process {
            child,
            out: Some(out),
            err,
            stderr_seen: Vec::new(),
        }
    }
}

/// The stderr lines of an exited lookout, up to their end (bounded).
fn rest_of_stderr(p: &Process) -> String {
    let deadline = Instant::now() + WAIT;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match p.err.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return lines.join("\n"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("stderr did not end within {WAIT:?}: {lines:?}")
            }
        }
    }
}

/// Waits (bounded) until the relay has accepted more than `before`
/// connections; the count.
fn accepted_more(relay: &Relay, before: usize, what: &str) -> usize {
    let deadline = Instant::now() + WAIT;
    loop {
        let now = relay.counts().accepted;
        if now > before {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no connection reached the relay within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The relays a case may reach.
struct Relays {
    a: Relay,
    b: Relay,
}

impl Relays {
    fn new() -> Self {
        Self {
            a: Relay::start(&engines::docker_host()),
            b: Relay::start(&engines::docker_host()),
        }
    }

    fn counts(&self) -> (usize, usize) {
        (self.a.counts().accepted, self.b.counts().accepted)
    }
}

/// Contexts `lookout-a` and `lookout-b` (each to its relay), written by the
/// docker CLI; `lookout-a` is the current one.
fn store(relays: &Relays, what: &str) -> ConfigDir {
    let dir = ConfigDir::new(what);
    for (name, relay) in [("lookout-a", &relays.a), ("lookout-b", &relays.b)] {
        let host = format!("host={}", relay.host());
        dir.docker_ok(&["context", "create", name, "--docker", &host], &[]);
    }
    dir.docker_ok(&["context", "use", "lookout-a"], &[]);
    dir
}

/// `docker ps` and `lookout docker` under the same `env` and `args`: both
/// reach the relay `expect` (`'a'` or `'b'`) and only it; lookout says
/// where the endpoint came from (`from`).
fn side_by_side(
    relays: &Relays,
    dir: &ConfigDir,
    env: &[(&str, &str)],
    args: &[&str],
    expect: char,
    from: &str,
) {
    let case = format!("{env:?} {args:?}");
    let (a0, b0) = relays.counts();
    // The CLI's global flags come before its command.
    let mut ps = args.to_vec();
    ps.push("ps");
    dir.docker_ok(&ps, env);
    let (a1, b1) = relays.counts();
    let cli = match (a1 > a0, b1 > b0) {
        (true, false) => 'a',
        (false, true) => 'b',
        other => panic!("{case}: docker ps reached {other:?}"),
    };
    assert_eq!(cli, expect, "{case}: docker ps");
    let mut lookout_args = vec!["docker", "--json"];
    lookout_args.extend_from_slice(args);
    let mut lookout = dir.lookout(&lookout_args, env);
    let connected = lookout.connected();
    drop(lookout);
    let (a2, b2) = relays.counts();
    let went = match (a2 > a1, b2 > b1) {
        (true, false) => 'a',
        (false, true) => 'b',
        other => panic!("{case}: lookout reached {other:?}: {connected}"),
    };
    assert_eq!(went, expect, "{case}: lookout, {connected}");
    let relay = if expect == 'a' { &relays.a } else { &relays.b };
    assert_eq!(connected["endpoint"], relay.host(), "{case}: {connected}");
    assert_eq!(connected["from"], from, "{case}: {connected}");
    eprintln!("[contexts] {case}: docker ps and lookout → {expect} ({from})");
}

#[test]
fn lookout_goes_where_docker_ps_goes() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let relays = Relays::new();
    let dir = store(&relays, "where");
    let config = dir.path().join("config.json");
    let current = format!("context lookout-a (currentContext of {})", config.display());
    side_by_side(&relays, &dir, &[], &[], 'a', &current);
    side_by_side(
        &relays,
        &dir,
        &[("DOCKER_CONTEXT", "lookout-b")],
        &[],
        'b',
        "context lookout-b (DOCKER_CONTEXT)",
    );
    let a = relays.a.host();
    let b = relays.b.host();
    // DOCKER_HOST over DOCKER_CONTEXT and currentContext.
    side_by_side(
        &relays,
        &dir,
        &[("DOCKER_CONTEXT", "lookout-b"), ("DOCKER_HOST", &a)],
        &[],
        'a',
        "DOCKER_HOST",
    );
    // --context over DOCKER_HOST.
    side_by_side(
        &relays,
        &dir,
        &[("DOCKER_HOST", &a)],
        &["--context", "lookout-b"],
        'b',
        "context lookout-b",
    );
    // --host over everything.
    side_by_side(
        &relays,
        &dir,
        &[("DOCKER_CONTEXT", "lookout-a")],
        &["--host", &b],
        'b',
        "config",
    );
}

#[test]
fn an_unknown_context_exits_2_naming_it_and_the_path() {
    let relays = Relays::new();
    let dir = store(&relays, "unknown");
    let meta = |name: &str| {
        // The docker CLI's own message names the same file.
        let out = dir.docker(&["--context", name, "ps"], &[]);
        assert!(
            !out.status.success(),
            "docker --context {name} ps succeeded"
        );
        let stderr = out.stderr;
        stderr
            .split_whitespace()
            .find(|w| w.ends_with("meta.json:") || w.ends_with("meta.json"))
            .unwrap_or_else(|| panic!("docker names no meta.json: {stderr}"))
            .trim_end_matches(':')
            .to_owned()
    };
    let path = meta("lookout-nope");
    let cases: [(Env<'_>, &[&str]); 2] = [
        (&[("DOCKER_CONTEXT", "lookout-nope")], &[]),
        (&[], &["--context", "lookout-nope"]),
    ];
    for (env, args) in cases {
        let mut argv = vec!["docker"];
        argv.extend_from_slice(args);
        let mut lookout = dir.lookout(&argv, env);
        let status = lookout.exit_within(WAIT);
        assert_eq!(status.code(), Some(2), "{env:?} {args:?}");
        let stderr = rest_of_stderr(&lookout);
        assert!(stderr.contains("\"lookout-nope\""), "{stderr}");
        assert!(stderr.contains(&path), "names {path}: {stderr}");
    }
    // currentContext naming a context that is gone.
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"currentContext":"lookout-nope"}"#,
    )
    .expect("config.json");
    let mut lookout = dir.lookout(&["docker"], &[]);
    assert_eq!(lookout.exit_within(WAIT).code(), Some(2));
    let stderr = rest_of_stderr(&lookout);
    assert!(stderr.contains(&path), "{stderr}");
    // No connection was ever made.
    assert_eq!(relays.counts(), (0, 0));
}

#[test]
fn a_current_context_changed_while_watching_does_not_move_the_watch() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let relays = Relays::new();
    let dir = store(&relays, "moved");
    let name = common::unique("contexts", "moved");
    let label = format!("lookout.contexts={name}");
    let _containers = Containers(vec![name.clone()]);
    let mut lookout = dir.lookout(&["docker", "--json", "--label", &label], &[]);
    lookout.connected();
    assert_eq!(relays.b.counts().accepted, 0);
    // Docker Desktop rewrites currentContext when it starts and stops.
    dir.docker_ok(&["context", "use", "lookout-b"], &[]);
    let before = relays.a.counts().accepted;
    relays.a.cut();
    let d = lookout.stderr("disconnected", |v| v["status"] == "disconnected");
    let connected = lookout.connected();
    assert_eq!(connected["endpoint"], relays.a.host(), "{d} {connected}");
    accepted_more(&relays.a, before, "the redial");
    assert_eq!(
        relays.b.counts().accepted,
        0,
        "the redial went to the new current context"
    );
    // It still watches the engine: a container shows.
    engines::docker_create_test_container(&name, &["--label", &label])
        .unwrap_or_else(|e| panic!("{e}"));
    let e = lookout.event();
    assert_eq!(e["instance"], name.as_str(), "{e}");
    assert_eq!(relays.b.counts().accepted, 0);
    // While the CLI, asked now, goes to the new current context.
    dir.docker_ok(&["ps"], &[]);
    accepted_more(&relays.b, 0, "docker ps");
}

/// A context created with TLS material (`docker context create … --docker
/// host=tcp://…,ca=…,cert=…,key=…` copies it into the store) reaches the
/// `dockerd --tlsverify` on 127.0.0.1, as `docker --context` does; a context
/// to the same address without material speaks plain HTTP, whatever
/// `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` say (a named context's TLS is
/// the store's only), and is refused, as the CLI is.
#[test]
fn a_tls_context_reaches_dockerd_tlsverify_with_the_stores_material() {
    let Some(_lock) = engines::require("docker-tls", false, engines::docker_tls_up) else {
        return;
    };
    let dir = ConfigDir::new("tls");
    let certs = engines::docker_tls_certs();
    let pem = |f: &str| certs.join(f).display().to_string();
    let tls = format!(
        "host={},ca={},cert={},key={}",
        engines::docker_tls_host(),
        pem("ca.pem"),
        pem("cert.pem"),
        pem("key.pem")
    );
    dir.docker_ok(&["context", "create", "lookout-tls", "--docker", &tls], &[]);
    let plain = format!("host={}", engines::docker_tls_host());
    dir.docker_ok(
        &["context", "create", "lookout-plain", "--docker", &plain],
        &[],
    );
    // The reference.
    dir.docker_ok(&["--context", "lookout-tls", "ps"], &[]);
    let mut lookout = dir.lookout(&["docker", "--json", "--context", "lookout-tls"], &[]);
    let connected = lookout.connected();
    assert_eq!(
        connected["endpoint"],
        format!("https://127.0.0.1:{}", engines::DOCKER_TLS_PORT),
        "{connected}"
    );
    assert_eq!(connected["from"], "context lookout-tls", "{connected}");
    drop(lookout);
    // Without material in the store: plain HTTP, refused by the TLS
    // listener — the variables of the default context do not apply.
    let cert_path = certs.display().to_string();
    let env = [
        ("DOCKER_TLS_VERIFY", "1"),
        ("DOCKER_CERT_PATH", cert_path.as_str()),
    ];
    let out = dir.docker(&["--context", "lookout-plain", "ps"], &env);
    assert!(!out.status.success(), "the CLI without TLS: {}", out.stdout);
    let mut lookout = dir.lookout(&["docker", "--json", "--context", "lookout-plain"], &env);
    let d = lookout.stderr("disconnected", |v| v["status"] == "disconnected");
    let error = d["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("HTTP request to an HTTPS server"),
        "plain HTTP: {d}"
    );
    eprintln!(
        "[contexts] plain context on the TLS port: lookout: {error}; docker: {}",
        out.stderr.trim()
    );
}

/// Reads `p`'s stderr (bounded) until a JSON status `connected` or
/// `disconnected`: that status, and the log lines before it.
fn status_after_logs(p: &Process) -> (serde_json::Value, Vec<String>) {
    let deadline = Instant::now() + WAIT;
    let mut logs = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = p
            .err
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no status within {WAIT:?}; stderr: {logs:?}"));
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(v) if v["status"] == "connected" || v["status"] == "disconnected" => {
                return (v, logs);
            }
            _ => logs.push(line),
        }
    }
}

/// The one "not verified" warning (saying `why`) in lookout's log lines,
/// and the one `{"warning"}` line lookout says whatever `RUST_LOG`; the
/// log's.
fn warned_once(case: &str, logs: &[String], why: &str) -> String {
    let warned: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("WARN") && l.contains("not verified"))
        .collect();
    assert_eq!(warned.len(), 1, "{case}: one warning: {logs:?}");
    assert!(warned[0].contains(why), "{case}: says why: {}", warned[0]);
    // And whatever RUST_LOG says, a warning line of lookout's own.
    let said: Vec<serde_json::Value> = logs
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["warning"].is_string())
        .collect();
    assert_eq!(said.len(), 1, "{case}: one warning line: {logs:?}");
    let warning = said[0]["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains(why) && warning.contains("not verified"),
        "{case}: {warning}"
    );
    warned[0].clone()
}

/// A context with `SkipTLSVerify` (`docker context create … --docker
/// host=tcp://…,cert=…,key=…,skip-tls-verify=true`: a client certificate,
/// no CA), and `DOCKER_TLS=1` without `DOCKER_TLS_VERIFY` (a
/// `DOCKER_CERT_PATH` whose `ca.pem`, which the CLI insists on reading, is
/// no CA of the server: the client's own certificate), reach the `dockerd
/// --tlsverify` on 127.0.0.1 as the docker CLI does: TLS, the server's
/// certificate not verified, lookout warning once that it is not, and why
/// (in its log, and on stderr as a `{"warning"}` line whatever `RUST_LOG`).
/// With `DOCKER_TLS_VERIFY` too, the same directory is refused, as by the
/// CLI: its `ca.pem` did not issue the server's certificate.
#[test]
fn skip_tls_verify_and_docker_tls_reach_dockerd_tlsverify_unverified() {
    let Some(_lock) = engines::require("docker-tls", false, engines::docker_tls_up) else {
        return;
    };
    let dir = ConfigDir::new("skip");
    let certs = engines::docker_tls_certs();
    // The client's certificate and key, and a "CA" that is none of the server's.
    let wrong_ca = TempDir::new("contexts", "wrong-ca");
    for (from, to) in [
        ("cert.pem", "cert.pem"),
        ("key.pem", "key.pem"),
        ("cert.pem", "ca.pem"),
    ] {
        std::fs::copy(certs.join(from), wrong_ca.0.join(to)).expect("a copy");
    }
    let pem = |f: &str| wrong_ca.0.join(f).display().to_string();
    let skip = format!(
        "host={},cert={},key={},skip-tls-verify=true",
        engines::docker_tls_host(),
        pem("cert.pem"),
        pem("key.pem")
    );
    dir.docker_ok(
        &["context", "create", "lookout-skip", "--docker", &skip],
        &[],
    );
    let https = format!("https://127.0.0.1:{}", engines::DOCKER_TLS_PORT);
    let host = engines::docker_tls_host();
    let cert_path = wrong_ca.0.display().to_string();
    let tls_env = [
        ("DOCKER_HOST", host.as_str()),
        ("DOCKER_TLS", "1"),
        ("DOCKER_CERT_PATH", cert_path.as_str()),
    ];
    let cases: [(&str, &[&str], Env<'_>, &str, &str); 2] = [
        (
            "SkipTLSVerify",
            &["--context", "lookout-skip"],
            &[],
            "context lookout-skip",
            "context lookout-skip has SkipTLSVerify",
        ),
        (
            "DOCKER_TLS",
            &[],
            &tls_env,
            "DOCKER_HOST",
            "DOCKER_TLS without DOCKER_TLS_VERIFY",
        ),
    ];
    for (case, args, env, from, why) in cases {
        // The reference.
        let mut ps = args.to_vec();
        ps.push("ps");
        dir.docker_ok(&ps, env);
        let mut lookout_args = vec!["docker", "--json"];
        lookout_args.extend_from_slice(args);
        let mut lookout = dir.lookout_logging(&lookout_args, env);
        let (status, logs) = status_after_logs(&lookout);
        assert_eq!(status["status"], "connected", "{case}: {status}; {logs:?}");
        assert_eq!(status["endpoint"], https.as_str(), "{case}: {status}");
        assert_eq!(status["from"], from, "{case}: {status}");
        let warned = warned_once(case, &logs, why);
        lookout.signal("TERM");
        assert_eq!(lookout.exit_within(WAIT).code(), Some(0), "{case}");
        eprintln!("[contexts] {case}: docker ps and lookout reach {https} unverified: {warned}");
    }
    // Verified, the directory's CA is no good, to the CLI either.
    let verify_env = [
        ("DOCKER_HOST", host.as_str()),
        ("DOCKER_TLS_VERIFY", "1"),
        ("DOCKER_CERT_PATH", cert_path.as_str()),
    ];
    let out = dir.docker(&["ps"], &verify_env);
    assert!(
        !out.status.success(),
        "the CLI verifying with the wrong CA: {}",
        out.stdout
    );
    let mut lookout = dir.lookout(&["docker", "--json"], &verify_env);
    let d = lookout.stderr("disconnected", |v| v["status"] == "disconnected");
    let error = d["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("invalid peer certificate"),
        "the server's certificate is verified, and refused: {d}"
    );
    eprintln!(
        "[contexts] DOCKER_TLS_VERIFY with the wrong CA: lookout: {error}; docker: {}",
        out.stderr.trim()
    );
}

/// `--context` with `--host` is refused as the docker CLI refuses `-H` with
/// `--context`; a docker context for podman and a podman connection for
/// docker are refused too (exit 2, a message).
#[test]
fn conflicting_endpoint_flags_exit_2() {
    let stderr = common::usage_error(&["docker", "--context", "a", "--host", "unix:///x"]);
    assert!(
        stderr.contains("--context") && stderr.contains("--host"),
        "{stderr}"
    );
    let stderr = common::usage_error(&["podman", "--context", "a"]);
    assert!(stderr.contains("--connection"), "{stderr}");
    let stderr = common::usage_error(&["swarm", "--connection", "a"]);
    assert!(stderr.contains("--context"), "{stderr}");
    common::usage_error(&["podman", "--connection", "a", "--host", "unix:///x"]);
}
