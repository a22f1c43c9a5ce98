//! `cargo xtask image`: lookout's container image, `lookout:latest` and
//! `lookout:VERSION` (lookout-cli's version), built into the local dockerd
//! without pulling anything (`deploy/image/README.md` says how to run it).
//!
//! 1. the Rust target `x86_64-unknown-linux-musl` (`rustup target add`) and
//!    `musl-gcc` (Debian's `musl-tools`: ring's C code), installed if missing;
//! 2. `cargo build --locked -p lookout-cli --bin lookout --profile image
//!    --target x86_64-unknown-linux-musl`: one static binary, in the
//!    workspace's target directory (the `image` profile is release without
//!    symbols);
//! 3. dockerd, brought up as `cargo xtask engines up docker` does;
//! 4. `docker build` of `deploy/image/Dockerfile` (`FROM scratch`, the
//!    legacy builder) with a context of that file and the binary only
//!    (`target/image-context/`), its labels' version and git revision given
//!    as build arguments; the image it replaces is removed when nothing uses
//!    it;
//! 5. `docker run --rm --network none lookout:latest --version`: the binary
//!    runs in the image.
//!
//! Each step says how long it took; the last line, the image's size.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::engines;
use crate::process::{cargo_bin, run_inherited};

/// The static target: musl resolves host names from `/etc/hosts` and
/// `/etc/resolv.conf` itself, where a static glibc needs NSS modules at
/// run time that a `scratch` image does not have.
pub const TARGET: &str = "x86_64-unknown-linux-musl";
/// The cargo profile of the image's binary (`Cargo.toml`).
pub const PROFILE: &str = "image";
/// The image's name.
pub const IMAGE: &str = "lookout";

const BUILD_TIMEOUT: Duration = Duration::from_secs(40 * 60);
const STEP_TIMEOUT: Duration = Duration::from_secs(10 * 60);

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!(
            "`cargo xtask image` takes no arguments (got {a:?})"
        ));
    }
    let root = engines::workspace_root();
    let version = cli_version(&root)?;
    let total = Instant::now();

    let t = Instant::now();
    ensure_target(&root)?;
    ensure_musl_gcc()?;
    eprintln!(
        "==> image: the {TARGET} toolchain ready in {:.1?}",
        t.elapsed()
    );

    let t = Instant::now();
    let binary = build(&root)?;
    let bytes = fs::metadata(&binary).map_or(0, |m| m.len());
    eprintln!(
        "==> image: built {} ({:.1} MB) in {:.1?}",
        binary.display(),
        mb(bytes),
        t.elapsed()
    );

    let t = Instant::now();
    engines::docker_up()?;
    let revision = revision(&root);
    let latest = format!("{IMAGE}:latest");
    let versioned = format!("{IMAGE}:{version}");
    let previous = image_id(&latest);
    let context = context(&root, &binary)?;
    let vers = format!("VERSION={version}");
    let rev = format!("REVISION={revision}");
    engines::run(
        engines::docker_command()
            .args(["build", "--build-arg", &vers, "--build-arg", &rev])
            .args(["-t", &latest, "-t", &versioned])
            .arg(&context),
        "image: docker build",
        STEP_TIMEOUT,
    )?;
    let id = image_id(&latest).ok_or("image: docker build made no lookout:latest")?;
    if let Some(old) = previous.filter(|old| *old != id) {
        // Untagged now; still used by a container, it stays (and says so).
        if let Err(e) = engines::docker(&["image", "rm", &old]) {
            eprintln!("==> image: the previous image {old} stays: {e}");
        }
    }
    eprintln!(
        "==> image: {latest} and {versioned} ({id}, revision {revision}) built in {:.1?}",
        t.elapsed()
    );

    let said = engines::docker(&["run", "--rm", "--network", "none", &latest, "--version"])
        .map_err(|e| format!("image: the binary does not run in the image: {e}"))?;
    eprintln!("==> image: `docker run --rm {latest} --version`: {said}");

    let size = engines::docker(&["image", "inspect", "--format", "{{.Size}}", &latest])?;
    let size: u64 = size
        .parse()
        .map_err(|e| format!("image: its size {size:?}: {e}"))?;
    eprintln!(
        "==> image: {latest}: {:.1} MB, in {:.1?} in all",
        mb(size),
        total.elapsed()
    );
    Ok(())
}

