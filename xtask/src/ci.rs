//! `cargo xtask ci`: the whole pipeline `.ci/run` runs, step by step, stopping
//! at the first failure. Each step prints its name and duration (on stderr, so
//! that stdout carries the cargo commands' own output, test summaries included).
//!
//! 1. `cargo fmt --all -- --check`
//! 2. `cargo clippy --workspace --all-targets --locked -- -D warnings`
//! 3. `cargo xtask structure` (in process): no import circle between the files
//!    of a crate, no file of a published crate over 500 lines of non-test code
//!    (`structure.rs`)
//! 4. `cargo deny check bans licenses sources` (installs cargo-deny if missing;
//!    advisories are not checked: their database cannot be fetched here)
//! 5. `engines up all`: dockerd (and the two beside it), podman, a non-root
//!    user's rootless podman, the test sshd, swarm, k8s, a 3-member etcd
//!    cluster, headless Chromium (the `--serve` page's tests) and nginx on
//!    127.0.0.1 (the `--render` tests); any failure fails CI
//! 6. `cargo xtask image` (`image.rs`): the container image `lookout:latest`
//!    in dockerd (a static musl build of lookout-cli on `scratch`), which
//!    `crates/lookout/tests/image.rs` runs
//! 7. `cargo test --workspace --locked` with the engines' environment (the
//!    docs' links and flags included: `crates/lookout/tests/docs.rs`)
//! 8. `cargo build --workspace --bins --locked`: the `lookout` binary the
//!    `serve` bench drives (`target/debug/lookout`)
//! 9. `cargo xtask schemathesis` with the engines' environment
//!    (`schemathesis.rs`): schemathesis, pinned and installed in a venv under
//!    `target/` when missing, against that `lookout docker --serve` and the
//!    `OpenAPI` document it serves, every check, no failure (the run bounded
//!    by 2 min)
//! 10. `cargo test --benches --workspace --locked` with the engines'
//!     environment: the benches' smoke runs (each bench without `--bench` runs
//!     a small size, the real-engine ones against the engines; see `cargo
//!     xtask bench`)
//! 11. `cargo test --workspace --bench soak --locked -- --minutes 1`: the
//!     1-minute soak (`cargo xtask soak` runs the long one)
//! 12. `cargo xtask fuzz --seconds 30`: each decoder's fuzz target for 30 s
//!     (libFuzzer on nightly, installing cargo-fuzz if missing; without
//!     nightly, the same harnesses on stable with random inputs, said loudly)
//! 13. `cargo doc --workspace --no-deps --locked` with `RUSTDOCFLAGS=-D warnings`
//! 14. `cargo xtask release --dry-run` (`release.rs`; in CI with
//!     `--discard-builds`): the release plan from each crate's changelog
//!     and last release (`release/versions.toml`), cargo-semver-checks of every changed library against its last
//!     release (installed if missing), the MSRV checks (no dependency in
//!     `Cargo.lock` above a crate's `rust-version`; the crates built with
//!     that Rust itself, which rustup installs),
//!     `cargo package` of every published crate (each built from its
//!     `.crate` file; no test data in any), and the downstream fixture
//!     (`tests/downstream/`) built from the packaged files and run against
//!     the engines
//!
//! The engines are left running; `cargo xtask engines down` stops them.
//!
//! Every cargo it runs has `CARGO_INCREMENTAL=0`, and the free disk is printed
//! before the first step and after each: a run's target folder is 13 GB (22 GB
//! with incremental caches and full debug info, before the workspace's dev
//! profile kept line tables only), and a disk that fills mid-run shows as a
//! linker killed by SIGBUS. With `CI` set, what no later step reads goes once
//! its step passed (`discard.rs`): the test executables after `soak`, the
//! fuzz build after `fuzz`, and the release's semver and MSRV builds
//! (`--discard-builds`); a CI machine with 3.0 GiB left after `doc` had run
//! out in the release's MSRV build.
//!
//! cargo test's own summaries reach stdout line by line; the last stdout line
//! of the run is the plain total, `tests: N passed, N failed, N skipped`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::discard::Discard;
use crate::process::{cargo_bin, run_inherited, wait_bounded};
use crate::{engines, engines_cmd};

