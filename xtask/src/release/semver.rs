//! cargo-semver-checks against each crate's last release: the baseline is a
//! commit of this repository (`--baseline-rev`), so it works offline and
//! without tags. The version in the crate's manifest says what the change
//! may be (the same version: no breaking change; 0.1 → 0.2: anything).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::plan::Entry;

/// The cargo-semver-checks CI installs when it is missing (pinned: its lints
/// change between releases; 0.51 needs Rust >= 1.93 to build), built without
/// LTO (`process::install_cargo_tool`).
pub const CRATE: &str = "cargo-semver-checks@0.51.0";

pub fn ensure_installed(root: &Path) -> Result<(), String> {
    crate::process::install_cargo_tool(root, "semver-checks", CRATE, Duration::from_secs(30 * 60))
}

/// Check every entry marked for it, one cargo-semver-checks run per
/// baseline commit. Returns the crates checked.
pub fn check(root: &Path, plan: &[Entry]) -> Result<Vec<String>, String> {
    let mut by_commit: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in plan.iter().filter(|e| e.semver) {
        if let Some((_, commit)) = &e.old {
            by_commit.entry(commit).or_default().push(&e.name);
        }
    }
    if by_commit.is_empty() {
        return Ok(Vec::new());
    }
    ensure_installed(root)?;
    let mut checked = Vec::new();
    for (commit, names) in by_commit {
        let mut args: Vec<String> = vec![
            "semver-checks".into(),
            "--baseline-rev".into(),
            commit.to_owned(),
        ];
        for n in &names {
            args.push("-p".into());
            args.push((*n).to_owned());
        }
        eprintln!("==> cargo {}", args.join(" "));
        let mut cmd = Command::new(crate::process::cargo_bin());
        cmd.args(&args).current_dir(root).stdin(Stdio::null());
        let status = crate::process::run_inherited(&mut cmd, Duration::from_secs(30 * 60))?;
        if !status.success() {
            return Err(format!(
                "cargo-semver-checks found a change the version does not allow in {} \
                 (against {commit}; see its report above): bump the version \
                 (0.x: the minor for a breaking change) and say it under \
                 `## [Unreleased]` in the changelog",
                names.join(", ")
            ));
        }
        checked.extend(names.iter().map(|n| (*n).to_owned()));
    }
    Ok(checked)
}
