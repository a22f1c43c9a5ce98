//! `ssh://` against the real engines through the private sshd on 127.0.0.1
//! (`cargo xtask engines up sshd`: Debian's openssh-server, its own host
//! key, key authentication, `Host lookout-sshd` in the system ssh
//! configuration), with the docker CLI as the reference (`docker -H
//! ssh://lookout-sshd …`): a lifecycle over ssh for dockerd and for Podman;
//! sshd killed mid-stream → disconnected → back with nothing lost; no ssh
//! process left after a drop, or after a dial that failed.

use std::time::{Duration, Instant};

use lookout_core::{EventKind, Origin, ReconnectPolicy};
use lookout_e2e::engines;
use lookout_e2e::relay::scenarios::{
    self, Containers, DOCKER, Engine, ITEM, Watcher, report_as, test_config,
};

/// dockerd, reached as `ssh://lookout-sshd`.
static DOCKER_SSH: Engine = Engine {
    name: "docker",
    host: engines::sshd_docker_host,
    up: docker_over_ssh_up,
    cli: engines::docker,
    signal: engines::docker_signal,
    restart_stopping: |_| Err("not over ssh".to_owned()),
    watch: lookout_docker::watch,
    run_check: None,
    keeps_history: false,
    logs_stop: true,
};

/// The Podman API service, reached as `ssh://lookout-sshd/run/podman/podman.sock`.
static PODMAN_SSH: Engine = Engine {
    name: "podman",
    host: engines::sshd_podman_host,
    up: podman_over_ssh_up,
    cli: engines::podman,
    signal: engines::podman_signal,
    restart_stopping: |_| Err("not over ssh".to_owned()),
    watch: lookout_podman::watch,
    run_check: None,
    keeps_history: true,
    logs_stop: false,
};

fn docker_over_ssh_up() -> Result<(), String> {
    engines::docker_up()?;
    engines::sshd_up()
}

fn podman_over_ssh_up() -> Result<(), String> {
    engines::podman_up()?;
    engines::sshd_up()
}

/// The scenarios' timings, with the dial and the probe given the time of
/// ssh: each request is one ssh process and one SSH handshake (about 0.5 s
/// each on the 2-core CI machine; a dial makes four requests in a row).
fn ssh_config() -> lookout_core::WatchConfig {
    test_config()
        .dial_timeout(Duration::from_secs(20))
        .probe_timeout(Duration::from_secs(10))
}

/// The `ssh` processes whose parent is this test process (zombies included).
fn ssh_children() -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid …`; comm may hold spaces: split at the last `)`.
            let Some((head, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let comm = head.split_once('(').map_or("", |(_, c)| c);
            let ppid = rest
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            comm == "ssh" && ppid == Some(me)
        })
        .collect()
}

/// Waits (bounded, the runtime running meanwhile so that it reaps its
/// children) until no ssh child of this process is left.
async fn no_ssh_left(within: Duration, what: &str) {
    ssh_children_become(0, within, what).await;
}

/// Waits (at most `within`) until this process has exactly `n` ssh
/// children: a connection dropped a moment ago (a dial's list, once the
/// snapshot is read) has its ssh killed, and reaped by the runtime, soon
/// after, not at once. Returns them.
async fn ssh_children_become(n: usize, within: Duration, what: &str) -> Vec<u32> {
    let deadline = Instant::now() + within;
    loop {
        let left = ssh_children();
        if left.len() == n {
            return left;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {} ssh processes, not {n}, after {within:?}: {left:?}",
            left.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_lifecycle_over_ssh_on_dockerd() {
    let _one = ONE_AT_A_TIME.lock().await;
    scenarios::lifecycle_with(&DOCKER_SSH, ssh_config()).await;
}

#[tokio::test]
async fn a_lifecycle_over_ssh_on_podman() {
    let _one = ONE_AT_A_TIME.lock().await;
    scenarios::lifecycle_with(&PODMAN_SSH, ssh_config()).await;
}

/// The docker CLI over the same ssh (`docker -H ssh://lookout-sshd ps`)
/// and lookout over it see the same container, running.
#[tokio::test]
async fn the_docker_cli_over_ssh_sees_what_lookout_sees() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(()) = scenarios::require(&DOCKER_SSH) else {
        return;
    };
    let _lock = engines::lock_engine("docker", false).expect("engine lock");
    let _sshd = engines::lock_engine("sshd", false).expect("sshd lock");
    let c = Containers::new(&DOCKER, "ssh-reference");
    let mut w = Watcher::new(
        &DOCKER_SSH,
        engines::sshd_docker_host(),
        c.filter(),
        ssh_config(),
    );
    w.connected().await;
    let a = c.create("a", true);
    c.cli(&["start", &a]);
    w.events_until(&a, EventKind::Started).await;
    let mut ps = std::process::Command::new(engines::docker_cli());
    ps.env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONTEXT")
        .args([
            "-H",
            &engines::sshd_docker_host(),
            "ps",
            "--filter",
            &format!("name={a}"),
            "--format",
            "{{.Names}} {{.State}}",
        ]);
    let listed = engines::run(&mut ps, "docker -H ssh://lookout-sshd ps", ITEM)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(listed.trim(), format!("{a} running"));
}