const MINUTE: Duration = Duration::from_secs(60);

/// The cargo-deny that CI installs when `cargo deny` is missing (pinned: its
/// config format changes between releases; 0.20 needs Rust >= 1.88), built
/// without LTO (`process::install_cargo_tool`).
const DENY_CRATE: &str = "cargo-deny@0.20.2";

/// Set for every cargo that CI runs. CI builds each crate once, so
/// incremental compilation saves no time there; its caches took 4.1 GB of a
/// CI run's target folder (measured on `a4f6374`).
const BUILD_ENV: [(&str, &str); 1] = [("CARGO_INCREMENTAL", "0")];

struct Step {
    name: &'static str,
    timeout: Duration,
    action: Action,
}

enum Action {
    Cargo {
        args: &'static [&'static str],
        env: Vec<(String, String)>,
    },
    /// `cargo test`, with the environment of the engines as they are when it
    /// starts; its `test result:` lines count in the run's total.
    Test {
        args: &'static [&'static str],
    },
    /// A cargo command with the engines' environment (the benches' and the
    /// soak's smoke runs), not counted as tests.
    WithEngines {
        args: &'static [&'static str],
    },
    /// `cargo xtask structure`, in this process.
    Structure,
    Deny,
    Engines,
}

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("`cargo xtask ci` takes no arguments (got {a:?})"));
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let root = engines::workspace_root();
    let steps = steps(ci);
    let total = Instant::now();
    let mut done: Vec<(&str, Duration)> = Vec::new();
    let mut counts = Counts::default();
    eprintln!("==> ci: {}", free_disk(&root));
    for step in &steps {
        eprintln!("\n==> ci step `{}` ({})", step.name, step.describe());
        let t = Instant::now();
        let result = match &step.action {
            Action::Cargo { args, env } => cargo(&root, args, env, step.timeout),
            Action::Test { args } => {
                cargo_test(&root, args, &test_env(), step.timeout, &mut counts)
            }
            Action::WithEngines { args } => cargo(&root, args, &test_env(), step.timeout),
            Action::Structure => crate::structure::check(&root),
            Action::Deny => deny(&root, step.timeout),
            Action::Engines => engines_cmd::up(&engines_cmd::ALL),
        };
        let took = t.elapsed();
        if let Err(e) = result {
            summary(&done, total.elapsed());
            counts.print();
            return Err(format!(
                "ci step `{}` FAILED after {took:.1?} ({}): {e}",
                step.name,
                free_disk(&root)
            ));
        }
        if ci {
            for d in discards(step.name) {
                crate::discard::discard_loudly(&root, *d);
            }
        }
        eprintln!(
            "==> ci step `{}` ok in {took:.1?} ({})",
            step.name,
            free_disk(&root)
        );
        done.push((step.name, took));
    }
    summary(&done, total.elapsed());
    counts.print();
    eprintln!(
        "==> ci: all {} steps passed; the engines are left running (`cargo xtask engines down`)",
        steps.len()
    );
    Ok(())
}

