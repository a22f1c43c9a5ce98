//! CI's disk: the build output that a step leaves and no later step reads,
//! removed once the step passed (only when `CI` is set; a developer's tree
//! keeps its caches).
//!
//! A CI run once ran out of disk in its last step with 3.0 GiB free before
//! it (the CI machine's disk is not ours to size): the test executables,
//! cargo-fuzz's sanitizer build (`fuzz/target`) and cargo-semver-checks'
//! rustdoc builds (`target/semver-checks`) then all sat on it at once. A
//! clean-clone run of `6fba906` freed 3.2, 1.5 and 3.6 GiB of them (and
//! 0.5 of the MSRV build). Each is rebuilt by cargo when a later run needs
//! it again.

use std::path::Path;

use crate::process::target_dir;

/// What a step's success lets CI remove.
#[derive(Clone, Copy, Debug)]
pub enum Discard {
    /// The test and bench executables in `target/debug/deps` (files with
    /// no extension and an executable bit), but xtask's own: the steps
    /// after the last `cargo test` build libraries, docs and packages only.
    TestExecutables,
    /// `fuzz/target`: cargo-fuzz's sanitizer build (the grown corpus and
    /// the logs are under `target/`, and stay).
    FuzzBuild,
    /// A folder under the target directory (`semver-checks`, `msrv`).
    TargetDir(&'static str),
}

/// Removes what `d` names; returns the bytes freed (a figure for the log).
pub fn discard(root: &Path, d: Discard) -> Result<u64, String> {
    match d {
        Discard::TestExecutables => test_executables(&target_dir(root).join("debug/deps")),
        Discard::FuzzBuild => remove_dir(&root.join("fuzz/target")),
        Discard::TargetDir(name) => remove_dir(&target_dir(root).join(name)),
    }
}

/// [`discard`], said on stderr with what it freed; a failure is said too but
/// fails nothing (the disk is a resource, not a check).
pub fn discard_loudly(root: &Path, d: Discard) {
    match discard(root, d) {
        #[allow(clippy::cast_precision_loss)] // a figure to read
        Ok(bytes) => eprintln!(
            "==> freed {:.2} GiB: {d:?} (no later step reads it)",
            bytes as f64 / f64::from(1u32 << 30)
        ),
        Err(e) => eprintln!("==> could not free {d:?}: {e}"),
    }
}

fn remove_dir(dir: &Path) -> Result<u64, String> {
    let bytes = size(dir);
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}

fn test_executables(deps: &Path) -> Result<u64, String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let entries = match std::fs::read_dir(deps) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("{}: {e}", deps.display())),
    };
    let mut freed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // `NAME-HASH`: libraries end in .rlib/.rmeta/.so, dep-info in .d.
        if name.contains('.') || name.starts_with("xtask-") {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            continue;
        }
        std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        // A hard link cargo made beside it (`target/debug/lookout`) keeps
        // the blocks: count only the last name.
        if meta.nlink() == 1 {
            freed += meta.len();
        }
    }
    Ok(freed)
}

/// The bytes of the files under `dir` (0 when it is missing).
fn size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test's unwrap is its assertion
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn only_test_executables_go() {
        let deps = std::env::temp_dir().join(format!("xtask-discard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&deps);
        std::fs::create_dir_all(&deps).unwrap();
        let write = |name: &str, mode: u32| {
            let p = deps.join(name);
            std::fs::write(&p, b"12345").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("k8s_scale-8306ca3af0df130c", 0o755);
        write("libserde-1a2b.rlib", 0o644);
        write("libserde_derive-1a2b.so", 0o755);
        write("lookout-1a2b.d", 0o644);
        write("xtask-1a2b", 0o755);
        write("notes-1a2b", 0o644);
        std::fs::create_dir(deps.join("dir-1a2b")).unwrap();
        let freed = test_executables(&deps).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&deps)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        std::fs::remove_dir_all(&deps).unwrap();
        assert_eq!(freed, 5);
        assert_eq!(
            left,
            [
                "dir-1a2b",
                "libserde-1a2b.rlib",
                "libserde_derive-1a2b.so",
                "lookout-1a2b.d",
                "notes-1a2b",
                "xtask-1a2b"
            ]
        );
    }
}
