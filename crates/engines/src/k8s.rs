//! The k8s testbed (kube-apiserver + etcd, `xtask/k8s-testbed`): build, start,
//! stop, kill and restart the apiserver, compact etcd; and the kstatus helper built beside it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{
    alive, find_in_path, is_executable, proc_state, read_pid, run, run_logged, signal, tail_file,
};
use crate::{ENV_KUBECONFIG, engines_dir, engines_file, env_nonempty, workspace_root};

const K8S_BUILD_TIMEOUT: Duration = Duration::from_secs(3600);
const K8S_UP_TIMEOUT: Duration = Duration::from_secs(300);

/// `target/engines/k8s`: the testbed's state directory.
pub fn k8s_dir() -> Result<PathBuf, String> {
    Ok(engines_dir()?.join("k8s"))
}

fn k8s_bin_dir() -> PathBuf {
    workspace_root()
        .join("target")
        .join("k8s-testbed")
        .join("bin")
}

fn testbed() -> PathBuf {
    k8s_bin_dir().join("testbed")
}

/// The testbed's kubeconfig: `LOOKOUT_KUBECONFIG` if set, else
/// `target/engines/k8s/kubeconfig` (written by [`k8s_up`]).
pub fn k8s_kubeconfig() -> Result<PathBuf, String> {
    if let Some(p) = env_nonempty(ENV_KUBECONFIG) {
        return Ok(PathBuf::from(p));
    }
    Ok(k8s_dir()?.join("kubeconfig"))
}

/// Go for the testbed build: `go` on `PATH`, else `/usr/local/go/bin/go`.
fn go_binary() -> Result<PathBuf, String> {
    find_in_path("go")
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| is_executable(p)))
        .ok_or_else(|| {
            "k8s: Go is needed to build kube-apiserver and etcd (xtask/k8s-testbed) but `go` is \
             neither on PATH nor at /usr/local/go/bin/go: install Go >= 1.26"
                .to_owned()
        })
}

fn testbed_cmd(sub: &str) -> Result<Command, String> {
    let bin = testbed();
    if !is_executable(&bin) {
        return Err(format!(
            "k8s: {} is missing: run k8s_up (`cargo xtask engines up k8s`)",
            bin.display()
        ));
    }
    let mut cmd = Command::new(bin);
    cmd.arg(sub).arg("--dir").arg(k8s_dir()?);
    Ok(cmd)
}

/// `target/k8s-testbed/bin/kstatus`: the kstatus helper (`xtask/k8s-testbed/kstatus`),
/// which prints cli-utils' kstatus verdict (`Current`, `InProgress`, `Failed`,
/// `Terminating`, …) of each object it reads as one JSON line
/// (`{"kind","namespace","name","status","message"}`): pipe `kubectl get -o json` into
/// it, or run it with `--kubeconfig F --resource GROUP/VERSION/PLURAL [--namespace NS]`.
/// Built by [`k8s_build`] (so by [`k8s_up`]); an error if it is not built yet.
pub fn kstatus_binary() -> Result<PathBuf, String> {
    let bin = k8s_bin_dir().join("kstatus");
    if is_executable(&bin) {
        Ok(bin)
    } else {
        Err(format!(
            "k8s: the kstatus helper {} is missing: run `cargo xtask engines up k8s` \
             (it builds xtask/k8s-testbed/kstatus)",
            bin.display()
        ))
    }
}

/// `target/k8s-testbed/bin/kubectl`: kubectl at the bed's release (k8s.io/kubectl
/// v0.37.2 for kube-apiserver v1.37.2, `xtask/k8s-testbed/kubectl`), the one every test,
/// the release's downstream step and the docs run: never a kubectl from the machine's
/// `PATH`, which a fresh machine does not have (and Debian's is 1.20, too old for the
/// manifests). Built by [`k8s_build`] (so by [`k8s_up`]); an error if it is not built yet.
pub fn kubectl_binary() -> Result<PathBuf, String> {
    let bin = k8s_bin_dir().join("kubectl");
    if is_executable(&bin) {
        Ok(bin)
    } else {
        Err(format!(
            "k8s: kubectl {} is missing: run `cargo xtask engines up k8s` \
             (it builds xtask/k8s-testbed/kubectl)",
            bin.display()
        ))
    }
}