/// The pipeline. `ci`: running in CI (a fresh clone), else on a developer's tree.
// One entry per step, in order: longer as the pipeline grows, and clearest as one list.
#[allow(clippy::too_many_lines)]
fn steps(ci: bool) -> [Step; 14] {
    // The release's dry run packages the crates: a developer's tree usually
    // has uncommitted changes, CI's fresh clone has none.
    let release_args: &'static [&'static str] = if ci {
        &["xtask", "release", "--dry-run", "--discard-builds"]
    } else {
        &["xtask", "release", "--dry-run", "--allow-dirty"]
    };
    [
        Step {
            name: "fmt",
            timeout: 5 * MINUTE,
            action: Action::Cargo {
                args: &["fmt", "--all", "--", "--check"],
                env: vec![],
            },
        },
        Step {
            name: "clippy",
            timeout: 30 * MINUTE,
            action: Action::Cargo {
                args: &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--locked",
                    "--",
                    "-D",
                    "warnings",
                ],
                env: vec![],
            },
        },
        Step {
            name: "structure",
            timeout: MINUTE,
            action: Action::Structure,
        },
        Step {
            name: "deny",
            timeout: 30 * MINUTE,
            action: Action::Deny,
        },
        Step {
            name: "engines up all",
            timeout: 75 * MINUTE,
            action: Action::Engines,
        },
        Step {
            name: "image",
            // Cold: the musl target's std, musl-tools and a release build of
            // lookout-cli's tree (5.7 min measured on 2 cores); warm: 2 s.
            timeout: 30 * MINUTE,
            action: Action::Cargo {
                args: &["xtask", "image"],
                env: vec![],
            },
        },
        Step {
            name: "test",
            timeout: 45 * MINUTE,
            action: Action::Test {
                args: &["test", "--workspace", "--locked"],
            },
        },
        Step {
            name: "build bins",
            timeout: 20 * MINUTE,
            action: Action::Cargo {
                // The `serve` bench runs the built `lookout` (with the
                // workspace's features, as `test` built it: no recompile).
                args: &["build", "--workspace", "--bins", "--locked"],
                env: vec![],
            },
        },
        Step {
            name: "schemathesis",
            // Cold: python3-venv from Debian and schemathesis from PyPI;
            // the run itself (13 s measured) is bounded by 2 min in
            // `schemathesis.rs`.
            timeout: 15 * MINUTE,
            action: Action::WithEngines {
                args: &["xtask", "schemathesis"],
            },
        },
        Step {
            name: "bench smoke",
            timeout: 10 * MINUTE,
            action: Action::WithEngines {
                args: &["test", "--benches", "--workspace", "--locked"],
            },
        },
        Step {
            name: "soak",
            timeout: 5 * MINUTE,
            action: Action::Cargo {
                // The debug build `bench smoke` made (with `-p` instead of
                // `--workspace` the features differ and it recompiles).
                args: &[
                    "test",
                    "--workspace",
                    "--bench",
                    "soak",
                    "--locked",
                    "--",
                    "--minutes",
                    "1",
                ],
                env: vec![],
            },
        },
        Step {
            name: "fuzz",
            // Cold: installing cargo-fuzz (~2 min) and the first sanitizer
            // build of the fuzz crate (~6 min idle, 22 min measured at load 5).
            timeout: 40 * MINUTE,
            action: Action::Cargo {
                args: &["xtask", "fuzz", "--seconds", "30"],
                env: vec![],
            },
        },
        Step {
            name: "doc",
            timeout: 20 * MINUTE,
            action: Action::Cargo {
                args: &["doc", "--workspace", "--no-deps", "--locked"],
                env: vec![("RUSTDOCFLAGS".to_owned(), "-D warnings".to_owned())],
            },
        },
        Step {
            name: "release --dry-run",
            // Cold: installing cargo-semver-checks (6.3 min measured), the
            // packages' verification, the downstream fixture's three builds.
            timeout: 50 * MINUTE,
            action: Action::Cargo {
                args: release_args,
                env: vec![],
            },
        },
    ]
}

/// In CI, what a step's success lets go of (`discard.rs`): the test
/// executables after the last step that runs them, the fuzz build after
/// the fuzz (the release's own builds go with `--discard-builds`).
fn discards(step: &str) -> &'static [Discard] {
    match step {
        "soak" => &[Discard::TestExecutables],
        "fuzz" => &[Discard::FuzzBuild],
        _ => &[],
    }
}

impl Step {
    fn describe(&self) -> String {
        match &self.action {
            Action::Cargo { args, env } => {
                let vars: Vec<String> = env
                    .iter()
                    .filter(|(k, _)| k == "RUSTDOCFLAGS" || k == "RUST_BACKTRACE")
                    .map(|(k, v)| format!("{k}={v:?} "))
                    .collect();
                format!("{}cargo {}", vars.concat(), args.join(" "))
            }
            Action::Test { args } | Action::WithEngines { args } => format!(
                "RUST_BACKTRACE=1 {ENV}=1 (and the engines' variables) cargo {}",
                args.join(" "),
                ENV = engines::ENV_ENGINES
            ),
            Action::Structure => "cargo xtask structure".to_owned(),
            Action::Deny => "cargo deny check bans licenses sources".to_owned(),
            Action::Engines => crate::engines_cmd::ALL.join(", "),
        }
    }
}

