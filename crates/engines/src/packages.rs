//! Installing the engines' Debian packages (apt), and finding a static busybox.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::engines_file;
use crate::process::{command_exists, is_executable, is_root, run_logged, run_output};

const APT_UPDATE_TIMEOUT: Duration = Duration::from_secs(600);
const APT_INSTALL_TIMEOUT: Duration = Duration::from_secs(1200);

/// Debian packages the engines come from (with their recommends, as `apt-get
/// install -y` picks them), and the HTTP tools the `--serve` tests drive
/// lookout with (`curl` into `jq`, as docs/serve.md shows), `ip` (the
/// bridges of the dockerds beside the main one), what checks the files
/// operators install (`systemd-analyze` for deploy/systemd, `man`), `kill`
/// (procps: the tests signal the processes they started), `ssh` (the ssh
/// transport's tests; openssh-server, the sshd's package, also pulls it in),
/// and `git` (the release's dry run reads the tags; the builds name their
/// revision).
const DEBIAN_PACKAGES: &[&str] = &[
    "docker.io",
    "busybox-static",
    "podman",
    "curl",
    "jq",
    "iproute2",
    "systemd",
    "man-db",
    "procps",
    "openssh-client",
    "git",
];

static APT_UPDATED: AtomicBool = AtomicBool::new(false);

pub(crate) fn dpkg_installed(pkg: &str) -> bool {
    run_output(
        Command::new("dpkg-query").args(["-W", "-f=${Status}", pkg]),
        Duration::from_secs(30),
    )
    .is_ok_and(|o| o.status.success() && o.stdout.contains("install ok installed"))
}

/// Install the Debian packages the engines and tests need (`DEBIAN_PACKAGES`)
/// when one is missing: as root on Debian, `apt-get update` (once per
/// process) then `apt-get install -y`. Elsewhere, say what to install.
pub fn ensure_packages() -> Result<(), String> {
    let apt = command_exists("apt-get") && command_exists("dpkg-query");
    let missing: Vec<&str> = if apt {
        DEBIAN_PACKAGES
            .iter()
            .copied()
            .filter(|p| !dpkg_installed(p))
            .collect()
    } else {
        let mut m = Vec::new();
        if !command_exists("dockerd") && !is_executable(Path::new("/usr/sbin/dockerd")) {
            m.push("docker.io");
        }
        if static_busybox().is_none() {
            m.push("busybox-static");
        }
        for tool in [
            "podman",
            "curl",
            "jq",
            "ip",
            "systemd-analyze",
            "man",
            "kill",
            "ssh",
            "git",
        ] {
            if !command_exists(tool) {
                m.push(tool);
            }
        }
        m
    };
    apt_install(&missing, apt)
}

/// `apt-get install -y` of the Debian packages `wanted` that are missing
/// (as root on Debian; elsewhere an error saying what to install).
pub fn ensure_debian(wanted: &[&str]) -> Result<(), String> {
    let apt = command_exists("apt-get") && command_exists("dpkg-query");
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|p| !apt || !dpkg_installed(p))
        .collect();
    apt_install(&missing, apt)
}

/// `apt-get update` (once per process) then `apt-get install -y` of
/// `missing` (nothing when it is empty), as root where apt is (`apt`);
/// elsewhere, say what to install.
pub(crate) fn apt_install(missing: &[&str], apt: bool) -> Result<(), String> {
    if missing.is_empty() {
        return Ok(());
    }
    if !apt || !is_root() {
        return Err(format!(
            "engines: missing {missing:?}; install them (Debian: `apt-get install -y {}` as root)",
            missing.join(" ")
        ));
    }
    let log = engines_file("apt.log")?;
    eprintln!(
        "[engines] installing {} (log: {})",
        missing.join(" "),
        log.display()
    );
    let t = Instant::now();
    let apt_env = |cmd: &mut Command| {
        cmd.env("DEBIAN_FRONTEND", "noninteractive")
            .env("NEEDRESTART_MODE", "a");
    };
    if !APT_UPDATED.load(Ordering::SeqCst) {
        let mut cmd = Command::new("apt-get");
        cmd.args(["update", "-q"]);
        apt_env(&mut cmd);
        run_logged(
            &mut cmd,
            "engines: apt-get update",
            &log,
            APT_UPDATE_TIMEOUT,
        )?;
        APT_UPDATED.store(true, Ordering::SeqCst);
    }
    let mut cmd = Command::new("apt-get");
    cmd.args(["install", "-y", "-q"]).args(missing);
    apt_env(&mut cmd);
    run_logged(
        &mut cmd,
        "engines: apt-get install",
        &log,
        APT_INSTALL_TIMEOUT,
    )?;
    eprintln!(
        "[engines] installed {} in {:.1?}",
        missing.join(" "),
        t.elapsed()
    );
    Ok(())
}

/// A statically linked busybox (Debian's `busybox-static` puts it at
/// `/bin/busybox`): an ELF executable without a `PT_INTERP` program header.
pub(crate) fn static_busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| is_static_elf(p))
}

fn is_static_elf(path: &Path) -> bool {
    let Ok(bytes) = fs::read(path) else {
        return false;
    };
    // ELF64 little-endian only (x86_64, aarch64).
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |o: usize| {
        bytes.get(o..o + 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    let Ok(phoff) = usize::try_from(phoff) else {
        return false;
    };
    (0..usize::from(phnum)).all(|i| {
        let at = phoff + i * usize::from(phentsize);
        // p_type 3 = PT_INTERP: a dynamic executable.
        bytes
            .get(at..at + 4)
            .is_some_and(|t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]) != 3)
    })
}

/// Installs the Debian package `package` (which provides `binary`) for a
/// tool the engines run as a process of their own (sshd, nginx): without
/// starting its Debian service, which would take its port and run beside
/// ours (a `policy-rc.d` that refuses every start, while apt runs, when
/// there is none).
pub(crate) fn install_without_service(
    engine: &str,
    binary: &str,
    package: &str,
) -> Result<(), String> {
    if Path::new(binary).exists() {
        return Ok(());
    }
    let apt = command_exists("apt-get") && command_exists("dpkg-query");
    if apt && dpkg_installed(package) {
        return Err(format!(
            "{engine}: {package} is installed but {binary} is missing"
        ));
    }
    let policy = Path::new("/usr/sbin/policy-rc.d");
    let ours = apt && !policy.exists();
    if ours {
        fs::write(
            policy,
            "#!/bin/sh\n# lookout's engines: no service starts while installing\nexit 101\n",
        )
        .map_err(|e| format!("{engine}: cannot write {}: {e}", policy.display()))?;
        crate::process::run(
            Command::new("chmod").args(["755", &policy.display().to_string()]),
            &format!("{engine}: chmod policy-rc.d"),
            Duration::from_secs(60),
        )?;
    }
    let installed = apt_install(&[package], apt);
    if ours {
        let _ = fs::remove_file(policy);
    }
    installed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_elf_check() {
        // /bin/sh is dynamically linked on Debian.
        if Path::new("/bin/sh").exists() {
            assert!(!is_static_elf(Path::new("/bin/sh")) || static_busybox().is_some());
        }
        assert!(!is_static_elf(Path::new("/nonexistent")));
    }
}