/// The build scripts [`k8s_build`] runs, in order, each with `BIN_DIR` and each cached by
/// a stamp of its own in it: the testbed (kube-apiserver, etcd, the launcher; `.stamp`),
/// the kstatus helper (`.kstatus.stamp`), then kubectl (`.kubectl.stamp`). Separate
/// scripts, so that the helpers' sources and scripts are not in the testbed's stamp and
/// never rebuild kube-apiserver.
fn build_scripts(root: &Path) -> [(PathBuf, &'static str); 3] {
    let testbed = root.join("xtask").join("k8s-testbed");
    [
        (testbed.join("build.sh"), "k8s: xtask/k8s-testbed/build.sh"),
        (
            testbed.join("kstatus").join("build.sh"),
            "k8s: xtask/k8s-testbed/kstatus/build.sh",
        ),
        (
            testbed.join("kubectl").join("build.sh"),
            "k8s: xtask/k8s-testbed/kubectl/build.sh",
        ),
    ]
}

/// Build the testbed (`xtask/k8s-testbed/build.sh target/k8s-testbed/bin`,
/// cached; the first build takes long: log `target/engines/k8s-build.log`), then the
/// kstatus helper (`xtask/k8s-testbed/kstatus/build.sh target/k8s-testbed/bin`, cached
/// on its own: [`kstatus_binary`]) and kubectl (`xtask/k8s-testbed/kubectl/build.sh`,
/// cached on its own: [`kubectl_binary`]).
pub fn k8s_build() -> Result<(), String> {
    let root = workspace_root();
    let scripts = build_scripts(&root);
    for (script, _) in &scripts {
        if !script.exists() {
            return Err(format!("k8s: {} is missing", script.display()));
        }
    }
    let go = go_binary()?;
    let log = engines_file("k8s-build.log")?;
    let bin = k8s_bin_dir();
    let mut path = go
        .parent()
        .map(Path::to_path_buf)
        .into_iter()
        .collect::<Vec<_>>();
    if let Some(p) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&p));
    }
    let path = std::env::join_paths(path).map_err(|e| format!("k8s: PATH: {e}"))?;
    eprintln!(
        "[engines] k8s: building the testbed into {} (log: {})",
        bin.display(),
        log.display()
    );
    for (script, context) in &scripts {
        let t = Instant::now();
        let mut cmd = Command::new("bash");
        cmd.arg(script)
            .arg(&bin)
            .env("GO", &go)
            .env("PATH", &path)
            .current_dir(&root);
        run_logged(&mut cmd, context, &log, K8S_BUILD_TIMEOUT)?;
        let last = tail_file(&log, 1);
        eprintln!("[engines] k8s: {} ({:.1?})", last.trim(), t.elapsed());
    }
    Ok(())
}

/// Build the testbed if needed and start etcd + kube-apiserver on 127.0.0.1
/// (`testbed up --dir target/engines/k8s --bin target/k8s-testbed/bin`,
/// idempotent). Logs: `target/engines/k8s/{etcd,apiserver}.log`.
pub fn k8s_up() -> Result<(), String> {
    k8s_build()?;
    let log = engines_file("k8s-testbed.log")?;
    let mut cmd = testbed_cmd("up")?;
    cmd.arg("--bin").arg(k8s_bin_dir());
    let t = Instant::now();
    run_logged(&mut cmd, "k8s: testbed up", &log, K8S_UP_TIMEOUT).map_err(|e| {
        let api = k8s_dir()
            .map(|d| d.join("apiserver.log").display().to_string())
            .unwrap_or_default();
        format!("{e}\n(also read {api})")
    })?;
    let kubeconfig = k8s_kubeconfig()?;
    if !kubeconfig.exists() {
        return Err(format!(
            "k8s: testbed up did not write {}; read {}",
            kubeconfig.display(),
            log.display()
        ));
    }
    eprintln!(
        "[engines] k8s: testbed up in {:.1?} (kubeconfig: {})",
        t.elapsed(),
        kubeconfig.display()
    );
    Ok(())
}

