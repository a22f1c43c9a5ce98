//! The real release's writes: each released crate's version (its manifest,
//! the workspace's requirement on it, the downstream fixture's), its
//! changelog, the commit, `cargo publish` in dependency order, the tags and
//! the new baseline. Only the dry run's checks run on this machine (no
//! network); the text edits are unit-tested here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::baseline::{Baseline, Released};
use super::changelog;
use super::downstream::DIR as FIXTURE;
use super::plan::git;
use super::version::Version;

#[derive(Debug)]
pub struct Release {
    pub name: String,
    pub dir: PathBuf,
    pub old: Option<Version>,
    pub new: Version,
    pub dep_breaking: Vec<String>,
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The manifest with `[package]`'s `version` set to `new`.
pub fn set_package_version(text: &str, new: Version) -> Result<String, String> {
    let mut section = String::new();
    let mut done = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            t.clone_into(&mut section);
        }
        if !done && section == "[package]" && t.starts_with("version") && t.contains('=') {
            if t.contains("workspace") {
                return Err("its version comes from the workspace, not its own".to_owned());
            }
            let _ = writeln!(out, "version = \"{new}\"");
            done = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if done {
        Ok(out)
    } else {
        Err("no `version = …` in [package]".to_owned())
    }
}

/// The manifest with the requirement on `name` (in any dependency table,
/// `name = "REQ"` or `name = { …, version = "REQ", … }`) set to `req`.
pub fn set_requirement(text: &str, name: &str, req: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let t = line.trim_start();
        let is_dep = t
            .strip_prefix(name)
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if is_dep {
            let (key, value) = line.split_once('=').unwrap_or((line, ""));
            let value = value.trim();
            if value.starts_with('"') {
                let _ = writeln!(out, "{key}= \"{req}\"");
                continue;
            }
            if let Some(at) = value.find("version = \"") {
                let start = at + "version = \"".len();
                if let Some(len) = value[start..].find('"') {
                    let _ = writeln!(
                        out,
                        "{key}= {}{req}{}",
                        &value[..start],
                        &value[start + len..]
                    );
                    continue;
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn today() -> Result<String, String> {
    let out = Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .map_err(|e| format!("date: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Write the new versions and changelogs (not committed yet).
pub fn apply(root: &Path, releases: &[Release]) -> Result<(), String> {
    let date = today()?;
    let root_manifest = root.join("Cargo.toml");
    let mut workspace = read(&root_manifest)?;
    let fixtures: Vec<PathBuf> = std::fs::read_dir(root.join(FIXTURE))
        .map_err(|e| format!("{FIXTURE}: {e}"))?
        .flatten()
        .map(|d| d.path().join("Cargo.toml"))
        .filter(|p| p.is_file())
        .collect();
    for r in releases {
        let manifest = r.dir.join("Cargo.toml");
        let text = set_package_version(&read(&manifest)?, r.new)
            .map_err(|e| format!("{}: {e}", manifest.display()))?;
        write(&manifest, &text)?;
        workspace = set_requirement(&workspace, &r.name, &r.new.to_string());
        if r.old.is_none_or(|old| old.breaks_to(r.new)) {
            for f in &fixtures {
                write(f, &set_requirement(&read(f)?, &r.name, &r.new.caret()))?;
            }
        }
        let log_path = r.dir.join("CHANGELOG.md");
        let mut log = read(&log_path)?;
        if !r.dep_breaking.is_empty() && changelog::unreleased_changes(&log)? == 0 {
            log = log.replacen(
                "## [Unreleased]\n",
                &format!(
                    "## [Unreleased]\n\n### Changed\n- Requires {} (a breaking release of a public dependency).\n",
                    r.dep_breaking.join(", ")
                ),
                1,
            );
        }
        let log = changelog::release(&log, &r.name, r.old, r.new, &date)?;
        write(&log_path, &log)?;
    }
    write(&root_manifest, &workspace)?;
    // Cargo.lock follows the members' new versions (nothing else moves).
    let status = Command::new(crate::process::cargo_bin())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !status.success() {
        return Err("cargo metadata could not update Cargo.lock".to_owned());
    }
    Ok(())
}

/// Commit, publish in order, tag, record the baseline.
pub fn publish(root: &Path, releases: &[Release]) -> Result<(), String> {
    let what: Vec<String> = releases
        .iter()
        .map(|r| format!("{} {}", r.name, r.new))
        .collect();
    git(
        root,
        &["commit", "-am", &format!("release: {}", what.join(", "))],
    )?;
    let commit = git(root, &["rev-parse", "HEAD"])?.trim().to_owned();
    for r in releases {
        let mut cmd = Command::new(crate::process::cargo_bin());
        cmd.args(["publish", "--locked", "-p", &r.name])
            .current_dir(root)
            .stdin(Stdio::null());
        let status = crate::process::run_inherited(&mut cmd, Duration::from_secs(30 * 60))?;
        if !status.success() {
            return Err(format!(
                "cargo publish -p {} exited with {status}; the crates before it are published, \
                 run `cargo xtask release` again for the rest",
                r.name
            ));
        }
        git(root, &["tag", &format!("{}-v{}", r.name, r.new), &commit])?;
    }
    let mut baseline = Baseline::read(root)?;
    for r in releases {
        baseline.crates.insert(
            r.name.clone(),
            Released {
                version: r.new.to_string(),
                commit: commit.clone(),
            },
        );
    }
    write(&root.join(super::baseline::FILE), &baseline.render())?;
    git(
        root,
        &[
            "commit",
            "-am",
            &format!("release: record {} as released", what.join(", ")),
        ],
    )?;
    eprintln!(
        "==> released {}; push the commits and the tags",
        what.join(", ")
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test's unwrap is its assertion
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn sets_the_package_version_only() {
        let m = "[package]\nname = \"lookout-core\"\nversion = \"0.1.0\"\n\n[dependencies]\nfoo = { version = \"1\" }\n";
        let out = set_package_version(m, v("0.2.0")).unwrap();
        assert!(out.contains("version = \"0.2.0\"\n\n[dependencies]\nfoo = { version = \"1\" }"));
        assert!(set_package_version("[package]\nversion.workspace = true\n", v("0.2.0")).is_err());
    }

    #[test]
    fn sets_a_requirement_in_either_shape() {
        let m = "[dependencies]\nlookout-core = { path = \"crates/core-stream\", version = \"0.1.0\" }\nlookout-core-extra = \"1\"\nlookout-docker = \"0.1\"\n";
        let out = set_requirement(m, "lookout-core", "0.2.0");
        assert!(
            out.contains("lookout-core = { path = \"crates/core-stream\", version = \"0.2.0\" }")
        );
        assert!(out.contains("lookout-core-extra = \"1\""));
        let out = set_requirement(&out, "lookout-docker", "0.2");
        assert!(out.contains("lookout-docker = \"0.2\""));
    }
}
