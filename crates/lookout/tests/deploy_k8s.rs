//! `deploy/kubernetes` on the real k8s testbed (a kube-apiserver with RBAC
//! and service-account tokens, no controllers, no kubelet): the manifests
//! applied as they are (through an overlay of the test's own that moves
//! them into a namespace of its own and suffixes their names, cluster-scoped
//! ones too), then the real `lookout` binary run with the `ServiceAccount`'s
//! token: from a kubeconfig, from the in-cluster files as a pod has them,
//! with the role as shipped and with a role that lacks a verb.
//!
//! Every object a test creates is deleted on drop, also when it fails; every
//! wait is bounded.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use common::{Process, TempDir, WAIT, http_get};
use lookout_e2e::engines;
use lookout_e2e::k8s_access::{Token, service_account_token, token_kubeconfig};
use lookout_e2e::k8s_util::{self, Fixture};
use lookout_k8s::Kind;
use serde_json::Value;

/// How long the apiserver may take to act on a change of roles or labels
/// (its authorizer and admission read them from caches that follow the
/// writes).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a token the tests request is valid (the apiserver's minimum).
const TOKEN_SECS: i64 = 600;

/// The repository's `deploy/kubernetes`.
fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// Whether `argv` runs and succeeds here: `None` (said loudly) when it
/// does not, outside CI; under the engines (`cargo xtask`), a failure
/// fails the test. `need` says what it is for.
fn runs_or_skip(test: &str, argv: &[&str], need: &str) -> Option<()> {
    let ran = Command::new(argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ran {
        return Some(());
    }
    assert!(
        !engines::engines_enabled(),
        "{test}: {need}: `{argv:?}` fails"
    );
    eprintln!("SKIPPED {test}: {need}: `{argv:?}` fails here (CI fails instead)");
    None
}

/// The bed's kubectl (it applies deploy/kubernetes as a user does), at the
/// apiserver's release and built by `cargo xtask engines up k8s`, never one
/// from `PATH`; else `None` (said loudly) outside CI.
fn kubectl_or_skip(test: &str) -> Option<()> {
    let bin = match engines::kubectl_binary() {
        Ok(bin) => bin,
        Err(e) => {
            assert!(!engines::engines_enabled(), "{test}: {e}");
            eprintln!("SKIPPED {test}: {e} (CI fails instead)");
            return None;
        }
    };
    let bin = bin.to_str().expect("a UTF-8 path under target/");
    runs_or_skip(test, &[bin, "version", "--client"], "kubectl is needed")
}

/// Calls `check` every `every` until it gives `Ok`, within `within`; on
/// time, fails with its last `Err`.
fn poll<T>(
    within: std::time::Duration,
    every: std::time::Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        match check() {
            Ok(done) => return done,
            Err(e) => assert!(Instant::now() < deadline, "{e} (after {within:?})"),
        }
        std::thread::sleep(every);
    }
}

/// The bed's `kubectl --kubeconfig KUBECONFIG ARGS`: its exit status, stdout and stderr.
/// Each call has a discovery cache of its own (kubectl's default is under
/// `HOME`, which a test does not write, and which parallel kubectls race
/// on).
fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let cache = TempDir::new("deploy-k8s", "kubectl-cache");
    let bin = engines::kubectl_binary().expect("the bed's kubectl (kubectl_or_skip checked)");
    let mut cmd = Command::new(bin);
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(&cache.0)
        .arg("--request-timeout=20s")
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null());
    let out = cmd.output().expect("run kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kubectl` that must succeed; its stdout.
fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, out, err) = kubectl(kubeconfig, args);
    assert!(ok, "kubectl {args:?} failed: {err}{out}");
    out
}

/// The relative path from `from` to `to` (both absolute): kustomize takes
/// no absolute resource path.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from = from.canonicalize().expect("canonical overlay dir");
    let to = to.canonicalize().expect("canonical manifests dir");
    let mut rel = PathBuf::new();
    for _ in from.components().skip(1) {
        rel.push("..");
    }
    rel.join(to.strip_prefix("/").expect("absolute"))
}

/// One variant of `deploy/kubernetes` applied through an overlay of the
/// test's (its own namespace and name suffix); deleted on drop
/// (`kubectl delete -k`), cluster-scoped objects included.
struct Applied {
    admin: PathBuf,
    dir: TempDir,
    /// The namespace the objects are in.
    ns: String,
    /// The suffix of every name (`lookout-SUFFIX`).
    suffix: String,
}

