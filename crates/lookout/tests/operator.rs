//! What an operator installs beside the binary, checked with the tools that
//! read it: `--version` names the revision, bash completes the subcommands
//! and flags, `man` renders the pages without a warning, and
//! deploy/systemd/lookout.service passes `systemd-analyze verify` with an
//! exposure of at most 3.0 ("OK") from `systemd-analyze security`.
//!
//! Needs bash, git, man-db/groff and systemd-analyze (`cargo xtask engines up`
//! installs the last two); without them the test says so and passes outside
//! CI, fails under it.

// The shared test helpers read children's pipes on threads; only library
// crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lookout_e2e::engines;

mod common;
use common::TempDir;

const LOOKOUT: &str = env!("CARGO_BIN_EXE_lookout");

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `tool` can run; if not, a test that needs it passes saying so,
/// unless the engines were brought up (CI), where it fails.
fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || !engines::engines_enabled(),
        "{tool} is missing although `cargo xtask engines up` ran (it installs it)"
    );
    if !found {
        eprintln!("SKIPPED: {tool} is not installed");
    }
    found
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn version_names_the_revision_it_was_built_from() {
    let out = text(&run(Command::new(LOOKOUT).arg("--version")));
    let head = Command::new("git")
        .arg("-C")
        .arg(workspace())
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let revision = head.unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(
        out.trim(),
        format!("lookout {} (git {revision})", env!("CARGO_PKG_VERSION"))
    );
}

/// What bash's completion offers for the words typed so far (the last one
/// being completed), from `lookout completions bash` sourced into bash.
fn complete(words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source <(\"$0\" completions bash) || exit 3\n\
         COMP_WORDS=({words}); COMP_CWORD={cword}\n\
         COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}\n\
         _lookout lookout \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words = quoted.join(" "),
        cword = words.len() - 1,
    );
    let out = run(Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .arg(LOOKOUT));
    text(&out).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_the_subcommands_and_their_flags() {
    if !have("bash") {
        return;
    }
    let top = complete(&["lookout", ""]);
    for sub in [
        "docker",
        "podman",
        "swarm",
        "k8s",
        "etcd",
        "completions",
        "man",
        "probe",
    ] {
        assert!(top.iter().any(|w| w == sub), "{sub} not offered: {top:?}");
    }
    let flags = complete(&["lookout", "docker", "--"]);
    for flag in [
        "--host",
        "--context",
        "--serve",
        "--token-file",
        "--json",
        "--readiness",
        "--publish",
    ] {
        assert!(
            flags.iter().any(|w| w == flag),
            "{flag} not offered: {flags:?}"
        );
    }
    assert!(
        !flags.iter().any(|w| w == "--kubeconfig"),
        "k8s's flag offered for docker: {flags:?}"
    );
    assert_eq!(
        complete(&["lookout", "k8s", "--kind", ""]),
        ["deployment", "statefulset", "daemonset"]
    );
    let shells = complete(&["lookout", "completions", ""]);
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.iter().any(|w| w == shell), "{shell}: {shells:?}");
    }
    // The other shells' scripts name every subcommand too.
    for shell in ["zsh", "fish"] {
        let script = text(&run(Command::new(LOOKOUT).args(["completions", shell])));
        for sub in ["docker", "k8s", "probe"] {
            assert!(script.contains(sub), "{shell} script lacks {sub}");
        }
    }
}

#[test]
fn man_pages_render_without_warnings() {
    if !have("groff") || !have("man") {
        return;
    }
    let dir = TempDir::new("operator", "man");
    run(Command::new(LOOKOUT).args(["man", "--dir"]).arg(&dir.0));
    for page in [
        "lookout.1",
        "lookout-docker.1",
        "lookout-k8s.1",
        "lookout-probe.1",
    ] {
        let path = dir.0.join(page);
        // groff as man-db runs it (-k: preconv, the input is UTF-8), with every
        // warning on; -z: parse only.
        let out = run(Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(&path));
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(warnings.trim().is_empty(), "{page}: {warnings}");
    }
    let docker = text(&run(Command::new("man")
        .env("MANWIDTH", "100")
        .env_remove("MAN_KEEP_FORMATTING")
        .arg("-l")
        .arg(dir.0.join("lookout-docker.1"))));
    for word in ["--host", "--serve", "--readiness", "DOCKER_HOST"] {
        assert!(
            docker.contains(word),
            "lookout-docker(1) lacks {word}:\n{docker}"
        );
    }
    // Printed on stdout, the page is lookout.1.
    let top = run(Command::new(LOOKOUT).arg("man"));
    let written = std::fs::read(dir.0.join("lookout.1")).expect("lookout.1");
    assert_eq!(top.stdout, written);
}

#[test]
fn the_systemd_unit_verifies_and_is_exposed_at_most_3() {
    if !have("systemd-analyze") || !have("man") {
        return;
    }
    let unit = std::fs::read_to_string(workspace().join("deploy/systemd/lookout.service"))
        .expect("deploy/systemd/lookout.service");
    assert!(unit.contains("ExecStart=/usr/local/bin/lookout "), "{unit}");
    // Verified as installed: the binary where ExecStart says (here, the one
    // just built) and lookout(1), which Documentation= names, on MANPATH.
    let dir = TempDir::new("operator", "systemd");
    let man1 = dir.0.join("man/man1");
    run(Command::new(LOOKOUT).args(["man", "--dir"]).arg(&man1));
    let path = dir.0.join("lookout.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/lookout", LOOKOUT)).expect("unit");
    let out = run(Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .env("MANPATH", dir.0.join("man")));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.trim().is_empty(), "systemd-analyze verify: {said}");

    let out = run(Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&path));
    let report = text(&out);
    let line = report
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"));
    let level: f64 = line
        .split_once(": ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cannot read {line}"));
    eprintln!("{line}");
    assert!(level <= 3.0, "{line}\n{report}");
    assert!(line.contains(" OK") || line.contains("SAFE"), "{line}");
}
