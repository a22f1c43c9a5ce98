//! The release plan: for each published crate, in dependency order, its last
//! release, what changed since (its own sources, a third-party dependency's
//! requirement, the workspace's package settings, a lookout dependency going
//! to a breaking version), its changelog, and so the version it goes to and why.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::baseline::Baseline;
use super::changelog;
use super::version::Version;
use super::workspace::Metadata;

#[derive(Debug)]
pub struct Entry {
    pub name: String,
    pub dir: std::path::PathBuf,
    /// The last release and its commit.
    pub old: Option<(Version, String)>,
    /// The version it is released as, when it is.
    pub new: Option<Version>,
    /// Checked by cargo-semver-checks against `old`'s commit.
    pub semver: bool,
    /// A lookout dependency goes to a breaking version: its requirement
    /// changes, and so does this crate's API.
    pub dep_breaking: Vec<String>,
    pub why: String,
}

impl Entry {
    pub fn breaking(&self) -> bool {
        matches!((&self.old, self.new), (Some((old, _)), Some(new)) if old.breaks_to(new))
    }
}

pub fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The crate's released files (sources, manifest, readme, build script)
/// that differ between `commit` and the working tree.
fn changed_files(root: &Path, dir: &Path, commit: &str) -> Result<Vec<String>, String> {
    let rel = dir
        .strip_prefix(root)
        .map_err(|_| format!("{} is outside the workspace", dir.display()))?;
    let paths: Vec<String> = ["src", "Cargo.toml", "README.md", "build.rs"]
        .iter()
        .map(|p| rel.join(p).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["diff", "--name-only", commit, "--"];
    args.extend(paths.iter().map(String::as_str));
    Ok(git(root, &args)?.lines().map(str::to_owned).collect())
}

/// What changed in the root manifest since `commit`: whether
/// `[workspace.package]` did, and which `[workspace.dependencies]` entries
/// (lookout's own excepted: their versions are the releases' own business).
fn manifest_changes(root: &Path, commit: &str) -> Result<(bool, Vec<String>), String> {
    let parse = |text: &str| -> Result<toml::Table, String> {
        toml::from_str(text).map_err(|e| format!("Cargo.toml: {e}"))
    };
    let then = parse(&git(root, &["show", &format!("{commit}:Cargo.toml")])?)?;
    let now = parse(
        &std::fs::read_to_string(root.join("Cargo.toml"))
            .map_err(|e| format!("Cargo.toml: {e}"))?,
    )?;
    let section = |t: &toml::Table, key: &str| -> toml::Table {
        t.get("workspace")
            .and_then(|w| w.get(key))
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let package_changed = section(&then, "package") != section(&now, "package");
    let (d0, d1) = (
        section(&then, "dependencies"),
        section(&now, "dependencies"),
    );
    let mut deps: Vec<String> = d0
        .keys()
        .chain(d1.keys())
        .filter(|k| !k.starts_with("lookout-") && d0.get(*k) != d1.get(*k))
        .cloned()
        .collect();
    deps.dedup();
    Ok((package_changed, deps))
}

// One decision per crate, read top to bottom: clearest as one function.
/// The plan for every published crate; `only` limits the releases to the
/// crates it names (the checks still cover all). Errors are collected, so
/// that one run names them all.
#[allow(clippy::too_many_lines)]
pub fn make(
    root: &Path,
    meta: &Metadata,
    baseline: &Baseline,
    only: &[String],
) -> Result<(Vec<Entry>, Vec<String>), String> {
    let mut errors = Vec::new();
    let mut plan: Vec<Entry> = Vec::new();
    let mut manifest_cache: BTreeMap<String, (bool, Vec<String>)> = BTreeMap::new();
    for p in meta.publish_order()? {
        let current = p.version()?;
        let log_path = p.dir.join("CHANGELOG.md");
        let log = match std::fs::read_to_string(&log_path) {
            Ok(log) => log,
            Err(e) => {
                errors.push(format!("{}: {}: {e}", p.name, log_path.display()));
                continue;
            }
        };
        if let Err(e) = changelog::check(&log) {
            errors.push(format!("{}: {}: {e}", p.name, log_path.display()));
        }
        let entries = changelog::unreleased_changes(&log).unwrap_or(0);
        let mut e = Entry {
            name: p.name.clone(),
            dir: p.dir.clone(),
            old: None,
            new: None,
            semver: false,
            dep_breaking: Vec::new(),
            why: String::new(),
        };
        let Some((old, commit)) = baseline.get(&p.name) else {
            if changelog::has_section(&log, current) || entries > 0 {
                e.new = Some(current);
                "first release".clone_into(&mut e.why);
            } else {
                errors.push(format!(
                    "{}: first release of {current}, but its changelog has no `## [{current}]` section",
                    p.name
                ));
            }
            plan.push(e);
            continue;
        };
        if git(root, &["cat-file", "-e", &format!("{commit}^{{commit}}")]).is_err() {
            errors.push(format!(
                "{}: its last release's commit {commit} is not in this clone (a shallow clone? \
                 `git fetch --unshallow`)",
                p.name
            ));
            continue;
        }
        e.old = Some((old, commit.to_owned()));
        if !manifest_cache.contains_key(commit) {
            manifest_cache.insert(commit.to_owned(), manifest_changes(root, commit)?);
        }
        let (package_changed, changed_deps) = &manifest_cache[commit];
        let own = changed_files(root, &p.dir, commit)?;
        let deps: Vec<&String> = p
            .deps
            .iter()
            .map(|(n, _, _)| n)
            .filter(|n| changed_deps.contains(n))
            .collect();
        e.dep_breaking = plan
            .iter()
            .filter(|d| d.breaking() && p.deps.iter().any(|(n, _, _)| *n == d.name))
            .map(|d| {
                format!(
                    "{} {}",
                    d.name,
                    d.new.map(|v| v.to_string()).unwrap_or_default()
                )
            })
            .collect();
        let mut what = Vec::new();
        if !own.is_empty() {
            what.push(format!("{} file(s) of its own", own.len()));
        }
        if !deps.is_empty() {
            what.push(format!("the requirement on {}", join(&deps)));
        }
        if *package_changed {
            what.push("[workspace.package]".to_owned());
        }
        if !e.dep_breaking.is_empty() {
            what.push(format!("its dependency {}", e.dep_breaking.join(", ")));
        }
        let short = &commit[..commit.len().min(10)];
        if what.is_empty() {
            if current != old {
                errors.push(format!(
                    "{}: version {current}, but nothing released changed since {old} ({short})",
                    p.name
                ));
            }
            e.why = format!("unchanged since {old} ({short})");
            plan.push(e);
            continue;
        }
        e.semver = p.has_lib;
        let changed = format!("changed since {old} ({short}): {}", what.join(", "));
        let named = only.is_empty() || only.contains(&p.name);
        if current != old {
            if !old.may_precede(current) {
                errors.push(format!("{}: {old} cannot be followed by {current}", p.name));
            }
            if entries == 0 {
                errors.push(format!(
                    "{}: version bumped to {current} with nothing under `## [Unreleased]` in its changelog",
                    p.name
                ));
            }
            e.new = named.then_some(current);
            e.why = format!(
                "{changed}; version bumped to {current} ({}); {entries} changelog entr{}",
                if old.breaks_to(current) {
                    "breaking"
                } else {
                    "compatible"
                },
                if entries == 1 { "y" } else { "ies" }
            );
        } else if !e.dep_breaking.is_empty() {
            let new = current.next_breaking();
            e.new = named.then_some(new);
            e.why = format!("{changed}; a public dependency breaks, so does it: {new}");
        } else if entries > 0 {
            let new = current.next_addition();
            e.new = named.then_some(new);
            e.why = format!(
                "{changed}; {entries} changelog entr{} under Unreleased, compatible: {new}",
                if entries == 1 { "y" } else { "ies" }
            );
        } else {
            e.why = format!(
                "{changed}; nothing under Unreleased, so not re-released (an entry there releases it)"
            );
        }
        if !named && e.new.is_none() {
            e.why.push_str(" (not named: left for a later release)");
        }
        plan.push(e);
    }
    Ok((plan, errors))
}

fn join(names: &[&String]) -> String {
    names
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan as the table `cargo xtask release` prints.
pub fn render(plan: &[Entry]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<18} {:>9}    {:<9} why",
        "crate", "released", "next"
    );
    for e in plan {
        let old = e
            .old
            .as_ref()
            .map_or_else(|| "-".to_owned(), |(v, _)| v.to_string());
        let new = e.new.map_or_else(|| "-".to_owned(), |v| v.to_string());
        let _ = writeln!(out, "{:<18} {old:>9} -> {new:<9} {}", e.name, e.why);
    }
    out
}
