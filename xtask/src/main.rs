//! Project automation, run as `cargo xtask COMMAND` (alias in `.cargo/config.toml`).
//!
//! ```text
//! cargo xtask bench [--smoke]                      the full benches (core, resync, fan-out, firehose, k8s churn, latency)
//! cargo xtask ci                                   the whole CI pipeline (.ci/run)
//! cargo xtask demo                                 lookout docker through a container's life and a dockerd restart
//! cargo xtask engines up   [docker|podman|swarm|k8s|all]...
//! cargo xtask engines down [docker|podman|swarm|k8s|all]...
//! cargo xtask engines status
//! cargo xtask engines env                          `export` lines for a shell
//! cargo xtask fuzz [--seconds N] [TARGET]...       the decoders' fuzz targets (libFuzzer; stable fallback)
//! cargo xtask image                                the container image lookout:latest in the local dockerd (deploy/image)
//! cargo xtask release [--dry-run] [CRATE]...      the release plan, semver and MSRV checks, packages, downstream fixture; publishes without --dry-run
//! cargo xtask schemathesis                         schemathesis against `lookout docker --serve` and its OpenAPI document
//! cargo xtask soak [--minutes N]                   dial/drop, reconnects, a paused consumer; resources flat
//! cargo xtask structure                            no import circle between files, no library file over 500 lines
//! ```
//!
//! Each command is a module with `pub fn run(args: &[String]) -> Result<(), String>`;
//! a new one is a `mod` line and a `match` arm below.

// A command-line tool: it talks on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

mod bench;
mod ci;
mod demo;
mod discard;
mod engines_cmd;
mod fuzz;
mod image;
mod process;
mod release;
mod schemathesis;
mod soak;
mod structure;

// The engine control shared with the end-to-end tests (std-only).
use lookout_engines as engines;

const USAGE: &str = "\
usage: cargo xtask COMMAND

commands:
  bench [--smoke]                      the full benches and their tables (machine and load noted)
  ci                                   fmt, clippy, structure, deny, engines up all, image, test, build bins, schemathesis, bench smoke, soak, fuzz, doc, release --dry-run
  demo                                 watch a demo container through its life and a dockerd restart
  engines up   [ENGINE]...             start engines (docker, docker2, docker-tls, podman, sshd, swarm, k8s, etcd, chromium, nginx, all; default all)
  engines down [ENGINE]...             stop engines (default all)
  engines status                       which engines answer
  engines env                          the test environment as `export` lines
  fuzz [--seconds N] [--stable] [TARGET]...
                                       the decoders' fuzz targets, N s each (default 150)
  image                                the container image lookout:latest and lookout:VERSION in the
                                       local dockerd: a static (musl) binary on scratch (deploy/image)
  release [--dry-run] [--allow-dirty] [--no-engines] [CRATE]...
                                       the release plan (changelogs, versions.toml), cargo-semver-checks,
                                       MSRV, packages, the downstream fixture; publishes without --dry-run
  schemathesis                         schemathesis (pinned, in target/schemathesis) against a running
                                       `lookout docker --serve` and its /openapi.json, every check
  soak [--minutes N]                   the soak test: RSS, fds, tasks flat over N minutes (default 10)
  structure                            no import circle between a crate's files, no library file over 500 lines of code
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    let result = match args.first().map(String::as_str) {
        Some("bench") => bench::run(rest),
        Some("ci") => ci::run(rest),
        Some("demo") => demo::run(),
        Some("engines") => engines_cmd::run(rest),
        Some("fuzz") => fuzz::run(rest),
        Some("image") => image::run(rest),
        Some("release") => release::run(rest),
        Some("schemathesis") => schemathesis::run(rest),
        Some("soak") => soak::run(rest),
        Some("structure") => structure::run(rest),
        Some("help" | "-h" | "--help") => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command {other:?}\n\n{USAGE}")),
        None => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
