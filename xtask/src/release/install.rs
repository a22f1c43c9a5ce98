//! `cargo install lookout-cli` as a user does, from the packaged files: the
//! unpacked `lookout-cli` package installed with `cargo install --path
//! --offline` (every other crate from the registry cache, the lookout crates
//! from their packages through a `[patch.crates-io]` naming them all), then
//! the installed `lookout --version` must say the package's version and the
//! commit `cargo package` recorded in it (`.cargo_vcs_info.json`).
//!
//! Built with `--debug`: this proves the package installs and says what it
//! is; the dev profile shares the third-party artifacts the downstream
//! fixture built in the same target directory (a release build would add
//! minutes of compiling to every CI run for nothing more).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::downstream::{unpacked, write_patch};
use super::package::{Packaged, target_dir};

const CLI: &str = "lookout-cli";

/// Installs the packaged `lookout-cli` (unpacked by the downstream check)
/// into `target/release-check/install` and checks its `--version`.
pub fn check(root: &Path, packaged: &[Packaged]) -> Result<(), String> {
    let t = Instant::now();
    let Some(cli) = packaged.iter().find(|p| p.name == CLI) else {
        return Err(format!("{CLI} was not packaged"));
    };
    let base = target_dir(root).join("release-check");
    let patch_file = write_patch(&base.join("patch-install.toml"), packaged.iter())?;
    let install_root = base.join("install");
    let _ = std::fs::remove_dir_all(&install_root);
    let source = unpacked(&base.join("crates"), cli);
    let status = Command::new(crate::process::cargo_bin())
        .arg("install")
        .arg("--path")
        .arg(&source)
        .arg("--root")
        .arg(&install_root)
        .args(["--offline", "--debug", "--no-track", "--config"])
        .arg(&patch_file)
        .env("CARGO_TARGET_DIR", target_dir(root))
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cargo install: {e}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo install --path {} --offline` failed",
            source.display()
        ));
    }
    let revision = packaged_revision(&source)?;
    let bin = install_root.join("bin").join("lookout");
    let out = Command::new(&bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let expected = format!("lookout {} (git {revision})", cli.version);
    if !out.status.success() || said != expected {
        return Err(format!(
            "the installed lookout says {said:?} ({}), not {expected:?}",
            out.status
        ));
    }
    eprintln!(
        "==> cargo install {CLI} from its package: `{said}` in {:.1?}",
        t.elapsed()
    );
    Ok(())
}

/// The commit the package recorded, as `lookout --version` shows it (12
/// digits, `-dirty` when the packaged tree was).
fn packaged_revision(source: &Path) -> Result<String, String> {
    let file = source.join(".cargo_vcs_info.json");
    let text = std::fs::read_to_string(&file).map_err(|e| {
        format!(
            "{}: {e} (cargo package records the commit only in a git checkout)",
            file.display()
        )
    })?;
    let info: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let sha = info["git"]["sha1"]
        .as_str()
        .ok_or_else(|| format!("{}: no git.sha1", file.display()))?;
    let short = sha
        .get(..12)
        .ok_or_else(|| format!("{}: short sha1", file.display()))?;
    Ok(if info["git"]["dirty"].as_bool() == Some(true) {
        format!("{short}-dirty")
    } else {
        short.to_owned()
    })
}
