//! The exact `ssh` command line of an `ssh://` host, checked against the
//! docker CLI's: a fake `ssh` first on `PATH` records its argv (and fails as
//! ssh does, saying why on stderr); `docker -H ssh://…` and `lookout docker
//! --host ssh://…` run with it. lookout's argv is the docker CLI's plus `-o
//! BatchMode=yes`; Podman's runs `podman --url …` remotely; what ssh said is
//! in lookout's error. Hermetic: no sshd, no engine.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use lookout_e2e::engines;

mod common;
use common::{Process, TempDir, WAIT};

/// A directory with a fake `ssh` that appends its argv (one line, each
/// argument followed by a NUL) to `argv`, says `fake ssh: Permission denied
/// (lookout test)` on stderr and exits 255. Removed on drop.
struct FakeSsh(TempDir);

impl FakeSsh {
    fn new(what: &str) -> Self {
        let tmp = TempDir::new("ssh-argv", what);
        let dir = tmp.0.clone();
        let script = dir.join("ssh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done >> '{}'\n\
                 echo >> '{}'\necho 'fake ssh: Permission denied (lookout test)' >&2\nexit 255\n",
                dir.join("argv").display(),
                dir.join("argv").display()
            ),
        )
        .expect("the fake ssh");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Self(tmp)
    }

    /// `PATH` with the fake first.
    fn path_var(&self) -> String {
        format!(
            "{}:{}",
            self.dir().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// Every argv recorded so far.
    fn calls(&self) -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(self.dir().join("argv")).unwrap_or_default();
        text.lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                l.split('\0')
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .collect()
    }

    /// Waits (bounded) for the first call.
    fn first_call(&self) -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(first) = self.calls().into_iter().next() {
                return first;
            }
            assert!(Instant::now() < deadline, "ssh was never run");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn dir(&self) -> &Path {
        &self.0.0
    }
}

const HOST: &str = "ssh://me@h.example:2222/run/x.sock";

/// lookout `engine --json --host host` with the fake first on `PATH`,
/// until its first `disconnected`: its error.
fn lookout_error(fake: &FakeSsh, engine: &str, host: &str) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
    cmd.args([engine, "--json", "--host", host])
        .env("PATH", fake.path_var());
    let mut p = Process::start(cmd);
    let d = p.stderr("disconnected", |v| v["status"] == "disconnected");
    d["error"].as_str().unwrap_or_default().to_owned()
}

/// lookout's own options, before the docker CLI's destination and command.
const OURS: [&str; 3] = ["-o ConnectTimeout=30", "-o BatchMode=yes", "-T"];

/// The argv the docker CLI gives ssh for `host` (through the fake).
fn docker_cli_argv(fake: &FakeSsh, host: &str) -> Option<Vec<String>> {
    let _ = std::fs::remove_file(fake.dir().join("argv"));
    let mut docker = Command::new(engines::docker_cli());
    docker
        .args(["-H", host, "ps"])
        .env("PATH", fake.path_var())
        .env_remove("DOCKER_CONTEXT");
    let out = engines::run_output(&mut docker, WAIT).unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success(), "the fake ssh fails: {}", out.stdout);
    let first = fake.calls().into_iter().next();
    let _ = std::fs::remove_file(fake.dir().join("argv"));
    if first.is_none() {
        // The docker CLI refused the host itself (20.10 takes no socket path).
        eprintln!(
            "[ssh] the docker CLI runs no ssh for {host}: {}",
            out.stderr.trim()
        );
    }
    first
}

#[test]
fn the_ssh_command_line_is_the_docker_clis_with_batch_mode() {
    let fake = FakeSsh::new("docker");
    let version = Command::new(engines::docker_cli())
        .args(["version", "--format", "{{.Client.Version}}"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    // Without a socket path, every docker CLI takes the host: the same
    // destination and command, after the CLI's own options (23 and later:
    // `-o ConnectTimeout=30 -T`; 20.10: none), which lookout's are.
    let bare = "ssh://me@h.example:2222";
    let cli = docker_cli_argv(&fake, bare).expect("the docker CLI runs ssh");
    let cli_rest: Vec<String> = cli
        .iter()
        .skip_while(|a| a.starts_with("-o") || *a == "-T")
        .cloned()
        .collect();
    let _ = lookout_error(&fake, "docker", bare);
    let ours = fake.first_call();
    let expected: Vec<String> = OURS
        .iter()
        .map(|s| (*s).to_owned())
        .chain(cli_rest)
        .collect();
    assert_eq!(ours, expected, "docker {version} ran ssh {cli:?}");
    if cli.len() > expected.len() - OURS.len() {
        // A CLI with options of its own: exactly its options, and BatchMode.
        let mut theirs = cli.clone();
        theirs.insert(1, OURS[1].to_owned());
        assert_eq!(ours, theirs, "docker {version}");
    }
    eprintln!("[ssh] docker {version}: ssh {cli:?}");
    eprintln!("[ssh] lookout:  ssh {ours:?}");

    // With a socket path (the docker CLI 23 and later: `--host unix://…`).
    let _ = std::fs::remove_file(fake.dir().join("argv"));
    let error = lookout_error(&fake, "docker", HOST);
    let ours = fake.first_call();
    assert_eq!(
        ours.join(" "),
        "-o ConnectTimeout=30 -o BatchMode=yes -T -l me -p 2222 -- h.example docker \
         --host unix:///run/x.sock system dial-stdio"
    );
    if let Some(cli) = docker_cli_argv(&fake, HOST) {
        let mut theirs = cli.clone();
        theirs.insert(1, OURS[1].to_owned());
        assert_eq!(ours, theirs, "docker {version} ran ssh {cli:?}");
    }
    assert!(
        error.contains("fake ssh: Permission denied (lookout test)"),
        "ssh's stderr is in the error: {error}"
    );
}

#[test]
fn podman_runs_podman_remotely() {
    let fake = FakeSsh::new("podman");
    let error = lookout_error(&fake, "podman", HOST);
    assert_eq!(
        fake.first_call().join(" "),
        "-o ConnectTimeout=30 -o BatchMode=yes -T -l me -p 2222 -- h.example podman \
         --url unix:///run/x.sock system dial-stdio"
    );
    assert!(
        error.contains("Permission denied (lookout test)"),
        "{error}"
    );
}