/// The engines' variables (`LOOKOUT_ENGINES=1`, hosts, kubeconfig, …) and
/// `RUST_BACKTRACE=1`; printed so a failing test can be rerun by hand.
fn test_env() -> Vec<(String, String)> {
    let mut env = engines::env_vars();
    env.push(("RUST_BACKTRACE".to_owned(), "1".to_owned()));
    for (k, v) in &env {
        eprintln!("    {k}={v}");
    }
    env
}

fn summary(done: &[(&str, Duration)], total: Duration) {
    eprintln!("\n==> ci summary");
    for (name, took) in done {
        eprintln!("    {name:<16} {took:>10.1?}");
    }
    eprintln!("    {:<16} {total:>10.1?}", "total");
}

/// The space left on the workspace's file system, as `df` tells it: printed
/// before the first step and after each, so that a step that failed for want
/// of disk (a linker killed by SIGBUS, say) shows it.
fn free_disk(root: &std::path::Path) -> String {
    let out = Command::new("df")
        .args(["-Pk", "--"])
        .arg(root)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let avail_kib = out.ok().and_then(|o| {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        // `df -P`: a header line, then `fs blocks used available capacity mount`.
        text.lines()
            .nth(1)?
            .split_whitespace()
            .nth(3)?
            .parse::<u64>()
            .ok()
    });
    match avail_kib {
        #[allow(clippy::cast_precision_loss)] // a figure to read, not to compute with
        Some(kib) => format!("{:.1} GiB free on disk", kib as f64 / (1024.0 * 1024.0)),
        None => "free disk unknown: `df` failed".to_owned(),
    }
}

fn cargo(
    root: &std::path::Path,
    args: &[&str],
    env: &[(String, String)],
    timeout: Duration,
) -> Result<(), String> {
    let mut cmd = Command::new(cargo_bin());
    cmd.args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .envs(BUILD_ENV);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = run_inherited(&mut cmd, timeout)?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` exited with {status}", args.join(" ")))
    }
}

/// The tests `cargo test` ran, summed over its `test result:` lines.
#[derive(Debug, Default)]
struct Counts {
    ran: bool,
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Counts {
    /// Add one `test result: ok. 18 passed; 0 failed; 1 ignored; …` line.
    fn add(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        self.ran = true;
        for part in rest.split([';', '.']) {
            let mut words = part.split_whitespace();
            let (Some(n), Some(what)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }

    /// The whole run's plain closing line, last on stdout (the cargo test
    /// summaries above it end with doc-tests, often `0 passed`).
    fn print(&self) {
        if self.ran {
            println!(
                "tests: {} passed, {} failed, {} skipped",
                self.passed, self.failed, self.ignored
            );
        }
    }
}

/// `cargo test …` with its stdout passed through line by line (test
/// summaries included) and its `test result:` lines summed into `counts`.
fn cargo_test(
    root: &std::path::Path,
    args: &[&str],
    env: &[(String, String)],
    timeout: Duration,
    counts: &mut Counts,
) -> Result<(), String> {
    let mut cmd = Command::new(cargo_bin());
    cmd.args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .envs(BUILD_ENV);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `cargo {}`: {e}", args.join(" ")))?;
    let stdout = child.stdout.take().ok_or("cargo test: no stdout pipe")?;
    let (tx, rx) = mpsc::channel::<String>();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            println!("{line}");
            let _ = std::io::stdout().flush();
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let status = wait_bounded(&mut child, timeout, &format!("cargo {}", args.join(" ")));
    // The pipe closes when cargo (and every test process) is gone; bounded anyway.
    let drain_until = Instant::now() + Duration::from_secs(10);
    loop {
        let left = drain_until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => counts.add(&line),
            Err(_) => break,
        }
    }
    let status = status?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` exited with {status}", args.join(" ")))
    }
}

/// cargo-deny: installed (`process::install_cargo_tool`) if `cargo deny
/// --version` fails, then `cargo deny --locked check bans licenses sources`.
fn deny(root: &std::path::Path, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    crate::process::install_cargo_tool(root, "deny", DENY_CRATE, timeout)?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(MINUTE);
    cargo(
        root,
        &["deny", "--locked", "check", "bans", "licenses", "sources"],
        &[],
        left,
    )
}
