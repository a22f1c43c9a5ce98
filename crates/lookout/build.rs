//! Tells `lookout --version` the git revision it is built from, as
//! `LOOKOUT_REVISION` (12 hex digits, or `unknown`):
//!
//! 1. `LOOKOUT_GIT_REVISION` from the environment, when a build has no git
//!    checkout to ask (an image build from a copied tree);
//! 2. the packaged crate's `.cargo_vcs_info.json` (`cargo package` writes the
//!    commit it packaged, and whether the tree was dirty): `cargo install
//!    lookout-cli` builds from there;
//! 3. `git rev-parse HEAD` in a checkout (rebuilt when HEAD or its branch
//!    moves; uncommitted edits are not detected: a build script that watched
//!    the index would rerun on every `git status`).

use std::path::{Path, PathBuf};
use std::process::Command;

const ENV_OVERRIDE: &str = "LOOKOUT_GIT_REVISION";
const SHORT: usize = 12;

fn main() {
    println!("cargo:rerun-if-env-changed={ENV_OVERRIDE}");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let vcs_info = dir.join(".cargo_vcs_info.json");
    let revision = std::env::var(ENV_OVERRIDE)
        .ok()
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
        .or_else(|| packaged(&vcs_info))
        .or_else(|| checkout(&dir))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LOOKOUT_REVISION={revision}");
}

/// The commit `cargo package` recorded (`"sha1": "…"`, and `"dirty": true`
/// when the tree had uncommitted changes).
fn packaged(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    println!("cargo:rerun-if-changed={}", path.display());
    let sha = json_string(&text, "sha1")?;
    let short: String = sha.chars().take(SHORT).collect();
    let dirty = text
        .split_once("\"dirty\"")
        .is_some_and(|(_, rest)| rest.trim_start_matches([' ', ':']).starts_with("true"));
    Some(if dirty {
        format!("{short}-dirty")
    } else {
        short
    })
}

/// The string value of `"key": "…"` in a small JSON file (no serde in a
/// build script for one field).
fn json_string(text: &str, key: &str) -> Option<String> {
    let (_, rest) = text.split_once(&format!("\"{key}\""))?;
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let value = rest.split_once('"')?.0;
    value
        .chars()
        .all(|c| c.is_ascii_hexdigit())
        .then(|| value.to_owned())
}

/// `git rev-parse HEAD` of the checkout holding `dir`, and the files whose
/// change means a new revision.
fn checkout(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let head = git(&["rev-parse", &format!("--short={SHORT}"), "HEAD"])?;
    let abs = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { dir.join(p) }
    };
    let mut watch = Vec::new();
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]).map(abs) {
        watch.push(git_dir.join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]).map(abs) {
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(common.join(branch));
        }
        watch.push(common.join("packed-refs"));
    }
    // A path that does not exist would rerun the script on every build.
    for path in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(head)
}
