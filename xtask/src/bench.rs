//! `cargo xtask bench`: the full benches in one go, their tables printed as
//! they come (stdout), preceded by the machine and its load (the figures are
//! wall-clock and shift with whatever else runs).
//!
//! 1. `cargo bench -p lookout-core --bench overhead`
//! 2. `cargo bench -p lookout-core --bench instructions` (under callgrind,
//!    when valgrind is installed: the same cost counted in instructions)
//! 3. `cargo bench -p lookout-core --bench resync`
//! 4. `cargo bench -p lookout-core --bench fanout` (the shared hub), then
//!    `--bench merge` (many watches in one stream)
//! 5. `cargo bench -p lookout-e2e --bench firehose` (when that bench exists)
//! 6. `cargo bench -p lookout-e2e --bench k8s_churn` (the real test apiserver),
//!    then `--bench k8s_scale` (20 000 Deployments: memory per object and
//!    time to synced beside kube-runtime's stores and `kubectl`)
//! 7. `cargo bench -p lookout-e2e --bench docker_latency` (the real dockerd)
//! 8. `cargo bench -p lookout-e2e --bench serve` (`lookout --serve` and 1000
//!    HTTP clients, the real dockerd; the `lookout` binary is built first:
//!    `cargo build --release -p lookout-cli`, or without `--release` for
//!    `--smoke`)
//! 9. `cargo bench -p lookout-e2e --bench etcd` (dockerd → `lookout docker
//!    --publish` → the 3-member etcd cluster → `lookout etcd`; the binary is
//!    built first, as for `serve`)
//! 10. `cargo bench -p lookout-e2e --bench startup` (`lookout docker`'s
//!     start-up at 2 000 and 10 000 containers on the real dockerd; the
//!     binary is built first, as for `serve`)
//! 11. `cargo bench -p lookout-e2e --bench etcd_fleet` (100 publishers on
//!     fake engines × 1000 instances, 1000 transitions/s for 60 s, one
//!     `lookout etcd`; the binary built first)
//!
//! Every bench runs with the engines' environment (`engines::env_vars()`:
//! `LOOKOUT_ENGINES=1`, the docker host, the testbed's kubeconfig, …), as
//! `cargo xtask ci` runs the tests: the real-engine benches bring an engine
//! that is down up themselves (and skip, printing "skipped: engines not
//! configured", only without that environment).
//!
//! `cargo xtask bench --smoke` runs the same benches as `cargo test --benches`
//! does (small sizes), for a quick check that they still work.

use std::fs;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::engines;

/// (package, bench, file that must exist for it to be run).
const BENCHES: &[(&str, &str, &str)] = &[
    (
        "lookout-core",
        "overhead",
        "crates/core-stream/benches/overhead.rs",
    ),
    (
        "lookout-core",
        "instructions",
        "crates/core-stream/benches/instructions.rs",
    ),
    (
        "lookout-core",
        "resync",
        "crates/core-stream/benches/resync.rs",
    ),
    (
        "lookout-core",
        "fanout",
        "crates/core-stream/benches/fanout.rs",
    ),
    (
        "lookout-core",
        "merge",
        "crates/core-stream/benches/merge.rs",
    ),
    ("lookout-e2e", "firehose", "tests/benches/firehose.rs"),
    ("lookout-e2e", "k8s_churn", "tests/benches/k8s_churn.rs"),
    ("lookout-e2e", "k8s_scale", "tests/benches/k8s_scale.rs"),
    (
        "lookout-e2e",
        "docker_latency",
        "tests/benches/docker_latency.rs",
    ),
    ("lookout-e2e", "serve", "tests/benches/serve.rs"),
    ("lookout-e2e", "etcd", "tests/benches/etcd.rs"),
    ("lookout-e2e", "startup", "tests/benches/startup.rs"),
    ("lookout-e2e", "etcd_fleet", "tests/benches/etcd_fleet.rs"),
];

/// Benches that run the built `lookout` binary: it is built first, in the
/// bench's profile (`target/release/lookout` for `cargo bench`).
const NEEDS_BINARY: &[&str] = &["serve", "etcd", "startup", "etcd_fleet"];

pub fn run(args: &[String]) -> Result<(), String> {
    let smoke = match args.first().map(String::as_str) {
        None => false,
        Some("--smoke") => true,
        Some(a) => {
            return Err(format!(
                "`cargo xtask bench` takes only `--smoke` (got {a:?})"
            ));
        }
    };
    let root = engines::workspace_root();
    // The real-engine benches need the engines' env, as `cargo xtask ci`'s tests do.
    let env = engines::env_vars();
    for (k, v) in &env {
        eprintln!("    {k}={v}");
    }
    println!("machine: {}", machine());
    println!("load before: {}", load());
    let total = Instant::now();
    for (package, bench, file) in BENCHES {
        if !root.join(file).exists() {
            eprintln!("==> bench `{bench}`: {file} is missing, skipped");
            continue;
        }
        let mut cargo_args = vec!["bench", "--locked", "-p", package, "--bench", bench];
        if smoke {
            // Without `--bench` after `--`, each bench runs its smoke size.
            cargo_args = vec!["test", "--locked", "-p", package, "--bench", bench];
        }
        if NEEDS_BINARY.contains(bench) {
            let mut build = vec!["build", "--locked", "-p", "lookout-cli", "--bin", "lookout"];
            if !smoke {
                build.push("--release");
            }
            eprintln!("==> cargo {}", build.join(" "));
            let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
                .args(&build)
                .current_dir(&root)
                .stdin(Stdio::null())
                .status()
                .map_err(|e| format!("cannot run cargo: {e}"))?;
            if !status.success() {
                return Err(format!("`cargo {}` exited with {status}", build.join(" ")));
            }
        }
        println!("\n## {package} / {bench}  (load before: {})", load());
        eprintln!("==> cargo {}", cargo_args.join(" "));
        let t = Instant::now();
        let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(&cargo_args)
            .current_dir(&root)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !status.success() {
            return Err(format!(
                "`cargo {}` exited with {status}",
                cargo_args.join(" ")
            ));
        }
        println!(
            "({bench}: {:.1?} wall, load after: {})",
            t.elapsed(),
            load()
        );
    }
    println!(
        "\nall benches: {:.1?}; load after: {}",
        total.elapsed(),
        load()
    );
    Ok(())
}

/// `N cores, MODEL` from `nproc`'s view and /proc/cpuinfo.
pub(crate) fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cores} cores, {model}")
}

/// The 1/5/15-minute load averages from /proc/loadavg.
pub(crate) fn load() -> String {
    fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}
