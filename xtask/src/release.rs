//! `cargo xtask release [--dry-run] [--allow-dirty] [--no-engines] [CRATE]...`: release the
//! published crates that changed since their last release (or the ones
//! named), each on its own version.
//!
//! Both modes take the same steps:
//! 1. the plan (`plan.rs`): for each published crate in dependency order,
//!    its last release (`release/versions.toml`), what changed since, its
//!    changelog, and so its next version and why; printed as a table;
//! 2. cargo-semver-checks against each changed library's last release
//!    (`semver.rs`, installed when missing);
//! 3. MSRV: no normal or build dependency in `Cargo.lock` declares a
//!    `rust-version` above its crate's, and every published crate builds
//!    with that Rust itself when rustup can install it (`msrv.rs`);
//! 4. `cargo package` of every published crate, with each `.crate`'s size and
//!    no test data, fuzz corpus or engine bed in it (`package.rs`);
//! 5. the downstream fixture built from the packaged files, its trees
//!    checked, run against the real engines (`downstream.rs`; skipped with
//!    `--no-engines`, said loudly);
//! 6. `cargo install` of the packaged `lookout-cli`, offline, and its
//!    `lookout --version` naming the packaged commit (`install.rs`).
//!
//! `--dry-run` (what CI runs) stops there. The real mode, on a clean tree,
//! then writes each released crate's version (its manifest, the workspace's
//! requirement on it, the fixture's), moves its changelog's Unreleased
//! entries under the new version, takes the steps above again on the new
//! versions, commits, runs `cargo publish` in dependency order, tags each
//! `CRATE-vVERSION`, and records the new baseline in `release/versions.toml`
//! (a second commit). Publishing needs the network and a crates.io token,
//! which this machine has not: only the dry run runs here.

mod baseline;
mod changelog;
mod downstream;
mod install;
mod msrv;
mod package;
mod plan;
mod semver;
mod version;
mod workspace;
mod write;

use std::path::Path;
use std::time::Instant;

use crate::engines;

const USAGE: &str = "usage: cargo xtask release [--dry-run] [--allow-dirty] [--no-engines] \
     [--discard-builds] [CRATE]...

  --dry-run         every check and the packages, nothing written or published (CI)
  --allow-dirty     package a tree with uncommitted changes (dry run only)
  --no-engines      build and check the downstream fixture without running it
  --discard-builds  remove cargo-semver-checks' and the MSRV check's builds
                    once each passed (CI's disk; rebuilt when needed again)";

pub fn run(args: &[String]) -> Result<(), String> {
    let mut dry_run = false;
    let mut engines_up = true;
    let mut allow_dirty = false;
    let mut discard_builds = false;
    let mut only = Vec::new();
    for a in args {
        match a.as_str() {
            "--dry-run" => dry_run = true,
            "--no-engines" => engines_up = false,
            "--allow-dirty" => allow_dirty = true,
            "--discard-builds" => discard_builds = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            s if s.starts_with('-') => return Err(format!("unknown flag {s:?}\n{USAGE}")),
            s => only.push(s.to_owned()),
        }
    }
    let root = engines::workspace_root();
    if !dry_run {
        allow_dirty = false;
        let dirty = plan::git(&root, &["status", "--porcelain"])?;
        if !dirty.trim().is_empty() {
            return Err("a release starts from a clean tree (git status is not empty)".to_owned());
        }
    }
    let flags = Flags {
        engines_up,
        allow_dirty,
        discard_builds,
    };
    let releases = check(&root, &only, flags, false)?;
    if dry_run {
        eprintln!("==> release --dry-run: every check passed; nothing was written or published");
        return Ok(());
    }
    if releases.is_empty() {
        eprintln!("==> release: nothing to release");
        return Ok(());
    }
    write::apply(&root, &releases)?;
    // The same checks on the versions just written (the baseline is still
    // the previous release, so cargo-semver-checks sees the real steps).
    let flags = Flags {
        allow_dirty: true,
        ..flags
    };
    check(&root, &only, flags, true)?;
    write::publish(&root, &releases)
}

/// How the checks run (the command line's flags).
#[derive(Clone, Copy, Debug)]
#[allow(clippy::struct_excessive_bools)] // three independent switches
struct Flags {
    engines_up: bool,
    allow_dirty: bool,
    discard_builds: bool,
}

/// The dry run's steps; returns the crates to release, in order.
fn check(
    root: &Path,
    only: &[String],
    flags: Flags,
    written: bool,
) -> Result<Vec<write::Release>, String> {
    let Flags {
        engines_up,
        allow_dirty,
        discard_builds,
    } = flags;
    let discard = |d| {
        if discard_builds {
            crate::discard::discard_loudly(root, d);
        }
    };
    let t = Instant::now();
    let meta = workspace::read(root, &[])?;
    for name in only {
        if !meta.member(name).is_some_and(|p| p.publish) {
            return Err(format!(
                "{name:?} is not a published crate of the workspace"
            ));
        }
    }
    let baseline = baseline::Baseline::read(root)?;
    let (plan, errors) = plan::make(root, &meta, &baseline, only)?;
    println!("{}", plan::render(&plan));
    if !errors.is_empty() {
        return Err(format!(
            "the release plan fails:\n  {}",
            errors.join("\n  ")
        ));
    }
    if baseline.crates.is_empty() {
        eprintln!(
            "==> no baseline in {}: nothing to check semver against (first release)",
            baseline::FILE
        );
    }
    let checked = semver::check(root, &plan)?;
    eprintln!(
        "==> cargo-semver-checks: {}",
        if checked.is_empty() {
            "no crate changed since its last release".to_owned()
        } else {
            format!("{} within their versions", checked.join(", "))
        }
    );
    discard(crate::discard::Discard::TargetDir("semver-checks"));
    let (n, bad) = msrv::check(&meta, &[])?;
    if !bad.is_empty() {
        return Err(format!(
            "a dependency needs a newer Rust than the crate declares:\n  {}",
            bad.join("\n  ")
        ));
    }
    eprintln!("==> MSRV: {n} (crate, dependency) pairs within each crate's rust-version");
    eprintln!("==> MSRV: {}", msrv::build_with_toolchain(root, &meta)?);
    discard(crate::discard::Discard::TargetDir("msrv"));
    let packaged = package::package(root, &meta, allow_dirty)?;
    for p in &packaged {
        println!(
            "package {:<18} {:>8} {:>4}.{} KiB  {:>3} files",
            p.name,
            p.version,
            p.bytes / 1024,
            p.bytes % 1024 * 10 / 1024,
            p.files
        );
    }
    if !engines_up {
        eprintln!(
            "==> --no-engines: the downstream fixture is built and checked but NOT run against the engines"
        );
    }
    downstream::check(root, &packaged, engines_up, written)?;
    install::check(root, &packaged)?;
    eprintln!("==> release checks took {:.1?}", t.elapsed());
    Ok(plan
        .into_iter()
        .filter_map(|e| {
            Some(write::Release {
                new: e.new?,
                old: e.old.as_ref().map(|(v, _)| *v),
                dep_breaking: e.dep_breaking,
                name: e.name,
                dir: e.dir,
            })
        })
        .collect())
}