impl Applied {
    /// Applies `variant` (`""` for the cluster-wide one, `"namespaced"`) in
    /// `ns` (the cluster-wide variant creates it; the namespaced one
    /// needs it).
    fn apply(admin: &Path, variant: &str, ns: &str) -> Self {
        // Unique across runs (the time, the pid) and within one (a count):
        // cluster-scoped names are shared by every test of every run.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = TempDir::new("deploy-k8s", "overlay");
        let suffix = format!(
            "{:x}{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
                ^ std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let base = relative(&dir.0, &manifests().join(variant));
        std::fs::write(
            dir.0.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 namespace: \"{ns}\"\nnameSuffix: \"-{suffix}\"\nresources:\n  - {}\n",
                base.display()
            ),
        )
        .expect("write the overlay");
        let applied = Self {
            admin: admin.to_owned(),
            dir,
            ns: ns.to_owned(),
            suffix,
        };
        let dir = applied.dir.0.display().to_string();
        let (ok, out, err) = kubectl(admin, &["apply", "-k", &dir]);
        assert!(
            ok,
            "kubectl apply -k deploy/kubernetes/{variant}: {err}{out}"
        );
        // Server-side validation and admission said nothing, PodSecurity's
        // `restricted` warning included.
        assert!(
            !err.contains("Warning") && !out.contains("Warning"),
            "kubectl apply warned: {err}{out}"
        );
        applied
    }

    /// `lookout-SUFFIX`, the name of every object.
    fn name(&self) -> String {
        format!("lookout-{}", self.suffix)
    }

    /// The `ServiceAccount`'s user name, as the apiserver tells it.
    fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.ns, self.name())
    }

    /// A token of the `ServiceAccount`.
    fn token(&self, rt: &tokio::runtime::Runtime) -> Token {
        rt.block_on(service_account_token(
            &self.admin,
            &self.ns,
            &self.name(),
            TOKEN_SECS,
        ))
    }

    /// Asserts that every one of `objects` (`KIND/NAME`, as `kubectl get -o
    /// name` says them) exists.
    fn assert_exist(&self, objects: &[String]) {
        let dir = self.dir.0.display().to_string();
        let there = kubectl_ok(&self.admin, &["get", "-k", &dir, "-o", "name"]);
        for object in objects {
            assert!(
                there.lines().any(|l| l == object),
                "{object} not in {there}"
            );
        }
    }

    /// A kubeconfig of the `ServiceAccount`'s token, in a temporary
    /// directory (removed with it).
    fn token_kubeconfig(&self, rt: &tokio::runtime::Runtime) -> (TempDir, PathBuf) {
        let dir = TempDir::new("deploy-k8s", "sa");
        let kubeconfig = token_kubeconfig(&self.admin, &self.token(rt), &dir.0);
        (dir, kubeconfig)
    }

    /// Waits (`SETTLE` at most) until the apiserver answers `answer` to whether
    /// the `ServiceAccount` may `verb` deployments in every namespace (the
    /// authorizer reads roles from a cache that follows the writes).
    fn await_can_i(&self, verb: &str, answer: &str) {
        let user = self.user();
        poll(SETTLE, std::time::Duration::from_millis(100), || {
            let (_, out, _) = kubectl(
                &self.admin,
                &[
                    "auth",
                    "can-i",
                    verb,
                    "deployments.apps",
                    "--all-namespaces",
                    "--as",
                    &user,
                ],
            );
            if out.trim() == answer {
                Ok(())
            } else {
                Err(format!(
                    "can-i {verb} deployments: still {out:?}, not {answer}"
                ))
            }
        });
    }

    /// Applies one more manifest (a role without a verb, the role again).
    fn apply_yaml(&self, yaml: &str) {
        let file = self.dir.0.join("extra.yaml");
        std::fs::write(&file, yaml).expect("write a manifest");
        kubectl_ok(&self.admin, &["apply", "-f", &file.display().to_string()]);
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        let dir = self.dir.0.display().to_string();
        let _ = kubectl(
            &self.admin,
            &["delete", "-k", &dir, "--ignore-not-found", "--wait=false"],
        );
    }
}

/// The `ClusterRole` `name` with `verbs` on what the shipped one grants.
fn cluster_role(name: &str, verbs: &[&str]) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {name}\n\
         rules:\n  - apiGroups: [\"apps\"]\n    resources: [\"deployments\", \"statefulsets\"]\n    \
         verbs: {verbs:?}\n"
    )
}

