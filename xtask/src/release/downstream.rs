//! The downstream fixture (`tests/downstream/`, a workspace of its own with
//! its own `Cargo.lock`): one binary per provider family, each depending on
//! that one lookout crate by version (`lookout-docker = "0.1"`), resolved
//! from the unpacked `.crate` files through `[patch.crates-io]` (written
//! here, passed with `--config`). Each is built, its dependency tree checked
//! (what a family must not pull in), and run against the real engine: it
//! prints `connected` once the stream says so, then `event KIND ID` for its
//! instance, and exits 0 once the instance is removed.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::package::{Packaged, target_dir};
use super::workspace;
use crate::engines;

pub const DIR: &str = "tests/downstream";

struct Family {
    package: &'static str,
    /// Crates this consumer must not pull in (normal and build dependencies).
    forbidden: &'static [&'static str],
    /// What each step of [`lifecycle`] makes the engine tell, in order: a
    /// running instance is created then started, and Docker's `stop` is
    /// asked for (`stopping`) before the container dies.
    expected: &'static [&'static [&'static str]],
}

const FAMILIES: &[Family] = &[
    Family {
        package: "downstream-docker",
        forbidden: &[
            "kube",
            "kube-client",
            "k8s-openapi",
            "lookout-k8s",
            "lookout-etcd",
            "axum",
            "clap",
            "lookout-cli",
        ],
        expected: &[
            &["created", "started"],
            &["stopping", "stopped"],
            &["removed"],
        ],
    },
    Family {
        package: "downstream-k8s",
        // lookout-transport is allowed: lookout-k8s takes its rustls
        // provider from it (the third-party crates under it, hyper and
        // tokio-rustls, are kube's own too).
        forbidden: &[
            "lookout-moby",
            "lookout-docker",
            "lookout-etcd",
            "axum",
            "clap",
            "lookout-cli",
        ],
        // Scaled to 0 is `stopped` at once (the pods' own end is not the
        // Deployment's); the delete comes after, on a stopped object.
        expected: &[&["created", "started"], &["stopped"], &["removed"]],
    },
    Family {
        package: "downstream-etcd",
        forbidden: &[
            "kube",
            "k8s-openapi",
            "lookout-k8s",
            "lookout-moby",
            "lookout-docker",
            "axum",
            "clap",
            "lookout-cli",
        ],
        // The etcd consumer drives itself: one event a step.
        expected: &[&["created"], &["started"], &["stopped"], &["removed"]],
    },
];

/// Unpack the packages and write the `[patch.crates-io]` that points at them.
/// Only the crates the fixture's `Cargo.lock` names are patched (cargo warns
/// about a patch nobody uses).
fn unpack(root: &Path, packaged: &[Packaged]) -> Result<PathBuf, String> {
    let lock = std::fs::read_to_string(root.join(DIR).join("Cargo.lock")).unwrap_or_default();
    let base = target_dir(root).join("release-check");
    let crates = base.join("crates");
    let _ = std::fs::remove_dir_all(&crates);
    std::fs::create_dir_all(&crates).map_err(|e| format!("{}: {e}", crates.display()))?;
    for p in packaged {
        let status = Command::new("tar")
            .arg("xzf")
            .arg(&p.file)
            .arg("-C")
            .arg(&crates)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("tar: {e}"))?;
        if !status.success() {
            return Err(format!("tar cannot unpack {}", p.file.display()));
        }
    }
    write_patch(
        &base.join("patch.toml"),
        packaged
            .iter()
            .filter(|p| lock.contains(&format!("name = \"{}\"\n", p.name))),
    )
}