/// sshd (the listener and every session) is killed while the watch streams
/// over it: the watch is disconnected; the container stops meanwhile; once
/// sshd is back, the stop comes (replayed, live) and nothing is lost or
/// repeated.
async fn sshd_killed_mid_stream(engine: &'static Engine) {
    let _one = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let Some(()) = scenarios::require(engine) else {
        return;
    };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let _sshd = engines::lock_engine("sshd", true).expect("sshd lock");
    let c = Containers::new(engine, "ssh-killed");
    let mut w = Watcher::new(engine, (engine.host)(), c.filter(), ssh_config());
    w.connected().await;
    let a = c.create("a", true);
    c.cli(&["start", &a]);
    w.events_until(&a, EventKind::Started).await;
    // Brought back whatever happens below.
    let _restart = RestartSshd;
    engines::sshd_kill9().unwrap_or_else(|e| panic!("{e}"));
    let error = w.disconnected(ITEM).await;
    eprintln!("[ssh] {}: disconnected: {error}", engine.name);
    c.cli(&["stop", "-t", "0", &a]);
    engines::sshd_start().unwrap_or_else(|e| panic!("{e}"));
    w.connected().await;
    c.cli(&["rm", &a]);
    w.events_until(&a, EventKind::Removed).await;
    let mut expected = vec![EventKind::Created, EventKind::Started];
    expected.extend(engine.stop_kinds());
    expected.push(EventKind::Removed);
    let expected: Vec<_> = expected.into_iter().map(|k| (k, Origin::Live)).collect();
    w.assert_told(engine, &a, &expected);
    report_as(engine.name, "ssh: sshd killed mid-stream", started, &w);
}

/// Starts the test sshd again on drop.
struct RestartSshd;

impl Drop for RestartSshd {
    fn drop(&mut self) {
        let _ = engines::sshd_start();
    }
}

#[tokio::test]
async fn sshd_killed_mid_stream_on_dockerd_loses_nothing() {
    sshd_killed_mid_stream(&DOCKER_SSH).await;
}

#[tokio::test]
async fn sshd_killed_mid_stream_on_podman_loses_nothing() {
    sshd_killed_mid_stream(&PODMAN_SSH).await;
}

/// Every connection is one ssh child process of the watch's: after the
/// watch is dropped none is left (killed, and reaped by the runtime);
/// after a dial that failed (ssh refused: no key for that user) none is
/// left either, and the error says what ssh said.
#[tokio::test]
async fn no_ssh_process_is_left_after_a_drop_or_a_failed_dial() {
    let Some(()) = scenarios::require(&DOCKER_SSH) else {
        return;
    };
    let _lock = engines::lock_engine("docker", false).expect("engine lock");
    let _sshd = engines::lock_engine("sshd", false).expect("sshd lock");
    let _one = ONE_AT_A_TIME.lock().await;
    no_ssh_left(ITEM, "before").await;

    let mut w = Watcher::new(
        &DOCKER_SSH,
        engines::sshd_docker_host(),
        lookout_core::Labels::new(),
        ssh_config(),
    );
    w.connected().await;
    let streaming = ssh_children_become(1, Duration::from_secs(5), "streaming holds one ssh").await;
    assert_eq!(streaming.len(), 1, "streaming holds one ssh: {streaming:?}");
    drop(w);
    no_ssh_left(Duration::from_secs(5), "after the drop").await;

    let mut refused = Watcher::new(
        &DOCKER_SSH,
        format!("ssh://nobody@{}", engines::SSH_HOST_ALIAS),
        lookout_core::Labels::new(),
        ssh_config().reconnect(
            ReconnectPolicy::default()
                .initial_delay(Duration::from_secs(60))
                .jitter(false),
        ),
    );
    let error = refused.disconnected(ITEM).await;
    let text = error_chain(&*error);
    assert!(text.contains("Permission denied"), "ssh's stderr: {text}");
    no_ssh_left(Duration::from_secs(5), "after a failed dial").await;
    drop(refused);
    assert!(ssh_children().is_empty());
}

/// One test of this file at a time: they share the process, whose ssh
/// children one of them counts.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An error and its sources, one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