/// The testbed, its shared lock and a runtime for the fixture; `None`
/// without engines.
fn bed() -> Option<(PathBuf, engines::EngineLock, tokio::runtime::Runtime)> {
    let admin = k8s_util::require()?;
    let lock = engines::lock_engine("k8s", false).unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    Some((admin, lock, rt))
}

/// Reads `lookout`'s events until `id`'s are `kinds`, in order (other
/// instances' events, of other tests, are passed over), within `WAIT`
/// each.
fn expect_events(lookout: &Process, id: &str, kinds: &[&str]) {
    let out = lookout.out.as_ref().expect("stdout open");
    for kind in kinds {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = out
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {kind} of {id} within {WAIT:?}"));
            let e: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if e["instance"] == id {
                assert_eq!(e["kind"], *kind, "{e}");
                assert_eq!(e["origin"], "live", "{e}");
                break;
            }
        }
    }
}

/// The lifecycle every run must tell: created (1 replica), stopped (0),
/// started (2), removed.
fn lifecycle(rt: &tokio::runtime::Runtime, fixture: &Fixture, lookout: &Process, name: &str) {
    let id = fixture.id(Kind::Deployment, name);
    rt.block_on(fixture.create(Kind::Deployment, name, 1, &[("app", name)]));
    rt.block_on(fixture.scale(Kind::Deployment, name, 0));
    rt.block_on(fixture.scale(Kind::Deployment, name, 2));
    rt.block_on(fixture.delete(Kind::Deployment, name));
    expect_events(
        lookout,
        &id,
        &["created", "started", "stopped", "started", "removed"],
    );
}

/// `lookout k8s --json ARGS` with only `KUBECONFIG` of the environment
/// removed.
fn lookout(args: &[&str]) -> Process {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
    cmd.args(["k8s", "--json"])
        .args(args)
        .env_remove("KUBECONFIG");
    Process::start(cmd)
}

/// Waits for a `disconnected` status of attempt `attempt` or later; its
/// error.
fn disconnected(lookout: &mut Process, attempt: u64) -> String {
    let v = lookout.stderr("disconnected", |v| {
        v["status"] == "disconnected" && v["attempt"].as_u64() >= Some(attempt)
    });
    v["error"].as_str().expect("an error").to_owned()
}

