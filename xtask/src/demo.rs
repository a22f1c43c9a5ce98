//! `cargo xtask demo`: the main job a newcomer runs first.
//!
//! Brings up dockerd (and the test image) if none answers, runs `lookout docker`
//! on a label the demo owns, and drives a demo container through create, start,
//! stop, start, a `kill -9` + restart of dockerd, and remove — narrating each step
//! on stderr while lookout's events appear on stdout. Each step waits (bounded)
//! for the event it should cause, so the demo fails loudly if lookout misses one.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::engines;

const WAIT: Duration = Duration::from_secs(60);

fn say(msg: &str) {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        eprintln!("\x1b[1mdemo:\x1b[0m {msg}");
    } else {
        eprintln!("demo: {msg}");
    }
}

/// Kills lookout and removes the demo container, whatever happened.
struct Cleanup {
    lookout: Option<Child>,
    container: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut child) = self.lookout.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = engines::docker(&["rm", "-f", &self.container]);
    }
}

/// Waits for an event line (`kind origin instance`) from lookout's stdout.
fn expect(
    lines: &mpsc::Receiver<String>,
    instance: &str,
    kind: &str,
    origins: &[&str],
) -> Result<(), String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .map_err(|_| format!("no `{kind}` event for {instance} within {WAIT:?}"))?;
        let words: Vec<&str> = line.split_whitespace().collect();
        // <at> <provider> <kind> <origin> <instance> [labels]
        if words.len() >= 5 && words[4] == instance && words[2] == kind {
            if origins.contains(&words[3]) {
                return Ok(());
            }
            return Err(format!("`{kind}` came with origin {}: {line}", words[3]));
        }
        if words.len() >= 5 && words[4] == instance {
            return Err(format!("expected `{kind}` for {instance}, got: {line}"));
        }
    }
}

pub fn run() -> Result<(), String> {
    say("bringing up the local Docker engine and the test image (installs them if missing)");
    engines::docker_up()?;

    say("building lookout");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "lookout-cli", "--bin", "lookout"])
        .status()
        .map_err(|e| format!("cannot run cargo build: {e}"))?;
    if !status.success() {
        return Err("cargo build -p lookout-cli failed".into());
    }
    let bin = engines::workspace_root().join("target/debug/lookout");

    let run_id = format!("{}", std::process::id());
    let label = format!("lookout.demo={run_id}");
    let name = format!("lookout-demo-{run_id}");
    say(&format!("running: lookout docker --label {label}"));
    let mut child = Command::new(&bin)
        .args(["docker", "--label", &label])
        .env("DOCKER_HOST", engines::docker_host())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let (out_tx, out_rx) = mpsc::channel();
    let (err_tx, err_rx) = mpsc::channel();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let cleanup = Cleanup {
        lookout: Some(child),
        container: name.clone(),
    };
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            if out_tx.send(line).is_err() {
                break;
            }
        }
    });
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  {line}");
            let _ = err_tx.send(line);
        }
    });
    let connected = |rx: &mpsc::Receiver<String>| -> Result<(), String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .map_err(|_| format!("lookout did not connect within {WAIT:?}"))?;
            if line.contains("connected,") {
                return Ok(());
            }
        }
    };
    connected(&err_rx)?;

    say(&format!("docker create {name}"));
    engines::docker_create_test_container(&name, &["--label", &label])?;
    expect(&out_rx, &name, "created", &["live"])?;

    say(&format!("docker start {name}"));
    engines::docker(&["start", &name])?;
    expect(&out_rx, &name, "started", &["live"])?;

    say(&format!(
        "docker stop {name}: its SIGTERM is a stop request (stopping), its end a requested stop"
    ));
    engines::docker(&["stop", "-t", "1", &name])?;
    expect(&out_rx, &name, "stopping", &["live"])?;
    expect(&out_rx, &name, "stopped", &["live"])?;

    say(&format!("docker start {name}"));
    engines::docker(&["start", &name])?;
    expect(&out_rx, &name, "started", &["live"])?;

    say("kill -9 dockerd: lookout loses its connection and keeps retrying");
    engines::docker_kill9()?;
    say(
        "starting dockerd again: it stops the container while starting up, before any client can connect",
    );
    engines::docker_start()?;
    say(
        "lookout reconnects, lists and diffs: the missed stop is reported once, with its exit code",
    );
    expect(&out_rx, &name, "stopped", &["resync", "live"])?;
    connected(&err_rx)?;

    say(&format!("docker rm {name}"));
    engines::docker(&["rm", "-f", &name])?;
    expect(&out_rx, &name, "removed", &["live"])?;

    say("done: stopping lookout (SIGTERM) and cleaning up");
    drop(cleanup);
    Ok(())
}
