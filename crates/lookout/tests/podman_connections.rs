//! Podman's connections, side by side with podman's own CLI: connections
//! written by `podman system connection add` (into a temporary
//! `CONTAINERS_CONF`, which Podman 4 writes them to), each to a relay to the
//! real Podman API service that counts its connections. With no
//! `CONTAINER_HOST`, `lookout podman` goes where `podman --remote ps` goes:
//! the default connection; `CONTAINER_CONNECTION` and `--connection` name
//! another; an unknown one exits 2 naming it, as Podman 5 fails.
//!
//! Rootless Podman (a non-root user's own `podman system service` on
//! `/run/user/UID/…`, lookout run as that user) is `podman_rootless.rs`,
//! against the engine `podman-rootless`; the rootless socket rules are also
//! tested hermetically in lookout-moby (`endpoint` tests).
//!
//! Needs Podman: `cargo xtask engines up podman` (CI sets `LOOKOUT_ENGINES=1`).

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::process::{Command, Stdio};

use lookout_e2e::engines;
use lookout_e2e::relay::Relay;

mod common;
use common::{Process, TempDir, WAIT};

/// The variables that select a Podman endpoint: removed from every command.
const SELECTORS: [&str; 6] = [
    "CONTAINER_HOST",
    "CONTAINER_CONNECTION",
    "CONTAINER_SSHKEY",
    "CONTAINERS_CONF",
    "PODMAN_CONNECTIONS_CONF",
    "XDG_CONFIG_HOME",
];

/// A temporary configuration (`CONTAINERS_CONF`, `XDG_CONFIG_HOME`), removed on drop.
struct Conf(TempDir);

impl Conf {
    fn new(what: &str) -> Self {
        let dir = TempDir::new("podman-conn", what);
        std::fs::create_dir_all(dir.0.join("config")).expect("a temp dir");
        // podman wants CONTAINERS_CONF to exist; it writes the connections there.
        std::fs::write(dir.0.join("containers.conf"), "").expect("containers.conf");
        Self(dir)
    }

    fn dir(&self) -> &std::path::Path {
        &self.0.0
    }

    fn command(&self, program: &str, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(program);
        for var in SELECTORS {
            cmd.env_remove(var);
        }
        cmd.env("CONTAINERS_CONF", self.dir().join("containers.conf"))
            .env("XDG_CONFIG_HOME", self.dir().join("config"))
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        cmd
    }

    /// podman's CLI with this configuration.
    fn podman(&self, args: &[&str], env: &[(&str, &str)]) -> engines::Output {
        let mut cmd = self.command("podman", env);
        cmd.args(args);
        engines::run_output(&mut cmd, WAIT).unwrap_or_else(|e| panic!("podman {args:?}: {e}"))
    }

    fn podman_ok(&self, args: &[&str], env: &[(&str, &str)]) {
        let out = self.podman(args, env);
        assert!(out.status.success(), "podman {args:?}: {}", out.stderr);
    }

    fn lookout(&self, args: &[&str], env: &[(&str, &str)]) -> Process {
        let mut cmd = self.command(env!("CARGO_BIN_EXE_lookout"), env);
        cmd.args(args);
        Process::start(cmd)
    }
}

/// `podman --remote ps` and `lookout podman` under `env` and `args` reach
/// relay `expect` (0 or 1 of `relays`) and only it; lookout says `from`.
fn side_by_side(
    conf: &Conf,
    relays: &[Relay; 2],
    env: &[(&str, &str)],
    args: &[&str],
    expect: usize,
    from: &str,
) {
    let case = format!("{env:?} {args:?}");
    let counts = || [relays[0].counts().accepted, relays[1].counts().accepted];
    let before = counts();
    // podman's global flags come before its command.
    let mut ps: Vec<&str> = vec!["--remote"];
    ps.extend_from_slice(args);
    ps.push("ps");
    conf.podman_ok(&ps, env);
    let after_cli = counts();
    let reached =
        |a: [usize; 2], b: [usize; 2]| -> Vec<usize> { (0..2).filter(|i| b[*i] > a[*i]).collect() };
    assert_eq!(
        reached(before, after_cli),
        [expect],
        "{case}: podman --remote ps"
    );
    let mut lookout_args = vec!["podman", "--json"];
    lookout_args.extend_from_slice(args);
    let mut lookout = conf.lookout(&lookout_args, env);
    let connected = lookout.connected();
    drop(lookout);
    assert_eq!(
        reached(after_cli, counts()),
        [expect],
        "{case}: lookout {connected}"
    );
    assert_eq!(
        connected["endpoint"],
        relays[expect].host(),
        "{case}: {connected}"
    );
    assert_eq!(connected["from"], from, "{case}: {connected}");
    eprintln!("[podman connections] {case}: podman --remote ps and lookout → {expect} ({from})");
}

#[test]
fn lookout_goes_where_podman_remote_goes() {
    let Some(_lock) = engines::require("podman", false, engines::podman_up) else {
        return;
    };
    let relays = [
        Relay::start(&engines::podman_host()),
        Relay::start(&engines::podman_host()),
    ];
    let conf = Conf::new("where");
    let (a, b) = (relays[0].host(), relays[1].host());
    conf.podman_ok(
        &["system", "connection", "add", "--default", "lookout-a", &a],
        &[],
    );
    conf.podman_ok(&["system", "connection", "add", "lookout-b", &b], &[]);
    let written = std::fs::read_to_string(conf.dir().join("containers.conf")).unwrap_or_default();
    eprintln!("[podman connections] podman wrote:\n{written}");
    side_by_side(
        &conf,
        &relays,
        &[],
        &[],
        0,
        "connection lookout-a (the default connection)",
    );
    side_by_side(
        &conf,
        &relays,
        &[("CONTAINER_CONNECTION", "lookout-b")],
        &[],
        1,
        "connection lookout-b (CONTAINER_CONNECTION)",
    );
    side_by_side(
        &conf,
        &relays,
        &[],
        &["--connection", "lookout-b"],
        1,
        "connection lookout-b",
    );
    // CONTAINER_HOST over the default connection.
    side_by_side(
        &conf,
        &relays,
        &[("CONTAINER_HOST", &b)],
        &[],
        1,
        "CONTAINER_HOST",
    );

    // An unknown connection: lookout exits 2 naming it, as Podman 5 fails
    // ("connection not found"); Podman 4.3 (Debian 12's) ignores the
    // variable and takes its default connection: said, not asserted.
    let env = [("CONTAINER_CONNECTION", "lookout-nope")];
    let out = conf.podman(&["--remote", "ps"], &env);
    eprintln!(
        "[podman connections] podman --remote ps with CONTAINER_CONNECTION=lookout-nope: {} {}",
        out.status,
        out.stderr.trim()
    );
    let mut lookout = conf.lookout(&["podman"], &env);
    assert_eq!(lookout.exit_within(WAIT).code(), Some(2));
    let mut stderr = Vec::new();
    while let Ok(line) = lookout.err.recv_timeout(WAIT) {
        stderr.push(line);
    }
    let stderr = stderr.join("\n");
    assert!(stderr.contains("\"lookout-nope\""), "{stderr}");
    assert!(
        stderr.contains("containers.conf"),
        "names the files read: {stderr}"
    );
}