/// The cluster-wide variant as shipped: applied by the admin, every object
/// really there; with the `ServiceAccount`'s token (its role has `list` and
/// `watch`, no `get`), `lookout` tells a Deployment's lifecycle as it does
/// with the admin's kubeconfig, side by side.
#[test]
fn cluster_wide_manifests_and_the_service_accounts_token() {
    if kubectl_or_skip("cluster_wide_manifests_and_the_service_accounts_token").is_none() {
        return;
    }
    let Some((admin, _lock, rt)) = bed() else {
        return;
    };
    let fixture = rt.block_on(Fixture::new(&admin));
    let applied = Applied::apply(&admin, "", &k8s_util::unique("lookout-deploy"));
    let name = applied.name();
    applied.assert_exist(&[
        format!("namespace/{}", applied.ns),
        format!("serviceaccount/{name}"),
        format!("clusterrole.rbac.authorization.k8s.io/{name}"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{name}"),
        format!("deployment.apps/{name}"),
        format!("service/{name}"),
    ]);
    // Exactly list and watch, as the apiserver decides for the account.
    for (verb, allowed) in [
        ("list", "yes"),
        ("watch", "yes"),
        ("get", "no"),
        ("delete", "no"),
    ] {
        applied.await_can_i(verb, allowed);
    }

    let (_dir, kubeconfig) = applied.token_kubeconfig(&rt);
    let sa = kubeconfig.display().to_string();
    let admins = admin.display().to_string();
    let mut as_sa = lookout(&["--kubeconfig", &sa, "--kind", "deployment"]);
    let mut as_admin = lookout(&["--kubeconfig", &admins, "--kind", "deployment"]);
    as_sa.connected();
    as_admin.connected();
    lifecycle(&rt, &fixture, &as_sa, "web");
    // The admin's run told the same, in the same order.
    expect_events(
        &as_admin,
        &fixture.id(Kind::Deployment, "web"),
        &["created", "started", "stopped", "started", "removed"],
    );
    assert!(
        as_sa
            .stderr_seen
            .iter()
            .all(|l| !l.contains("disconnected")),
        "{:?}",
        as_sa.stderr_seen
    );
}

/// Labels `ns` to warn of what the `restricted` Pod Security Standard
/// forbids, and waits (`SETTLE` at most) until the apiserver does so for a
/// Deployment that breaks it (a server-side dry run): then a manifest
/// applied there without a warning meets the standard.
fn warn_restricted(admin: &Path, ns: &str) {
    kubectl_ok(
        admin,
        &[
            "label",
            "namespace",
            ns,
            "pod-security.kubernetes.io/warn=restricted",
        ],
    );
    poll(SETTLE, std::time::Duration::from_millis(100), || {
        let (_, _, err) = kubectl(
            admin,
            &[
                "-n",
                ns,
                "create",
                "deployment",
                "canary",
                "--image=busybox",
                "--dry-run=server",
            ],
        );
        if err.contains("would violate PodSecurity \"restricted") {
            Ok(())
        } else {
            Err(format!(
                "the apiserver does not warn of a root container in {ns}: {err}"
            ))
        }
    });
}

/// The namespaced variant: a Role in the namespace only; `lookout
/// --namespace NS` with its token tells the lifecycle; the same token
/// cluster-wide is refused, in one line naming the cluster scope.
#[test]
fn namespaced_manifests_watch_their_namespace_only() {
    if kubectl_or_skip("namespaced_manifests_watch_their_namespace_only").is_none() {
        return;
    }
    let Some((admin, _lock, rt)) = bed() else {
        return;
    };
    let fixture = rt.block_on(Fixture::new(&admin));
    warn_restricted(&admin, &fixture.ns);
    let applied = Applied::apply(&admin, "namespaced", &fixture.ns);
    applied.assert_exist(&[
        format!("role.rbac.authorization.k8s.io/{}", applied.name()),
        format!("rolebinding.rbac.authorization.k8s.io/{}", applied.name()),
    ]);
    let (_dir, kubeconfig) = applied.token_kubeconfig(&rt);
    let sa = kubeconfig.display().to_string();

    let mut everywhere = lookout(&["--kubeconfig", &sa, "--kind", "deployment"]);
    let error = disconnected(&mut everywhere, 1);
    let forbidden = format!(
        "deployments.apps is forbidden: User \"{}\" cannot list resource \"deployments\" in API \
         group \"apps\" at the cluster scope",
        applied.user()
    );
    assert!(error.ends_with(&forbidden), "{error}");
    assert!(
        !error.contains('\n') && !error.contains("Status {"),
        "{error}"
    );
    drop(everywhere);

    let mut lookout = lookout(&[
        "--kubeconfig",
        &sa,
        "--kind",
        "deployment",
        "--namespace",
        &fixture.ns,
    ]);
    lookout.connected();
    lifecycle(&rt, &fixture, &lookout, "web");
}

/// Least privilege for real: with each verb lookout needs taken from the
/// role, lookout says so on stderr — one `disconnected` line ending with
/// the apiserver's message, the one `kubectl` prints — keeps retrying, and
/// tells the Deployment once the verb is granted again.
#[test]
fn a_missing_verb_is_one_line_and_granting_it_recovers() {
    if kubectl_or_skip("a_missing_verb_is_one_line_and_granting_it_recovers").is_none() {
        return;
    }
    let Some((admin, _lock, rt)) = bed() else {
        return;
    };
    let fixture = rt.block_on(Fixture::new(&admin));
    let applied = Applied::apply(&admin, "", &k8s_util::unique("lookout-deploy"));
    let role = applied.name();
    let (_dir, kubeconfig) = applied.token_kubeconfig(&rt);
    let sa = kubeconfig.display().to_string();
    for (n, (missing, kept)) in [("list", "watch"), ("watch", "list")]
        .into_iter()
        .enumerate()
    {
        applied.apply_yaml(&cluster_role(&role, &[kept]));
        let forbidden = format!(
            "deployments.apps is forbidden: User \"{}\" cannot {missing} resource \"deployments\" \
             in API group \"apps\" at the cluster scope",
            applied.user()
        );
        applied.await_can_i(missing, "no");
        // Side by side: what kubectl prints for the same token (`get`
        // lists, `get -w` lists then watches).
        let (ok, _, err) = kubectl(
            &kubeconfig,
            &["get", "deployments", "--all-namespaces", "--watch"],
        );
        assert!(
            !ok,
            "kubectl get -w deployments with the role lacking {missing}"
        );
        assert_eq!(
            err.lines().last().map(str::trim),
            Some(format!("Error from server (Forbidden): {forbidden}").as_str())
        );
        // The JSON status and the text one, each one line.
        let mut json = lookout(&["--kubeconfig", &sa, "--kind", "deployment"]);
        let mut text = Process::start({
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
            cmd.args(["k8s", "--kubeconfig", &sa, "--kind", "deployment"])
                .env_remove("KUBECONFIG");
            cmd
        });
        let error = disconnected(&mut json, 1);
        assert_eq!(
            error,
            format!("cannot connect to the engine: watching deployments failed: {forbidden}"),
            "without {missing}"
        );
        let deadline = Instant::now() + WAIT;
        let line = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = text
                .err
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no status line without {missing} within {WAIT:?}"));
            if line.starts_with("lookout: k8s: disconnected") {
                break line;
            }
        };
        assert!(
            line.starts_with(&format!(
                "lookout: k8s: disconnected: {error} (attempt 1, retrying in "
            )),
            "{line}"
        );
        // Still running, still trying: no stall, no exit.
        let again = disconnected(&mut json, 2);
        assert_eq!(again, error);
        assert!(
            json.child.try_wait().expect("try_wait").is_none(),
            "lookout exited"
        );
        assert!(
            text.child.try_wait().expect("try_wait").is_none(),
            "lookout exited"
        );
        drop(text);
        // The verb granted again: it connects and tells.
        applied.apply_yaml(&cluster_role(&role, &["list", "watch"]));
        applied.await_can_i(missing, "yes");
        json.connected();
        let name = format!("web{n}");
        rt.block_on(fixture.create(Kind::Deployment, &name, 1, &[]));
        rt.block_on(fixture.delete(Kind::Deployment, &name));
        expect_events(
            &json,
            &fixture.id(Kind::Deployment, &name),
            &["created", "started", "removed"],
        );
    }
}