#[allow(clippy::cast_precision_loss)] // sizes in MB, to a tenth
fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

/// lookout-cli's version, from its manifest.
fn cli_version(root: &Path) -> Result<String, String> {
    let path = root.join("crates/lookout/Cargo.toml");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let manifest: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    manifest
        .get("package")
        .and_then(|p| p.get("version"))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: no package.version", path.display()))
}

/// `git rev-parse HEAD`, with `-dirty` when tracked files differ from it;
/// `unknown` outside a git checkout.
fn revision(root: &Path) -> String {
    let git = |args: &[&str]| {
        engines::run(
            Command::new("git").args(args).current_dir(root),
            "git",
            Duration::from_secs(60),
        )
    };
    let Ok(head) = git(&["rev-parse", "HEAD"]) else {
        return "unknown".to_owned();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Ok(changes) if changes.is_empty() => head,
        _ => format!("{head}-dirty"),
    }
}

/// The target's standard library, added with rustup when the toolchain
/// the workspace builds with lacks it.
fn ensure_target(root: &Path) -> Result<(), String> {
    let sysroot = engines::run(
        Command::new("rustc")
            .args(["--print", "sysroot"])
            .current_dir(root),
        "image: rustc --print sysroot",
        Duration::from_secs(60),
    )?;
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .is_dir()
    {
        return Ok(());
    }
    eprintln!("==> image: rustup target add {TARGET}");
    engines::run(
        Command::new("rustup")
            .args(["target", "add", TARGET])
            .current_dir(root),
        "image: rustup target add (the static binary's standard library)",
        STEP_TIMEOUT,
    )
    .map(drop)
}

/// `musl-gcc`, from Debian's `musl-tools` when missing: ring compiles C.
fn ensure_musl_gcc() -> Result<(), String> {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("musl-gcc").is_file()));
    if on_path {
        return Ok(());
    }
    engines::ensure_debian(&["musl-tools"])
}

/// Builds the static binary; its path.
fn build(root: &Path) -> Result<PathBuf, String> {
    let args = [
        "build",
        "--locked",
        "-p",
        "lookout-cli",
        "--bin",
        "lookout",
        "--profile",
        PROFILE,
        "--target",
        TARGET,
    ];
    eprintln!("==> image: cargo {}", args.join(" "));
    let status = run_inherited(
        Command::new(cargo_bin())
            .args(args)
            .current_dir(root)
            .stdin(Stdio::null()),
        BUILD_TIMEOUT,
    )?;
    if !status.success() {
        return Err(format!(
            "image: `cargo {}` exited with {status}",
            args.join(" ")
        ));
    }
    let target_dir = crate::process::target_dir(root);
    let binary = target_dir.join(TARGET).join(PROFILE).join("lookout");
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!("image: cargo built no {}", binary.display()))
    }
}

/// `target/image-context/`: the Dockerfile and the binary, nothing else.
fn context(root: &Path, binary: &Path) -> Result<PathBuf, String> {
    let dir = root.join("target").join("image-context");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("image: {}: {e}", dir.display()))?;
    let dockerfile = root.join("deploy/image/Dockerfile");
    fs::copy(&dockerfile, dir.join("Dockerfile"))
        .map_err(|e| format!("image: copy {}: {e}", dockerfile.display()))?;
    fs::copy(binary, dir.join("lookout"))
        .map_err(|e| format!("image: copy {}: {e}", binary.display()))?;
    Ok(dir)
}

/// The id of `image` in dockerd, if it has it.
fn image_id(image: &str) -> Option<String> {
    engines::docker(&["image", "inspect", "--format", "{{.Id}}", image]).ok()
}
