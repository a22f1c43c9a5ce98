//! `cargo xtask fuzz [--seconds N] [TARGET]...`: the fuzz targets of `fuzz/`
//! (issue #7), each for N seconds (default 150: the four targets make the
//! issue's 10 minutes), one after the other, then a table of what each did.
//!
//! Targets: `docker_events`, `podman_events`, `swarm_events` (the `/events`
//! decoder through `lookout_testkit::fuzz::events`) and `k8s_watch` (watch
//! frames through kube and `lookout_testkit::fuzz::k8s`); default all.
//!
//! With libFuzzer (nightly + cargo-fuzz): `cargo +nightly fuzz run -s none
//! TARGET target/fuzz-corpus/TARGET fuzz/corpus/TARGET -- -max_total_time=N
//! …`. libFuzzer reads both directories and writes what it finds to the
//! first, under `target/` (kept between runs, never committed): the seeds in
//! `fuzz/corpus/` stay as they are. A crash is saved in `fuzz/artifacts/TARGET/`
//! (replay: `cargo +nightly fuzz run -s none TARGET FILE`) and fails the run.
//! cargo-fuzz is installed (pinned, [`CARGO_FUZZ`]) when missing; the
//! nightly toolchain when rustup can install it.
//!
//! Without nightly (or when cargo-fuzz cannot be installed) it says so loudly
//! and falls back to the stable replay of the same harnesses: `cargo test -p
//! lookout-testkit --test fuzz_corpus TARGET_` with `LOOKOUT_FUZZ_SECONDS=N`, the seeds and
//! then N seconds of random inputs and mutated seeds, without coverage
//! guidance. `--stable` forces that fallback.
//!
//! libFuzzer's log of each target is in `target/fuzz-logs/TARGET.log`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::engines;

/// The cargo-fuzz that is installed when missing (pinned: its flags change).
const CARGO_FUZZ: &str = "cargo-fuzz@0.13.2";

/// The targets; their harnesses and corpus replay tests are lookout-testkit's.
const TARGETS: &[&str] = &[
    "docker_events",
    "podman_events",
    "swarm_events",
    "k8s_watch",
];

/// libFuzzer's options besides the time: inputs of up to 16 KiB (the
/// harnesses repeat a body up to 8 MiB themselves), 1 GiB of RSS (a decoder
/// holding more fails), 30 s per input (a stalled stream fails sooner, in the
/// harness).
const LIBFUZZER_OPTIONS: &[&str] = &[
    "-max_len=16384",
    "-rss_limit_mb=1024",
    "-timeout=30",
    "-print_final_stats=1",
];

pub fn run(args: &[String]) -> Result<(), String> {
    let mut seconds: u64 = 150;
    let mut stable = false;
    let mut targets: Vec<&'static str> = Vec::new();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s| *s > 0)
                    .ok_or("--seconds takes a number of seconds above 0")?;
            }
            "--stable" => stable = true,
            name => {
                let Some(target) = TARGETS.iter().find(|t| **t == name) else {
                    return Err(format!(
                        "unknown fuzz target {name:?} (targets: {})",
                        TARGETS.join(", ")
                    ));
                };
                targets.push(*target);
            }
        }
    }
    if targets.is_empty() {
        targets = TARGETS.to_vec();
    }
    let root = engines::workspace_root();
    let why_not = if stable {
        Some("--stable was given".to_owned())
    } else {
        libfuzzer_ready(&root).err()
    };
    eprintln!(
        "==> fuzz: {} for {seconds} s each ({} s in all)",
        targets.join(", "),
        seconds * targets.len() as u64
    );
    let started = Instant::now();
    let results = match &why_not {
        None => targets
            .iter()
            .map(|t| libfuzzer(&root, t, seconds))
            .collect::<Vec<_>>(),
        Some(why) => {
            loud(&format!(
                "NO LIBFUZZER ({why}): falling back to the stable replay of the same \
                 harnesses, seeds + {seconds} s of random inputs per target, WITHOUT coverage \
                 guidance. This is not the fuzzing issue #7 asks for."
            ));
            targets
                .iter()
                .map(|t| stable_run(&root, t, seconds))
                .collect()
        }
    };
    eprintln!(
        "\n==> fuzz: done in {:.0} s ({})",
        started.elapsed().as_secs_f64(),
        if why_not.is_some() {
            "stable fallback, no libFuzzer"
        } else {
            "libFuzzer"
        }
    );
    let failed = print_table(&results);
    if let Some(why) = &why_not {
        loud(&format!(
            "NO LIBFUZZER ({why}): what ran was the stable replay + random inputs, \
             WITHOUT coverage guidance"
        ));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzz target(s) failed: {}", failed.join(", ")))
    }
}