/// Whether this process may make a mount namespace (root, `unshare`),
/// else `None`.
fn unshare_or_skip(test: &str) -> Option<()> {
    runs_or_skip(
        test,
        &["unshare", "--mount", "--propagation", "private", "true"],
        "a mount namespace of its own is needed (root, util-linux)",
    )
}

/// In a pod: no kubeconfig anywhere, `KUBERNETES_SERVICE_HOST`/`PORT` and
/// the `ServiceAccount`'s files under /var/run/secrets/kubernetes.io — found
/// as kube finds them. Run for real in a mount namespace of its own whose
/// /run (/var/run links to it) is a tmpfs holding them; the host's /run is
/// untouched.
#[test]
fn in_cluster_configuration_is_found_as_kube_does() {
    let test = "in_cluster_configuration_is_found_as_kube_does";
    if kubectl_or_skip(test).is_none() || unshare_or_skip(test).is_none() {
        return;
    }
    let Some((admin, _lock, rt)) = bed() else {
        return;
    };
    let fixture = rt.block_on(Fixture::new(&admin));
    let applied = Applied::apply(&admin, "", &k8s_util::unique("lookout-deploy"));
    let files = TempDir::new("deploy-k8s", "incluster");
    let secrets = files.0.join("serviceaccount");
    std::fs::create_dir_all(&secrets).expect("a secrets dir");
    let token = applied.token(&rt);
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(secrets.join("token"))
            .expect("the token file");
        f.write_all(token.secret().as_bytes())
            .expect("write the token");
    }
    std::fs::write(
        secrets.join("ca.crt"),
        lookout_e2e::k8s_access::cluster_ca_pem(&admin),
    )
    .expect("ca.crt");
    std::fs::write(secrets.join("namespace"), &applied.ns).expect("namespace");
    let home = files.0.join("home");
    std::fs::create_dir_all(&home).expect("an empty HOME");
    let (_, port) = k8s_util::apiserver(&admin);
    assert_eq!(
        Path::new("/var/run").canonicalize().ok().as_deref(),
        Some(Path::new("/run")),
        "/var/run is /run on Debian: the tmpfs goes over /run"
    );
    let host_token = Path::new("/run/secrets/kubernetes.io/serviceaccount/token");
    let host_had_token = host_token.exists();
    let pod_env = |cmd: &mut Command| {
        cmd.env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", &home)
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", port.to_string());
    };
    if !host_had_token {
        // The control: the same environment without the files is no
        // configuration at all (the test can fail).
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
        cmd.args(["k8s", "--json", "--kind", "deployment"]);
        pod_env(&mut cmd);
        let mut without = Process::start(cmd);
        let error = disconnected(&mut without, 1);
        assert!(
            error.starts_with("cannot connect to the engine: cannot infer a cluster configuration"),
            "{error}"
        );
    }
    // unshare execs sh in the new mount namespace; sh mounts and execs
    // lookout: the child is lookout itself.
    let script = "set -e; mount -t tmpfs -o mode=0755 tmpfs /run; \
                  mkdir -p /run/secrets/kubernetes.io; \
                  cp -r \"$1\" /run/secrets/kubernetes.io/serviceaccount; \
                  shift; exec \"$@\"";
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(&secrets)
    .arg(env!("CARGO_BIN_EXE_lookout"))
    .args(["k8s", "--json", "--kind", "deployment"]);
    pod_env(&mut cmd);
    let mut lookout = Process::start(cmd);
    // No kubeconfig anywhere: connected means in-cluster (kube builds
    // https://127.0.0.1:PORT/ from the environment and reads the token and
    // CA from the files).
    lookout.connected();
    lifecycle(&rt, &fixture, &lookout, "web");
    // The host's /run never saw the files.
    assert_eq!(
        host_token.exists(),
        host_had_token,
        "the tmpfs stayed in its namespace"
    );
}