fn testbed_run(sub: &str, timeout: Duration) -> Result<String, String> {
    let mut cmd = testbed_cmd(sub)?;
    run(&mut cmd, &format!("k8s: testbed {sub}"), timeout)
}

/// Whether etcd and kube-apiserver are healthy (`testbed status`).
pub fn k8s_status() -> Result<String, String> {
    testbed_run("status", Duration::from_secs(30))
}

/// SIGKILL kube-apiserver and wait until it is gone (etcd keeps running).
pub fn k8s_kill_apiserver() -> Result<(), String> {
    testbed_run("kill-apiserver", Duration::from_secs(30)).map(drop)
}

/// Start kube-apiserver again with its previous arguments; wait for `/readyz`.
pub fn k8s_restart_apiserver() -> Result<(), String> {
    testbed_run("restart-apiserver", Duration::from_secs(180)).map(drop)
}

/// Compact etcd to its current revision (physical); returns that revision.
/// Watches older than it then get `410 Gone`.
pub fn k8s_compact() -> Result<i64, String> {
    let out = testbed_run("compact", Duration::from_secs(60))?;
    out.lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| format!("k8s: testbed compact printed no revision: {out:?}"))
}

/// Send `sig` (`"STOP"`, `"CONT"`, …) to kube-apiserver.
pub fn k8s_signal_apiserver(sig: &str) -> Result<(), String> {
    let file = k8s_dir()?.join("apiserver.pid");
    let pid = read_pid(&file)
        .filter(|p| alive(*p))
        .ok_or_else(|| format!("k8s: no live kube-apiserver in {}", file.display()))?;
    signal(pid, sig).map_err(|e| format!("k8s: {e}"))
}

/// Stop etcd and kube-apiserver and delete the state directory (`testbed down`).
pub fn k8s_down() -> Result<(), String> {
    let dir = k8s_dir()?;
    if !dir.exists() {
        return Ok(());
    }
    if let Ok(pid) = k8s_dir().map(|d| d.join("apiserver.pid"))
        && let Some(pid) = read_pid(&pid)
        && proc_state(pid) == Some('T')
    {
        let _ = signal(pid, "CONT");
    }
    testbed_run("down", Duration::from_secs(120)).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_testbed_then_kstatus_and_kubectl_into_one_bin_dir() {
        let root = workspace_root();
        let scripts = build_scripts(&root);
        assert!(scripts[0].0.ends_with("xtask/k8s-testbed/build.sh"));
        assert!(scripts[1].0.ends_with("xtask/k8s-testbed/kstatus/build.sh"));
        assert!(scripts[2].0.ends_with("xtask/k8s-testbed/kubectl/build.sh"));
        for (script, _) in &scripts {
            assert!(script.exists(), "{} is missing", script.display());
        }
        assert!(k8s_bin_dir().ends_with("target/k8s-testbed/bin"));
    }

    #[test]
    fn kstatus_binary_is_in_the_bin_dir_or_says_how_to_build_it() {
        match kstatus_binary() {
            Ok(bin) => {
                assert_eq!(bin, k8s_bin_dir().join("kstatus"));
                assert!(is_executable(&bin));
            }
            Err(e) => {
                assert!(e.contains("cargo xtask engines up k8s"), "{e}");
                assert!(e.contains("target/k8s-testbed/bin/kstatus"), "{e}");
            }
        }
    }

    #[test]
    fn kubectl_binary_is_the_beds_or_says_how_to_build_it() {
        match kubectl_binary() {
            Ok(bin) => {
                assert_eq!(bin, k8s_bin_dir().join("kubectl"));
                assert!(is_executable(&bin));
            }
            Err(e) => {
                assert!(e.contains("cargo xtask engines up k8s"), "{e}");
                assert!(e.contains("target/k8s-testbed/bin/kubectl"), "{e}");
            }
        }
    }
}
