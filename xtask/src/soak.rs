//! `cargo xtask soak [--minutes N]`: the soak test of issue #7, preceded by the
//! machine and its load (its figures are wall-clock and memory of one
//! process, and shift with whatever else runs).
//!
//! It runs `cargo bench --locked -p lookout-e2e --bench soak -- --minutes N`
//! (default N = 10: the 10k dial/drop cycles and 1k forced reconnects,
//! and a consumer paused for 2 minutes); the bench prints RSS, open fds and
//! tokio alive tasks before and after and exits non-zero on growth beyond its
//! tolerances (see `tests/benches/soak.rs`). The wall time is
//! about N minutes plus the build.

use std::process::{Command, Stdio};
use std::time::Instant;

use crate::bench::{load, machine};
use crate::engines;

/// The default length, in minutes.
const DEFAULT_MINUTES: u64 = 10;

pub fn run(args: &[String]) -> Result<(), String> {
    let minutes = match args {
        [] => DEFAULT_MINUTES,
        [flag, n] if flag == "--minutes" => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| format!("--minutes takes a whole number ≥ 1 (got {n:?})"))?,
        _ => {
            return Err(format!(
                "`cargo xtask soak` takes only `--minutes N` (got {args:?})"
            ));
        }
    };
    let root = engines::workspace_root();
    println!("machine: {}", machine());
    println!("load before: {}", load());
    let n = minutes.to_string();
    let cargo_args = [
        "bench",
        "--locked",
        "-p",
        "lookout-e2e",
        "--bench",
        "soak",
        "--",
        "--minutes",
        n.as_str(),
    ];
    eprintln!("==> cargo {}", cargo_args.join(" "));
    let t = Instant::now();
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(cargo_args)
        .current_dir(&root)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    println!(
        "(soak: {:.1?} wall, build included; load after: {})",
        t.elapsed(),
        load()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo {}` exited with {status}",
            cargo_args.join(" ")
        ))
    }
}
