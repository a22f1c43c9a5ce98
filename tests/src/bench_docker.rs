//! What the benches against the real dockerd share (`docker_latency`,
//! `serve`, `etcd`): driving container lifecycles through bollard, cleaning
//! up, percentiles, event times, and the built `lookout` binary run with
//! its output read.
#![allow(
    // The output of the `lookout` a bench runs is read on threads.
    clippy::disallowed_methods,
    clippy::missing_panics_doc,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::engines;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};

/// Bound of one engine API call.
pub const CALL: Duration = Duration::from_secs(60);
/// The label of every container of a run.
pub const LABEL: &str = "lookout.bench";

/// Runs one engine API call, bounded by [`CALL`]; panics on an error.
pub async fn call<T, E: std::fmt::Display>(
    what: &str,
    fut: impl Future<Output = Result<T, E>>,
) -> T {
    tokio::time::timeout(CALL, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {CALL:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Create, start, stop (t=0), remove `name`.
pub async fn lifecycle(docker: &Docker, image: &str, tag: &str, name: &str) {
    up(docker, image, tag, name).await;
    down(docker, name).await;
}

/// Create and start `name` (labelled `LABEL=tag`, `sleep 3600`, no network).
pub async fn up(docker: &Docker, image: &str, tag: &str, name: &str) {
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        cmd: Some(vec!["sleep".to_owned(), "3600".to_owned()]),
        labels: Some(HashMap::from([
            (LABEL.to_owned(), tag.to_owned()),
            ("lookout.cleanup".to_owned(), tag.to_owned()),
        ])),
        host_config: Some(HostConfig {
            network_mode: Some("none".to_owned()),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let create = CreateContainerOptionsBuilder::new().name(name).build();
    call(
        &format!("create {name}"),
        docker.create_container(Some(create), body),
    )
    .await;
    call(&format!("start {name}"), docker.start_container(name, None)).await;
}

/// Stop (t=0) and remove `name`.
pub async fn down(docker: &Docker, name: &str) {
    let stop = StopContainerOptionsBuilder::new().t(0).build();
    call(
        &format!("stop {name}"),
        docker.stop_container(name, Some(stop)),
    )
    .await;
    let rm = RemoveContainerOptionsBuilder::new().build();
    call(
        &format!("rm {name}"),
        docker.remove_container(name, Some(rm)),
    )
    .await;
}

/// Removes every container of the run on drop (`docker rm -f`).
#[derive(Debug)]
pub struct Cleanup(pub String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label=lookout.cleanup={}", self.0);
        if let Ok(ids) = engines::docker(&["ps", "-aq", "--filter", &filter]) {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let _ = engines::docker(&[["rm", "-f"].as_slice(), &ids].concat());
            }
        }
    }
}

/// p-th percentile (nearest rank) of sorted `v`.
pub fn pct(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// The built `lookout` binary: `LOOKOUT_BIN`, else `target/<profile>/lookout`
/// beside the running bench (`cargo xtask bench` builds it).
pub fn lookout_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("LOOKOUT_BIN") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/BENCH-HASH → target/<profile>/lookout
    let exe = std::env::current_exe().expect("the bench's own path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("lookout"))
        .expect("a target directory");
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build --release -p lookout-cli` for \
         `cargo bench`, `cargo build -p lookout-cli` for `cargo test --benches`; \
         `cargo xtask bench` does), or set LOOKOUT_BIN",
        bin.display()
    );
    bin
}

/// `2026-11-30T03:42:18.979493067Z` in ns since the epoch.
pub fn rfc3339_ns(s: &str) -> Option<i128> {
    let n = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    let (year, month, day) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(11..13)? * 3600 + n(14..16)? * 60 + n(17..19)?;
    Some(i128::from(secs) * 1_000_000_000 + i128::from(n(20..29)?))
}

/// This machine's realtime clock, ns since the epoch.
pub fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(0))
}

/// Whether the engines' environment is set (`LOOKOUT_ENGINES=1`); if not,
/// prints `skipped: engines not configured` (what a bench then says).
pub fn engines_configured() -> bool {
    if engines::engines_enabled() {
        return true;
    }
    println!("skipped: engines not configured");
    eprintln!(
        "({}=1 is not set: run under `cargo xtask` or with `cargo xtask engines env`'s variables)",
        engines::ENV_ENGINES
    );
    false
}

/// A running `lookout` (the built binary, no `RUST_LOG`): its stdout lines,
/// each with its read time ([`now_ns`]), and its stderr lines, read on
/// threads of their own into channels; killed on drop.
#[derive(Debug)]
pub struct LookoutProcess {
    /// The process.
    pub child: Child,
    /// Its stdout lines (none when started with `stdout` false: to /dev/null).
    pub out: mpsc::Receiver<(i128, String)>,
    /// Its stderr lines.
    pub err: mpsc::Receiver<String>,
}

impl LookoutProcess {
    /// Runs `bin args`; its stdout read when `stdout`, else to /dev/null.
    pub fn start(bin: &Path, args: &[String], stdout: bool) -> Self {
        let mut child = Command::new(bin)
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(if stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let (tx, out) = mpsc::channel();
        if let Some(pipe) = child.stdout.take() {
            thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if tx.send((now_ns(), line)).is_err() {
                        break;
                    }
                }
            });
        }
        let (tx, err) = mpsc::channel();
        let pipe = child.stderr.take().expect("stderr");
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, out, err }
    }

    /// Its next stderr JSON line whose `status` is `status` (the lines
    /// before it are passed over), within [`CALL`].
    pub fn status(&self, status: &str) -> serde_json::Value {
        let deadline = Instant::now() + CALL;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.err.recv_timeout(left).unwrap_or_else(|_| {
                panic!("lookout: no {status:?} status within {CALL:?}: {seen:?}")
            });
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if v["status"] == status {
                return v;
            }
            seen.push(line);
        }
    }
}

impl Drop for LookoutProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