/// The table of what each target did (stdout); the targets that failed.
fn print_table(results: &[Outcome]) -> Vec<&'static str> {
    println!(
        "{:<14} {:>6} {:>10} {:>8} {:>6} {:>6} {:>13} {:>7} {:>7}  result",
        "target", "secs", "execs", "exec/s", "cov", "ft", "corpus", "new", "rss MB"
    );
    let mut failed = Vec::new();
    for r in results {
        println!(
            "{:<14} {:>6} {:>10} {:>8} {:>6} {:>6} {:>13} {:>7} {:>7}  {}",
            r.target,
            r.seconds,
            r.execs,
            r.exec_per_sec,
            r.cov,
            r.ft,
            r.corpus,
            r.new_units,
            r.rss_mb,
            r.failure.as_deref().unwrap_or("ok")
        );
        if r.failure.is_some() {
            failed.push(r.target);
        }
    }
    failed
}

/// What one target did; `-` where unknown.
struct Outcome {
    target: &'static str,
    seconds: String,
    execs: String,
    exec_per_sec: String,
    cov: String,
    ft: String,
    corpus: String,
    new_units: String,
    rss_mb: String,
    /// `None`: passed; else why it failed.
    failure: Option<String>,
}

impl Outcome {
    fn new(target: &'static str) -> Self {
        let dash = || "-".to_owned();
        Self {
            target,
            seconds: dash(),
            execs: dash(),
            exec_per_sec: dash(),
            cov: dash(),
            ft: dash(),
            corpus: dash(),
            new_units: dash(),
            rss_mb: dash(),
            failure: None,
        }
    }
}

fn loud(message: &str) {
    let bar = "!".repeat(78);
    eprintln!("\n{bar}\n!!! {message}\n{bar}\n");
}