/// Writes a `[patch.crates-io]` pointing each of `packaged` at its unpacked
/// package (`target/release-check/crates/NAME-VERSION`, unpacked by the
/// downstream check); the file, for `--config`.
pub fn write_patch<'a>(
    file: &Path,
    packaged: impl Iterator<Item = &'a Packaged>,
) -> Result<PathBuf, String> {
    let crates = file.with_file_name("crates");
    let mut patch = String::from(
        "# Written by `cargo xtask release`: the lookout crates from their packaged .crate files.\n[patch.crates-io]\n",
    );
    for p in packaged {
        let dir = unpacked(&crates, p);
        if !dir.join("Cargo.toml").is_file() {
            return Err(format!("{} is not unpacked", dir.display()));
        }
        let _ = writeln!(
            patch,
            "{} = {{ path = {:?} }}",
            p.name,
            dir.display().to_string()
        );
    }
    std::fs::write(file, patch).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file.to_path_buf())
}

/// Where `p`'s package is unpacked under `crates`.
pub fn unpacked(crates: &Path, p: &Packaged) -> PathBuf {
    crates.join(format!("{}-{}", p.name, p.version))
}

fn cargo(dir: &Path, target: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new(crate::process::cargo_bin());
    cmd.args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let out = cmd
        .output()
        .map_err(|e| format!("cargo {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!("`cargo {}` in {DIR} failed", args.join(" ")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Build every family from the packages, check its tree and its MSRV, and
/// (with `engines`) run it against the real engine.
/// `written`: the release has just written new versions, so the fixture's
/// `Cargo.lock` is brought to them first (nothing else in it moves).
pub fn check(
    root: &Path,
    packaged: &[Packaged],
    engines_up: bool,
    written: bool,
) -> Result<(), String> {
    let patch = unpack(root, packaged)?;
    let patch_arg = patch.display().to_string();
    let dir = root.join(DIR);
    // The workspace's own target directory: the third-party crates the
    // fixture locks at the workspace's versions, with the same features, are
    // built once for both.
    let target = target_dir(root);
    if written {
        let mut args = vec!["update", "--config", &patch_arg];
        for p in packaged {
            args.extend(["-p", p.name.as_str()]);
        }
        cargo(&dir, &target, &args)?;
    }
    let unpacked = target_dir(root).join("release-check").join("crates");
    for f in FAMILIES {
        let t = Instant::now();
        cargo(
            &dir,
            &target,
            &["build", "--locked", "--config", &patch_arg, "-p", f.package],
        )?;
        let tree = cargo(
            &dir,
            &target,
            &[
                "tree",
                "--locked",
                "--config",
                &patch_arg,
                "-p",
                f.package,
                "-e",
                "normal,build",
                "--prefix",
                "none",
                "--format",
                "{p}",
            ],
        )?;
        let mut pulled: Vec<&str> = Vec::new();
        let mut lookout = Vec::new();
        for line in tree.lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            if f.forbidden.contains(&name) {
                pulled.push(name);
            }
            if name.starts_with("lookout-") {
                if !line.contains(&unpacked.display().to_string()) {
                    return Err(format!(
                        "{}: {line} does not come from the packaged files",
                        f.package
                    ));
                }
                lookout.push(name.to_owned());
            }
        }
        pulled.sort_unstable();
        pulled.dedup();
        if !pulled.is_empty() {
            return Err(format!("{} pulls in {}", f.package, pulled.join(", ")));
        }
        lookout.sort();
        lookout.dedup();
        let meta = workspace::read(&dir, &["--config", &patch_arg])?;
        let (n, bad) = super::msrv::check(&meta, &[f.package])?;
        if !bad.is_empty() {
            return Err(format!("{}: MSRV:\n  {}", f.package, bad.join("\n  ")));
        }
        eprintln!(
            "==> {}: built from the packages in {:.1?} ({}), none of [{}], {n} dependencies within its rust-version",
            f.package,
            t.elapsed(),
            lookout.join(", "),
            f.forbidden.join(", ")
        );
        if engines_up {
            let t = Instant::now();
            run(f, &target)?;
            eprintln!(
                "==> {}: told {} against the real engine in {:.1?}",
                f.package,
                f.expected.concat().join(", "),
                t.elapsed()
            );
        }
    }
    Ok(())
}

/// A name no earlier run left behind.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Start the family's binary, drive its instance through its lifecycle with
/// the engine's own client, and read what the binary told.
fn run(f: &Family, target: &Path) -> Result<(), String> {
    let bin = target.join("debug").join(f.package);
    let env = engines::env_vars();
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let name = unique("downstream");
    let mut cmd = Command::new(&bin);
    match f.package {
        "downstream-docker" => {
            cmd.arg(&name)
                .env("DOCKER_HOST", get(engines::ENV_DOCKER_HOST));
        }
        "downstream-k8s" => {
            cmd.args(["default", &name])
                .env("KUBECONFIG", get(engines::ENV_KUBECONFIG));
        }
        _ => {
            cmd.args([
                &get(engines::ENV_ETCD_ENDPOINTS),
                &format!("/{name}"),
                &name,
            ]);
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel::<String>();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let result = drive(f, &name, &rx);
    let _ = child.kill();
    let _ = child.wait();
    cleanup(f, &name);
    result
}

fn drive(f: &Family, name: &str, rx: &mpsc::Receiver<String>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let next = |what: &str| -> Result<String, String> {
        let left = deadline.saturating_duration_since(Instant::now());
        rx.recv_timeout(left)
            .map_err(|_| format!("{}: no `{what}` line within 120 s", f.package))
    };
    loop {
        let line = next("connected")?;
        if line == "connected" {
            break;
        }
    }
    let steps = lifecycle(f.package);
    if steps.len() != f.expected.len() {
        return Err(format!(
            "{}: {} steps but {} expected groups",
            f.package,
            steps.len(),
            f.expected.len()
        ));
    }
    let mut told: Vec<String> = Vec::new();
    for (step, kinds) in steps.iter().zip(f.expected) {
        step(name)?;
        for _ in 0..kinds.len() {
            let line = next("event")?;
            let mut parts = line.split_whitespace();
            if parts.next() != Some("event") {
                return Err(format!("{}: unexpected line {line:?}", f.package));
            }
            told.push(parts.next().unwrap_or_default().to_owned());
        }
    }
    let expected: Vec<&str> = f.expected.concat();
    if told != expected {
        return Err(format!(
            "{} told {told:?} for {name}, the engine did {expected:?}",
            f.package
        ));
    }
    Ok(())
}

type Step = fn(&str) -> Result<(), String>;

/// The bed's kubectl (`target/k8s-testbed/bin/kubectl`, at the apiserver's
/// release), never one from `PATH`.
fn kubectl(args: &[&str]) -> Result<(), String> {
    let mut cmd = Command::new(engines::kubectl_binary()?);
    cmd.args(args).env(
        "KUBECONFIG",
        engines::k8s_kubeconfig()?.display().to_string(),
    );
    engines::run(&mut cmd, "kubectl", Duration::from_secs(60)).map(|_| ())
}

fn lifecycle(package: &str) -> &'static [Step] {
    match package {
        "downstream-docker" => &[
            |n| {
                engines::docker(&[
                    "run",
                    "-d",
                    "--network",
                    "none",
                    "--name",
                    n,
                    &engines::test_image(),
                    "sleep",
                    "3600",
                ])
                .map(|_| ())
            },
            |n| engines::docker(&["stop", "-t", "1", n]).map(|_| ()),
            |n| engines::docker(&["rm", n]).map(|_| ()),
        ],
        "downstream-k8s" => &[
            |n| {
                kubectl(&[
                    "create",
                    "deployment",
                    n,
                    "--image=lookout-test/busybox",
                    "--replicas=1",
                ])
            },
            |n| kubectl(&["scale", "deployment", n, "--replicas=0"]),
            |n| kubectl(&["delete", "deployment", n, "--wait=false"]),
        ],
        // The etcd consumer drives its own instance (it publishes, then
        // reads back what it published): nothing to do from here.
        _ => &[|_| Ok(()), |_| Ok(()), |_| Ok(()), |_| Ok(())],
    }
}

fn cleanup(f: &Family, name: &str) {
    match f.package {
        "downstream-docker" => {
            let _ = engines::docker(&["rm", "-f", name]);
        }
        "downstream-k8s" => {
            let _ = kubectl(&["delete", "deployment", name, "--ignore-not-found"]);
        }
        _ => {}
    }
}
