//! `cargo package` of every published crate (cargo packages them in
//! dependency order and builds each from its `.crate` file against the
//! others through a local registry), then what each `.crate` holds: its
//! size, and no test data, fuzz corpus or engine bed in it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::workspace::Metadata;

/// Paths no published crate may hold, matched on any path component: test
/// data, test certificates and keys, fuzz corpora, engine beds, and the
/// tests and benches themselves (they need the workspace: its engines, its
/// test crates), which each crate's `include` leaves out.
const FORBIDDEN: &[&str] = &[
    "tests",
    "benches",
    "certs",
    "corpus",
    "fuzz",
    "testdata",
    "fixtures",
    "engines",
    ".ci",
    "target",
    "proptest-regressions",
];
/// File names no published crate may hold (keys and certificates, proptest's
/// regression files).
const FORBIDDEN_SUFFIXES: &[&str] = &[".pem", ".key", ".crt", ".proptest-regressions"];
/// The largest file a package may hold (a data file crept in).
const MAX_FILE: u64 = 256 * 1024;

#[derive(Debug)]
pub struct Packaged {
    pub name: String,
    pub version: String,
    pub file: PathBuf,
    pub bytes: u64,
    pub files: usize,
}

/// `cargo package --workspace` verifies each crate against the others
/// through a local registry whose sources cargo extracts under
/// `~/.cargo/registry/src/`, and an extraction of the same name and version
/// is reused by later runs even when our sources changed since. Our crates
/// are not on crates.io, so every `lookout-*` extraction there is such a
/// leftover: remove them before packaging.
pub fn forget_packaged_sources() {
    let Some(home) = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
    else {
        return;
    };
    let Ok(registries) = std::fs::read_dir(home.join("registry/src")) else {
        return;
    };
    for registry in registries.flatten() {
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for krate in crates.flatten() {
            if krate.file_name().to_string_lossy().starts_with("lookout-") {
                eprintln!(
                    "==> removing the stale extraction {}",
                    krate.path().display()
                );
                let _ = std::fs::remove_dir_all(krate.path());
            }
        }
    }
}

/// Package every published member; `allow_dirty` for a developer's tree.
pub fn package(root: &Path, meta: &Metadata, allow_dirty: bool) -> Result<Vec<Packaged>, String> {
    forget_packaged_sources();
    // Cargo verifies each package in the workspace's target directory and
    // takes a registry crate for immutable: a `lookout-*` built there from
    // an earlier package of the same version (other sources) would be
    // reused as it was. Forget every lookout unit's fingerprint (the
    // workspace's own ones rebuild in seconds), and the earlier packages.
    let target = target_dir(root);
    let _ = std::fs::remove_dir_all(target.join("package"));
    for profile in ["debug", "release"] {
        let Ok(units) = std::fs::read_dir(target.join(profile).join(".fingerprint")) else {
            continue;
        };
        for unit in units.flatten() {
            if unit.file_name().to_string_lossy().starts_with("lookout-") {
                let _ = std::fs::remove_dir_all(unit.path());
            }
        }
    }
    let mut args: Vec<String> = ["package", "--workspace", "--locked"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for p in meta.packages.iter().filter(|p| !p.publish) {
        args.push("--exclude".to_owned());
        args.push(p.name.clone());
    }
    if allow_dirty {
        args.push("--allow-dirty".to_owned());
    }
    let mut cmd = Command::new(crate::process::cargo_bin());
    cmd.args(&args).current_dir(root).stdin(Stdio::null());
    let status = crate::process::run_inherited(&mut cmd, Duration::from_secs(40 * 60))?;
    if !status.success() {
        return Err(format!("`cargo {}` exited with {status}", args.join(" ")));
    }
    let dir = target_dir(root).join("package");
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for p in meta.packages.iter().filter(|p| p.publish) {
        let file = dir.join(format!("{}-{}.crate", p.name, p.version));
        let bytes = std::fs::metadata(&file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .len();
        let listing = Command::new("tar")
            .args(["tvzf"])
            .arg(&file)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("tar: {e}"))?;
        if !listing.status.success() {
            return Err(format!("tar cannot list {}", file.display()));
        }
        let text = String::from_utf8_lossy(&listing.stdout);
        let mut files = 0;
        for line in text.lines() {
            // `-rw-r--r-- 0/0   1234 1970-01-01 00:00 name-0.1.0/src/lib.rs`
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (Some(size), Some(path)) = (cols.get(2), cols.last()) else {
                continue;
            };
            files += 1;
            let inner = path.split_once('/').map_or(*path, |(_, rest)| rest);
            if let Some(c) = inner.split('/').find(|c| FORBIDDEN.contains(c)) {
                bad.push(format!("{}: {inner} ({c}/ is not for publishing)", p.name));
            } else if FORBIDDEN_SUFFIXES.iter().any(|s| inner.ends_with(s)) {
                bad.push(format!("{}: {inner} is not for publishing", p.name));
            }
            if size.parse::<u64>().is_ok_and(|s| s > MAX_FILE) {
                bad.push(format!("{}: {inner} is {size} bytes", p.name));
            }
        }
        out.push(Packaged {
            name: p.name.clone(),
            version: p.version.clone(),
            file,
            bytes,
            files,
        });
    }
    if !bad.is_empty() {
        return Err(format!(
            "the packages hold what they should not:\n  {}",
            bad.join("\n  ")
        ));
    }
    Ok(out)
}

pub use crate::process::target_dir;