/// Nightly and cargo-fuzz, installing what is missing; `Err` says what is
/// still missing.
fn libfuzzer_ready(root: &Path) -> Result<(), String> {
    let nightly = || {
        Command::new("rustup")
            .args(["run", "nightly", "rustc", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !nightly() {
        eprintln!("==> fuzz: no nightly toolchain: rustup toolchain install nightly");
        let installed = Command::new("rustup")
            .args(["toolchain", "install", "nightly", "--profile", "minimal"])
            .status()
            .is_ok_and(|s| s.success());
        if !installed || !nightly() {
            return Err("no nightly toolchain, and rustup could not install one".to_owned());
        }
    }
    crate::process::install_cargo_tool(root, "fuzz", CARGO_FUZZ, Duration::from_secs(20 * 60))
        .map_err(|e| format!("cargo-fuzz is missing and could not be installed: {e}"))
}

/// One target under libFuzzer.
fn libfuzzer(root: &Path, target: &'static str, seconds: u64) -> Outcome {
    let mut out = Outcome::new(target);
    out.seconds = seconds.to_string();
    let seeds = root.join("fuzz/corpus").join(target);
    let grown = root.join("target/fuzz-corpus").join(target);
    let logs = root.join("target/fuzz-logs");
    if let Err(e) = fs::create_dir_all(&grown).and_then(|()| fs::create_dir_all(&logs)) {
        out.failure = Some(format!("cannot create {}: {e}", grown.display()));
        return out;
    }
    let before = count_files(&grown) + count_files(&seeds);
    let log_path = logs.join(format!("{target}.log"));
    eprintln!(
        "\n==> fuzz {target}: {seconds} s (corpus {} + seeds {}; log {})",
        grown.display(),
        seeds.display(),
        log_path.display()
    );
    let max_time = format!("-max_total_time={seconds}");
    let mut cmd = Command::new("cargo");
    cmd.args(["+nightly", "fuzz", "run", "-s", "none", target])
        .arg(&grown)
        .arg(&seeds)
        .arg("--")
        .arg(&max_time)
        .args(LIBFUZZER_OPTIONS)
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            out.failure = Some(format!("cannot run cargo fuzz: {e}"));
            return out;
        }
    };
    // libFuzzer talks on stderr, cargo's build too; stdout carries nothing much.
    let stdout = child.stdout.take();
    let echo = std::thread::spawn(move || {
        if let Some(s) = stdout {
            for line in BufReader::new(s).lines().map_while(Result::ok) {
                eprintln!("{line}");
            }
        }
    });
    let mut log = String::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // The build, the start, the crash; not libFuzzer's every NEW/pulse line.
            let noisy = line.starts_with('#')
                && matches!(
                    line.split_whitespace().nth(1),
                    Some("NEW" | "REDUCE" | "pulse")
                );
            if !noisy {
                eprintln!("{line}");
            }
            log.push_str(&line);
            log.push('\n');
        }
    }
    let _ = echo.join();
    let status = child.wait();
    let _ = fs::write(&log_path, &log);
    read_stats(&log, &mut out);
    let after = count_files(&grown) + count_files(&seeds);
    out.corpus = format!("{before}->{after}");
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            let artifact = log
                .lines()
                .find_map(|l| l.split_once("Test unit written to ").map(|(_, f)| f.trim()))
                .unwrap_or("no artifact named in the log");
            out.failure = Some(format!(
                "FAILED ({s}, after {:.0} s): {artifact}; see {}",
                started.elapsed().as_secs_f64(),
                log_path.display()
            ));
        }
        Err(e) => out.failure = Some(format!("cargo fuzz: {e}")),
    }
    out
}

/// Reads libFuzzer's final `DONE` line and `-print_final_stats` lines.
fn read_stats(log: &str, out: &mut Outcome) {
    let field = |line: &str, name: &str| -> Option<String> {
        let mut words = line.split_whitespace();
        words.find(|w| *w == name)?;
        words.next().map(str::to_owned)
    };
    let last = log
        .lines()
        .rev()
        .find(|l| l.starts_with('#') && l.contains("cov:"));
    if let Some(line) = last {
        out.cov = field(line, "cov:").unwrap_or_else(|| "-".to_owned());
        out.ft = field(line, "ft:").unwrap_or_else(|| "-".to_owned());
    }
    for line in log.lines() {
        let Some((key, value)) = line.strip_prefix("stat::").and_then(|l| l.split_once(':')) else {
            continue;
        };
        let value = value.trim().to_owned();
        match key {
            "number_of_executed_units" => out.execs = value,
            "average_exec_per_sec" => out.exec_per_sec = value,
            "new_units_added" => out.new_units = value,
            "peak_rss_mb" => out.rss_mb = value,
            _ => {}
        }
    }
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |d| d.filter_map(Result::ok).count())
}

/// One target's stable replay: the seeds, then random inputs for `seconds`.
fn stable_run(root: &Path, target: &'static str, seconds: u64) -> Outcome {
    let mut out = Outcome::new(target);
    out.seconds = seconds.to_string();
    out.corpus = count_files(&root.join("fuzz/corpus").join(target)).to_string();
    let tests = format!("{target}_");
    eprintln!(
        "\n==> fuzz {target} (stable fallback): cargo test -p lookout-testkit --test fuzz_corpus {tests}"
    );
    let status = Command::new("cargo")
        .args([
            "test",
            "--locked",
            "-p",
            "lookout-testkit",
            "--test",
            "fuzz_corpus",
            "--",
            &tests,
            "--nocapture",
        ])
        .env("LOOKOUT_FUZZ_SECONDS", seconds.to_string())
        .current_dir(root)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            out.failure = Some(format!(
                "FAILED ({s}); the input is in target/fuzz-stable/{target}/"
            ));
        }
        Err(e) => out.failure = Some(format!("cargo test: {e}")),
    }
    out
}