/// Polls `/healthz` (within `WAIT`) until it answers `code` with
/// `status` (the served store follows the stream that printed it); its
/// JSON.
fn await_health(addr: &str, code: u16, status: &str) -> Value {
    poll(WAIT, std::time::Duration::from_millis(50), || {
        let (got, body) = http_get(addr, "/healthz");
        let health: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        if got == code && health["status"] == status {
            Ok(health)
        } else {
            Err(format!("/healthz: {got} {body}, not {code} {status}"))
        }
    })
}

/// The probes of `base/deployment.yaml` answer as the manifest expects:
/// readiness (`/healthz`) is 503 with the one-line status while a verb is
/// missing and 200 once it is granted; liveness (`/`) is 200 throughout,
/// so the kubelet never restarts a lookout that only waits for its role.
#[test]
fn the_probes_answer_as_the_deployment_expects() {
    if kubectl_or_skip("the_probes_answer_as_the_deployment_expects").is_none() {
        return;
    }
    let manifest = std::fs::read_to_string(manifests().join("base/deployment.yaml"))
        .expect("base/deployment.yaml");
    let probe_path = |probe: &str| {
        manifest
            .split_once(probe)
            .and_then(|(_, rest)| rest.lines().find_map(|l| l.trim().strip_prefix("path: ")))
            .map(str::to_owned)
    };
    assert_eq!(probe_path("readinessProbe:").as_deref(), Some("/healthz"));
    assert_eq!(probe_path("livenessProbe:").as_deref(), Some("/"));

    let Some((admin, _lock, rt)) = bed() else {
        return;
    };
    let applied = Applied::apply(&admin, "", &k8s_util::unique("lookout-deploy"));
    applied.apply_yaml(&cluster_role(&applied.name(), &["list"]));
    applied.await_can_i("watch", "no");
    let (_dir, kubeconfig) = applied.token_kubeconfig(&rt);
    let sa = kubeconfig.display().to_string();
    let mut lookout = lookout(&[
        "--kubeconfig",
        &sa,
        "--kind",
        "deployment",
        "--serve",
        "127.0.0.1:0",
    ]);
    let serving = lookout.stderr("serving", |v| v["status"] == "serving");
    let addr = serving["addr"].as_str().expect("an address").to_owned();
    let error = disconnected(&mut lookout, 1);
    let health = await_health(&addr, 503, "disconnected");
    assert_eq!(health["error"], error.as_str(), "{health}");
    let (code, _) = http_get(&addr, "/");
    assert_eq!(code, 200, "liveness while disconnected");

    applied.apply_yaml(&cluster_role(&applied.name(), &["list", "watch"]));
    applied.await_can_i("watch", "yes");
    lookout.connected();
    await_health(&addr, 200, "connected");
    let (code, _) = http_get(&addr, "/");
    assert_eq!(code, 200, "liveness when connected");
}
