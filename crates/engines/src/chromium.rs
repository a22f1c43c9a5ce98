//! Debian's headless Chromium, for the tests of `lookout --serve`'s page:
//! installed by `cargo xtask engines up chromium` (and `up all`), checked by
//! rendering a page, and started by each test that needs one
//! ([`chromium_command`]: headless, its own profile, the `DevTools` protocol on
//! loopback only).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::packages::ensure_debian;
use crate::process::{find_in_path, run_output};

const VERIFY_TIMEOUT: Duration = Duration::from_secs(60);

/// The Chromium binary (`chromium`, Debian's name), if installed.
pub fn chromium_binary() -> Option<PathBuf> {
    find_in_path("chromium").or_else(|| find_in_path("chromium-browser"))
}

/// Installs Chromium when missing (`apt-get install -y chromium`, as root
/// on Debian), then checks that it renders a page headless.
pub fn chromium_up() -> Result<(), String> {
    if chromium_binary().is_none() {
        ensure_debian(&["chromium"])?;
    }
    chromium_verify()
}

/// Renders a `data:` page headless and finds its text in the DOM dump.
pub fn chromium_verify() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("lookout-chromium-verify-{}", std::process::id()));
    let mut cmd = chromium_command(&dir)?;
    cmd.args(["--dump-dom", "data:text/html,<p id=ok>chromium-ok</p>"]);
    let out = run_output(&mut cmd, VERIFY_TIMEOUT);
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    if out.status.success() && out.stdout.contains("chromium-ok") {
        Ok(())
    } else {
        Err(format!(
            "chromium: a headless render failed ({}): stdout {:?}, stderr {:?}",
            out.status,
            out.stdout.chars().take(400).collect::<String>(),
            out.stderr.chars().take(2000).collect::<String>()
        ))
    }
}

/// `chromium --headless` with a profile of its own in `profile` (made
/// here), no first-run work, no sandbox when run as root (Chromium refuses
/// root otherwise), and nothing that reaches beyond this machine (no
/// component updates, no sync, no metrics). Add the `DevTools` flags
/// (`--remote-debugging-port=0` writes the port it picks to
/// `profile/DevToolsActivePort`) or `--dump-dom URL`.
pub fn chromium_command(profile: &Path) -> Result<Command, String> {
    let bin =
        chromium_binary().ok_or("chromium is not installed: `cargo xtask engines up chromium`")?;
    std::fs::create_dir_all(profile)
        .map_err(|e| format!("chromium: cannot make {}: {e}", profile.display()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("--headless")
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--metrics-recording-only",
            "--no-pings",
            "--remote-debugging-address=127.0.0.1",
            "--window-size=1200,900",
        ]);
    if crate::process::is_root() {
        cmd.arg("--no-sandbox");
    }
    Ok(cmd)
}
