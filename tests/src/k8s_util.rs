//! Helpers of the Kubernetes tests (`tests/tests/k8s.rs`): the testbed gate,
//! a fixture that creates workloads in a namespace of its own, a recorder of
//! what a watch yields, a TCP relay that can refuse connections, a counter of
//! this process's connections to the apiserver, and a tiny fake apiserver
//! speaking the list/watch wire format for what a real one cannot be made to
//! do on demand.
//!
//! The relay and the fake run on a thread and a tokio runtime of their own,
//! so a test's runtime counts only the watch's tasks.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lookout_core::{
    EventKind, InstanceEvent, Item, Origin, ReconnectPolicy, Status, Watch, WatchConfig,
};
use lookout_k8s::{K8sConfig, K8sDial, Kind};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_stream::StreamExt;

use crate::engines;

/// How long one API call of the fixture may take.
const CALL: Duration = Duration::from_secs(20);

// ------------------------------------------------------------------ the gate

/// The testbed's kubeconfig, once the testbed answers (a testbed that is
/// down is brought up); `None` when the run has no engines (the test
/// returns, saying so: see [`engines::skips`]).
///
/// # Panics
/// When the testbed is not up and cannot be brought up.
#[must_use]
pub fn require() -> Option<PathBuf> {
    if engines::skips("k8s") {
        return None;
    }
    if let Err(e) = engines::k8s_status() {
        engines::k8s_up().unwrap_or_else(|up| {
            panic!("k8s: the testbed is down ({e}) and does not come up: {up}")
        });
    }
    Some(engines::k8s_kubeconfig().unwrap_or_else(|e| panic!("k8s: {e}")))
}

/// Checks that `kubeconfig` names the apiserver of the testbed that
/// [`engines`] controls (the one under this workspace's
/// `target/engines/k8s`): a test that kills, stops, restarts or compacts it
/// must watch that one. (In a second worktree, a kubeconfig of another
/// worktree's testbed — `LOOKOUT_KUBECONFIG` — would have such a test break
/// one apiserver and watch another.)
///
/// # Panics
/// When they differ, or the testbed's state cannot be read.
pub fn require_controlled(kubeconfig: &Path) {
    let dir = engines::k8s_dir().unwrap_or_else(|e| panic!("k8s: {e}"));
    let state = dir.join("state.json");
    let text = std::fs::read_to_string(&state)
        .unwrap_or_else(|e| panic!("k8s: cannot read {}: {e}", state.display()));
    let controlled: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("k8s: {} is no JSON: {e}", state.display()));
    let controlled = controlled["apiserver_url"]
        .as_str()
        .unwrap_or_else(|| panic!("k8s: no apiserver_url in {}", state.display()))
        .trim_end_matches('/');
    let (watched, _) = apiserver(kubeconfig);
    assert_eq!(
        watched.trim_end_matches('/'),
        controlled,
        "k8s: the kubeconfig {} names another apiserver than the testbed this workspace \
         controls ({}): this test would disrupt one and watch the other. Point \
         LOOKOUT_KUBECONFIG at {}",
        kubeconfig.display(),
        dir.display(),
        dir.join("kubeconfig").display(),
    );
}

/// The apiserver's URL and port, from the kubeconfig's current cluster.
///
/// # Panics
/// When the kubeconfig names no `https://127.0.0.1:PORT` server.
pub fn apiserver(kubeconfig: &Path) -> (String, u16) {
    let text = std::fs::read_to_string(kubeconfig)
        .unwrap_or_else(|e| panic!("k8s: cannot read {}: {e}", kubeconfig.display()));
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .map_or_else(
            || panic!("k8s: no server in {}", kubeconfig.display()),
            |s| s.trim().trim_matches('"').to_owned(),
        );
    let port = server
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("k8s: no port in server {server}"));
    (server, port)
}

/// A file removed on drop.
#[derive(Debug)]
pub struct TempFile(PathBuf);

impl TempFile {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A copy of `kubeconfig` (in the temp dir, removed on drop) whose server is
/// `https://127.0.0.1:PORT` (a relay): the testbed's serving certificate holds
/// the IP, so TLS still verifies.
///
/// # Panics
/// When the file cannot be read or written.
pub fn kubeconfig_via(kubeconfig: &Path, port: u16) -> TempFile {
    let (server, _) = apiserver(kubeconfig);
    let text = std::fs::read_to_string(kubeconfig).expect("k8s: read kubeconfig");
    let relayed = text.replace(&server, &format!("https://127.0.0.1:{port}"));
    let path = std::env::temp_dir().join(format!(
        "lookout-kubeconfig-relay-{}-{port}",
        std::process::id()
    ));
    std::fs::write(&path, relayed).expect("k8s: write relayed kubeconfig");
    TempFile(path)
}

/// A name no other test run uses: `PREFIX-PID-NANOS`.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{nanos:x}{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Logs to the test's output when `RUST_LOG` is set (e.g.
/// `RUST_LOG=lookout_k8s=debug,lookout_core=debug,kube_runtime=debug`).
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// Short timeouts for tests: probe after 1 s of silence, 1 s to answer, quick
/// retries without jitter; no periodic or consumer-lag relist (a test's
/// thread blocks in apiserver commands between polls).
pub fn fast_watch_config() -> WatchConfig {
    WatchConfig::default()
        .reconnect(
            ReconnectPolicy::default()
                .initial_delay(Duration::from_millis(100))
                .max_delay(Duration::from_millis(500))
                .jitter(false),
        )
        .dial_timeout(Duration::from_secs(5))
        .probe_after(Duration::from_secs(1))
        .probe_timeout(Duration::from_secs(1))
        .resync_every(None)
        .resync_after_lag(None)
}

/// The kube config of a kubeconfig file (with rustls' provider installed).
///
/// # Panics
/// When the kubeconfig cannot be used.
async fn config(kubeconfig: &Path) -> kube::Config {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = lookout_transport::crypto_provider().install_default();
    }
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("k8s: kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("k8s: config")
}

/// Builds a kube client from a kubeconfig file.
///
/// # Panics
/// When the kubeconfig cannot be used.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let config = config(kubeconfig).await;
    kube::Client::try_from(config).expect("k8s: client")
}

// ------------------------------------------------------------------ the fixture

/// Workloads in a namespace of this test's own. No controller runs on the
/// testbed, so the namespace would never finalize: every object is deleted
/// explicitly, also when the test panics (on drop, from a thread of its own).
pub struct Fixture {
    kubeconfig: PathBuf,
    client: kube::Client,
    /// The namespace.
    pub ns: String,
    /// A label value unique to this fixture (`lookout-e2e-run=RUN`).
    pub run: String,
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixture")
            .field("ns", &self.ns)
            .finish_non_exhaustive()
    }
}

/// The label every fixture object carries.
pub const RUN_LABEL: &str = "lookout-e2e-run";

impl Fixture {
    /// Creates the namespace.
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn new(kubeconfig: &Path) -> Self {
        let client = client(kubeconfig).await;
        let ns = unique("lookout-e2e");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let body: Namespace =
            serde_json::from_value(json!({ "metadata": { "name": ns } })).expect("namespace");
        tokio::time::timeout(CALL, namespaces.create(&PostParams::default(), &body))
            .await
            .expect("k8s: create namespace in time")
            .unwrap_or_else(|e| panic!("k8s: create namespace {ns}: {e}"));
        Self {
            kubeconfig: kubeconfig.to_path_buf(),
            client,
            run: ns.clone(),
            ns,
        }
    }

    /// A fresh client (after an apiserver restart the pooled connections are dead).
    pub async fn reconnect(&mut self) {
        self.client = client(&self.kubeconfig).await;
    }

    /// The id lookout gives `name` of `kind` in this namespace.
    pub fn id(&self, kind: Kind, name: &str) -> String {
        format!("{kind}/{}/{name}", self.ns)
    }

    /// Creates a `Deployment` or `StatefulSet` with `replicas` and `labels` (plus
    /// [`RUN_LABEL`]).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn create(&self, kind: Kind, name: &str, replicas: i32, labels: &[(&str, &str)]) {
        let mut all: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        all.insert(RUN_LABEL.into(), json!(self.run));
        let mut spec = json!({
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "main", "image": "busybox" }] }
            }
        });
        if kind == Kind::StatefulSet {
            spec["serviceName"] = json!(name);
        }
        let body = json!({
            "metadata": { "name": name, "namespace": self.ns, "labels": all },
            "spec": spec,
        });
        let pp = PostParams::default();
        let created = match kind {
            Kind::Deployment => {
                let obj: Deployment = serde_json::from_value(body).expect("deployment");
                call(self.deployments().create(&pp, &obj)).await.map(drop)
            }
            Kind::StatefulSet => {
                let obj: StatefulSet = serde_json::from_value(body).expect("statefulset");
                call(self.statefulsets().create(&pp, &obj)).await.map(drop)
            }
            other => panic!("k8s fixture: no {other} support"),
        };
        created.unwrap_or_else(|e| panic!("k8s: create {kind} {name}: {e}"));
    }

    /// Sets `spec.replicas`.
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn scale(&self, kind: Kind, name: &str, replicas: i32) {
        self.patch(kind, name, json!({ "spec": { "replicas": replicas } }))
            .await;
    }

    /// Sets one label (a change that is no lookout event).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn label(&self, kind: Kind, name: &str, key: &str, value: &str) {
        self.patch(
            kind,
            name,
            json!({ "metadata": { "labels": { key: value } } }),
        )
        .await;
    }

    async fn patch(&self, kind: Kind, name: &str, merge: serde_json::Value) {
        let what = merge.to_string();
        let patch = Patch::Merge(merge);
        let pp = PatchParams::default();
        let done = match kind {
            Kind::Deployment => call(self.deployments().patch(name, &pp, &patch))
                .await
                .map(drop),
            Kind::StatefulSet => call(self.statefulsets().patch(name, &pp, &patch))
                .await
                .map(drop),
            other => panic!("k8s fixture: no {other} support"),
        };
        done.unwrap_or_else(|e| panic!("k8s: patch {kind} {name} with {what}: {e}"));
    }

    /// Writes `status` (merged into the object's) through the status
    /// subresource, as a controller would (no controller runs on the
    /// testbed); returns the object's `resourceVersion` after it (the same
    /// as before when the write changed nothing: the apiserver then sends
    /// no watch event).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn set_status(&self, kind: Kind, name: &str, status: serde_json::Value) -> String {
        let what = status.to_string();
        let patch = Patch::Merge(json!({ "status": status }));
        let pp = PatchParams::default();
        let version = match kind {
            Kind::Deployment => call(self.deployments().patch_status(name, &pp, &patch))
                .await
                .map(|d| d.metadata.resource_version),
            Kind::StatefulSet => call(self.statefulsets().patch_status(name, &pp, &patch))
                .await
                .map(|s| s.metadata.resource_version),
            other => panic!("k8s fixture: no {other} support"),
        };
        version
            .unwrap_or_else(|e| panic!("k8s: patch the status of {kind} {name} with {what}: {e}"))
            .unwrap_or_default()
    }

    /// The object's `metadata.generation` (which a change of its spec bumps).
    ///
    /// # Panics
    /// When the apiserver refuses, or the object has none.
    pub async fn generation(&self, kind: Kind, name: &str) -> i64 {
        let generation = match kind {
            Kind::Deployment => call(self.deployments().get(name))
                .await
                .map(|d| d.metadata.generation),
            Kind::StatefulSet => call(self.statefulsets().get(name))
                .await
                .map(|s| s.metadata.generation),
            other => panic!("k8s fixture: no {other} support"),
        };
        generation
            .unwrap_or_else(|e| panic!("k8s: get {kind} {name}: {e}"))
            .unwrap_or_else(|| panic!("k8s: {kind} {name} has no generation"))
    }

    /// Deletes one object.
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn delete(&self, kind: Kind, name: &str) {
        let dp = DeleteParams::default();
        let done = match kind {
            Kind::Deployment => call(self.deployments().delete(name, &dp)).await.map(drop),
            Kind::StatefulSet => call(self.statefulsets().delete(name, &dp)).await.map(drop),
            other => panic!("k8s fixture: no {other} support"),
        };
        done.unwrap_or_else(|e| panic!("k8s: delete {kind} {name}: {e}"));
    }

    /// Writes a `ConfigMap` (moves etcd's revision on without touching workloads).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn bump(&self, name: &str) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": self.ns },
            "data": { "at": format!("{:?}", SystemTime::now()) }
        }))
        .expect("configmap");
        call(api.create(&PostParams::default(), &cm))
            .await
            .unwrap_or_else(|e| panic!("k8s: create configmap {name}: {e}"));
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn statefulsets(&self) -> Api<StatefulSet> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
}

async fn call<T>(fut: impl Future<Output = Result<T, kube::Error>>) -> Result<T, String> {
    match tokio::time::timeout(CALL, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {CALL:?}")),
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let kubeconfig = self.kubeconfig.clone();
        let ns = self.ns.clone();
        // Its own thread and runtime: drop may run inside the test's runtime.
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let work = async {
                    let client = client(&kubeconfig).await;
                    let lp = kube::api::ListParams::default();
                    let dp = DeleteParams::default();
                    let d: Api<Deployment> = Api::namespaced(client.clone(), &ns);
                    let s: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
                    let c: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
                    let _ = d.delete_collection(&dp, &lp).await;
                    let _ = s.delete_collection(&dp, &lp).await;
                    let _ = c.delete_collection(&dp, &lp).await;
                    let n: Api<Namespace> = Api::all(client);
                    let _ = n.delete(&ns, &dp).await;
                };
                let _ = tokio::time::timeout(Duration::from_secs(30), work).await;
            });
        });
        let _ = cleanup.join();
    }
}

// ------------------------------------------------------------------ the recorder

/// Pumps a watch and remembers what it yielded.
pub struct Recorder {
    watch: Watch<K8sDial>,
    started: Instant,
    /// Every instance event, in order.
    pub events: Vec<InstanceEvent>,
    /// Every status, with when it came.
    pub statuses: Vec<(Instant, Status)>,
    /// How many events had come at each `Connected`, in order.
    pub events_at_connected: Vec<usize>,
    log: String,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.log)
    }
}

impl Recorder {
    /// Starts watching (nothing happens until pumped).
    ///
    /// # Panics
    /// When `config` is refused.
    pub fn new(config: K8sConfig) -> Self {
        Self::pump(lookout_k8s::watch(config).expect("valid K8sConfig"))
    }

    /// Starts watching with a clone of `client` on every dial.
    ///
    /// # Panics
    /// When `config` is refused.
    pub fn with_client(config: K8sConfig, client: &kube::Client) -> Self {
        let client = client.clone();
        Self::pump(
            lookout_k8s::watch_with_client(config, move || client.clone())
                .expect("valid K8sConfig"),
        )
    }

    /// Pumps `watch`.
    pub fn pump(watch: Watch<K8sDial>) -> Self {
        init_tracing();
        Self {
            watch,
            started: Instant::now(),
            events: Vec::new(),
            statuses: Vec::new(),
            events_at_connected: Vec::new(),
            log: String::new(),
        }
    }

    /// Pumps until `done` holds, at most `timeout`.
    ///
    /// # Panics
    /// On timeout, with everything seen so far.
    pub async fn until(&mut self, what: &str, timeout: Duration, done: impl Fn(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done(self) {
            match tokio::time::timeout_at(deadline, self.watch.next()).await {
                Ok(Some(item)) => self.record(item),
                Ok(None) => panic!("the watch ended; seen:\n{}", self.log),
                Err(tokio::time::error::Elapsed { .. }) => {
                    panic!("{what}: not within {timeout:?}; seen:\n{}", self.log)
                }
            }
        }
    }

    /// Pumps for `span`, however much comes; returns how many items came.
    ///
    /// # Panics
    /// When the watch ends.
    pub async fn until_quiet(&mut self, span: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + span;
        let mut n = 0;
        while let Ok(next) = tokio::time::timeout_at(deadline, self.watch.next()).await {
            match next {
                Some(item) => {
                    self.record(item);
                    n += 1;
                }
                None => panic!("the watch ended; seen:\n{}", self.log),
            }
        }
        n
    }

    fn record(&mut self, item: Item) {
        let t = self.started.elapsed();
        match item {
            Item::Event(e) => {
                let _ = writeln!(self.log, "{t:>10.3?} {} {} ({})", e.id, e.kind, e.origin);
                self.events.push(e);
            }
            Item::Status(s) => {
                let _ = writeln!(self.log, "{t:>10.3?} {s:?}");
                if matches!(s, Status::Connected { .. }) {
                    self.events_at_connected.push(self.events.len());
                }
                self.statuses.push((Instant::now(), s));
            }
        }
    }

    /// The events of one instance: (kind, origin).
    pub fn of(&self, id: &str) -> Vec<(EventKind, Origin)> {
        self.events
            .iter()
            .filter(|e| e.id.as_str() == id)
            .map(|e| (e.kind, e.origin))
            .collect()
    }

    /// How many `Connected` statuses came.
    pub fn connected(&self) -> usize {
        self.statuses
            .iter()
            .filter(|(_, s)| matches!(s, Status::Connected { .. }))
            .count()
    }

    /// How many `Disconnected` statuses came.
    pub fn disconnected(&self) -> usize {
        self.statuses
            .iter()
            .filter(|(_, s)| matches!(s, Status::Disconnected { .. }))
            .count()
    }

    /// Everything seen so far, one line each.
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The watch, to drop it.
    pub fn into_watch(self) -> Watch<K8sDial> {
        self.watch
    }
}

// ------------------------------------------------------------------ connections

/// The TCP connections of this process (by socket inode) that are
/// established with remote port `port`, as `(local port, remote port)`.
pub fn my_connections_to(port: u16) -> Vec<(u16, u16)> {
    let mut inodes = std::collections::HashSet::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for fd in dir.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                let t = target.to_string_lossy();
                if let Some(inode) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                    inodes.insert(inode.to_owned());
                }
            }
        }
    }
    tcp_table()
        .into_iter()
        .filter(|c| c.state == ESTABLISHED && c.remote == port && inodes.contains(&c.inode))
        .map(|c| (c.local, c.remote))
        .collect()
}

/// Whether any established TCP connection (on either end, any process) runs
/// between local port `a` and remote port `b`.
pub fn established(a: u16, b: u16) -> bool {
    tcp_table().iter().any(|c| {
        c.state == ESTABLISHED && ((c.local, c.remote) == (a, b) || (c.local, c.remote) == (b, a))
    })
}

const ESTABLISHED: u8 = 1;

struct TcpEntry {
    local: u16,
    remote: u16,
    state: u8,
    inode: String,
}

fn tcp_table() -> Vec<TcpEntry> {
    let mut out = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let port = |addr: &str| {
                addr.rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
            };
            let (Some(local), Some(remote), Ok(state)) =
                (port(f[1]), port(f[2]), u8::from_str_radix(f[3], 16))
            else {
                continue;
            };
            out.push(TcpEntry {
                local,
                remote,
                state,
                inode: f[9].to_owned(),
            });
        }
    }
    out
}

// ------------------------------------------------------------------ servers

/// A TCP server on `127.0.0.1:PORT` with a thread and a tokio runtime of its
/// own; each accepted connection is served by a task. Dropping it stops the
/// runtime, which closes every connection.
#[derive(Debug)]
struct Background {
    port: u16,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    fn start<F, Fut>(what: &'static str, serve: F) -> Self
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("{what}: bind: {e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("{what}: nonblocking: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{what}: addr: {e}"))
            .port();
        let (shutdown, mut shutdown_rx) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("{what}: runtime: {e}"));
            rt.block_on(async move {
                let listener =
                    TcpListener::from_std(listener).unwrap_or_else(|e| panic!("{what}: {e}"));
                loop {
                    tokio::select! {
                        _ = &mut shutdown_rx => break,
                        accepted = listener.accept() => {
                            if let Ok((conn, _)) = accepted {
                                tokio::spawn(serve(conn));
                            }
                        }
                    }
                }
            });
        });
        Self {
            port,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ------------------------------------------------------------------ the relay

/// A TCP relay from `127.0.0.1:PORT` to the apiserver that can refuse new
/// connections (accept, then close at once) to keep a watch from redialing,
/// cut the open ones, and counts the bytes each way (TLS records included:
/// what crosses the wire).
#[derive(Debug)]
pub struct Relay {
    server: Background,
    refuse: Arc<AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
    bytes: Arc<RelayBytes>,
}

/// The bytes a relay carried.
#[derive(Debug, Default)]
struct RelayBytes {
    /// From the apiserver to the client.
    down: AtomicU64,
    /// From the client to the apiserver.
    up: AtomicU64,
}

impl Relay {
    /// Starts relaying to `127.0.0.1:target`.
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn start(target: u16) -> Self {
        let refuse = Arc::new(AtomicBool::new(false));
        let refusing = Arc::clone(&refuse);
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let bytes = Arc::new(RelayBytes::default());
        let counted = Arc::clone(&bytes);
        let server = Background::start("relay", move |inbound| {
            let refused = refusing.load(Ordering::SeqCst);
            let mut cuts = cuts.clone();
            let bytes = Arc::clone(&counted);
            async move {
                if refused {
                    return;
                }
                cuts.mark_unchanged();
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)).await else {
                    return;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                let up = pipe(ri, wo, &bytes.up);
                let down = pipe(ro, wi, &bytes.down);
                tokio::select! {
                    _ = async { tokio::join!(up, down) } => {}
                    _ = cuts.changed() => {}
                }
            }
        });
        Self {
            server,
            refuse,
            cut,
            bytes,
        }
    }

    /// The relay's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.server.port
    }

    /// Refuse (`true`) or relay (`false`) new connections; open ones go on.
    pub fn refuse(&self, on: bool) {
        self.refuse.store(on, Ordering::SeqCst);
    }

    /// Closes every open connection (both ends, at once, without a TLS
    /// close): as a network failure or an apiserver restart looks.
    pub fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// Bytes relayed so far from the apiserver to the client.
    pub fn bytes_down(&self) -> u64 {
        self.bytes.down.load(Ordering::SeqCst)
    }

    /// Bytes relayed so far from the client to the apiserver.
    pub fn bytes_up(&self) -> u64 {
        self.bytes.up.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to` until either ends, counting the bytes.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    count: &AtomicU64,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                count.fetch_add(n as u64, Ordering::SeqCst);
                if to.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

// ------------------------------------------------------------------ request counting

/// The requests a client sent, as the apiserver's metrics name their verbs.
#[derive(Clone, Debug, Default)]
pub struct Requests(Arc<Mutex<Vec<Sent>>>);

/// One request a client sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// `LIST`, `WATCH`, `GET`, `POST`, … (`LIST`/`WATCH`: a `GET` of a
    /// collection, with `watch=true` for a watch).
    pub verb: String,
    /// The last segment of a collection's path (`deployments`), else the path.
    pub resource: String,
    /// The `resourceVersion` parameter, if any.
    pub resource_version: Option<String>,
    /// Whether it asked for `sendInitialEvents`.
    pub initial_events: bool,
    /// The response's status, once it came (`None`: it failed before one,
    /// e.g. on a connection that was cut, or is still pending).
    pub status: Option<u16>,
}

impl Requests {
    /// Every request so far.
    pub fn all(&self) -> Vec<Sent> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests of `verb` got a response from the apiserver.
    pub fn answered(&self, verb: &str) -> usize {
        self.all()
            .iter()
            .filter(|s| s.verb == verb && s.status.is_some())
            .count()
    }

    /// How many requests of `verb` on `resource` (any resource: `None`).
    pub fn count(&self, verb: &str, resource: Option<&str>) -> usize {
        self.all()
            .iter()
            .filter(|s| s.verb == verb && resource.is_none_or(|r| s.resource == r))
            .count()
    }

    /// The counts by verb, e.g. `LIST 2, WATCH 7`.
    pub fn summary(&self) -> String {
        let mut by: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
        for s in self.all() {
            *by.entry(s.verb).or_default() += 1;
        }
        by.iter()
            .map(|(v, n)| format!("{v} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Records `req`; returns its index, for [`Requests::answer`].
    fn record<B>(&self, req: &http::Request<B>) -> usize {
        let uri = req.uri();
        let query: HashMap<String, String> = uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let path = uri.path();
        let last = path.rsplit('/').next().unwrap_or("");
        let collection = [
            "deployments",
            "statefulsets",
            "daemonsets",
            "clusters",
            "widgets",
            "configmaps",
            "namespaces",
        ]
        .contains(&last);
        let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
        let verb = match (req.method().as_str(), collection, watch) {
            ("GET", true, true) => "WATCH".to_owned(),
            ("GET", true, false) => "LIST".to_owned(),
            (m, _, _) => m.to_owned(),
        };
        let sent = Sent {
            verb,
            resource: if collection {
                last.to_owned()
            } else {
                path.to_owned()
            },
            resource_version: query.get("resourceVersion").cloned(),
            initial_events: query.get("sendInitialEvents").is_some_and(|v| v == "true"),
            status: None,
        };
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.push(sent);
        all.len() - 1
    }

    fn answer(&self, index: usize, status: u16) {
        if let Some(s) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(index)
        {
            s.status = Some(status);
        }
    }
}

/// A `tower` layer recording every request into [`Requests`].
#[derive(Clone, Debug)]
pub struct CountLayer(pub Requests);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            requests: self.0.clone(),
        }
    }
}

/// The service [`CountLayer`] makes.
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    requests: Requests,
}

impl<S, B, R> tower_service::Service<http::Request<B>> for Counted<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let index = self.requests.record(&req);
        let requests = self.requests.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await?;
            requests.answer(index, response.status().as_u16());
            Ok(response)
        })
    }
}

/// A kube client from `kubeconfig` that records its requests into `requests`.
///
/// # Panics
/// When the kubeconfig cannot be used.
pub async fn counting_client(kubeconfig: &Path, requests: &Requests) -> kube::Client {
    let config = config(kubeconfig).await;
    kube::client::ClientBuilder::try_from(config)
        .expect("k8s: client")
        .with_layer(&CountLayer(requests.clone()))
        .build()
}

// ------------------------------------------------------------------ the fake apiserver

/// One request the fake apiserver received.
#[derive(Clone, Debug)]
pub struct Request {
    /// The path without the query.
    pub path: String,
    /// The query parameters.
    pub query: HashMap<String, String>,
    /// `deployments` or `statefulsets` (the last path segment), if a workload.
    pub resource: Option<String>,
    /// Whether it is a watch (`watch=true`).
    pub watch: bool,
    /// How many requests of the same resource and type (list or watch) came
    /// before this one.
    pub nth: usize,
}

impl Request {
    /// The `resourceVersion` parameter.
    pub fn resource_version(&self) -> Option<&str> {
        self.query.get("resourceVersion").map(String::as_str)
    }
}

/// One piece of a watch response.
#[derive(Clone, Debug)]
pub enum Frame {
    /// A whole event line, as one chunk.
    Line(String),
    /// The first half of an event line in a chunk announced whole; then the
    /// connection closes: a watch that ends mid-chunk.
    Cut(String),
    /// Keep the response open, silent, until the fake stops.
    Hold,
    /// Wait (silent) until the gate opens, then go on.
    Gate(Gate),
}

/// A latch the test opens to let a scripted watch response go on.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<(AtomicBool, tokio::sync::Notify)>);

impl Gate {
    /// Opens the gate, for good.
    pub fn open(&self) {
        self.0.0.store(true, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }

    async fn wait(&self) {
        loop {
            let notified = self.0.1.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.0.0.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

/// The fake's answer to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A complete response with this status and JSON body.
    Json(u16, String),
    /// A chunked watch response; after the last frame (unless `Cut`/`Hold`)
    /// the response ends normally.
    Watch(Vec<Frame>),
    /// No answer: the connection closes.
    Close,
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A tiny apiserver on `http://127.0.0.1:PORT`: one request per connection
/// (`Connection: close`), answers from a handler, remembers every request.
#[derive(Debug)]
pub struct FakeApi {
    server: Background,
    requests: Arc<Mutex<Vec<Request>>>,
    /// Kubeconfigs written for it, removed on drop.
    files: Mutex<Vec<PathBuf>>,
}

impl FakeApi {
    /// Starts serving; `/version` is answered by the fake itself.
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let seen = Arc::clone(&requests);
        let server = Background::start("fake apiserver", move |conn| {
            serve_one(conn, Arc::clone(&handler), Arc::clone(&seen))
        });
        Self {
            server,
            requests,
            files: Mutex::default(),
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Writes a kubeconfig for `http://127.0.0.1:PORT` into `dir`.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let port = self.server.port;
        let path = dir.join(format!(
            "lookout-kubeconfig-fake-{}-{port}",
            std::process::id()
        ));
        let text = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: fake\n  user: {{}}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n"
        );
        std::fs::write(&path, text).expect("fake: write kubeconfig");
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(path.clone());
        path
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        let files = self.files.get_mut().unwrap_or_else(PoisonError::into_inner);
        for file in files.drain(..) {
            let _ = std::fs::remove_file(file);
        }
    }
}

async fn serve_one(mut conn: TcpStream, handler: Arc<Handler>, requests: Arc<Mutex<Vec<Request>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 * 1024 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let target = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query: HashMap<String, String> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.replace("%3D", "=").replace("%2C", ",")))
        .collect();
    let resource = path
        .rsplit('/')
        .next()
        .filter(|r| *r == "deployments" || *r == "statefulsets")
        .map(str::to_owned);
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let request = {
        let mut all = requests.lock().unwrap_or_else(PoisonError::into_inner);
        let nth = all
            .iter()
            .filter(|r| r.resource == resource && r.watch == watch)
            .count();
        let r = Request {
            path: path.to_owned(),
            query,
            resource,
            watch,
            nth,
        };
        all.push(r.clone());
        r
    };
    if std::env::var_os("FAKE_DEBUG").is_some() {
        eprintln!("fake: {request:?}");
    }
    let reply = if request.path == "/version" {
        Reply::Json(
            200,
            json!({ "major": "1", "minor": "33", "gitVersion": "v1.33.0-fake" }).to_string(),
        )
    } else {
        handler(&request)
    };
    match reply {
        Reply::Close => return,
        Reply::Json(code, body) => {
            let head = format!(
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes()).await;
            let _ = conn.write_all(body.as_bytes()).await;
        }
        Reply::Watch(frames) => write_watch(&mut conn, frames).await,
    }
    let _ = conn.flush().await;
}

/// A watch response: chunked event lines, as scripted.
async fn write_watch(conn: &mut TcpStream, frames: Vec<Frame>) {
    // The head and the lines before the first other frame go out in
    // one write: what the apiserver sends with the watch's acceptance
    // (a resumed watch's replay) arrives with it, not a moment later,
    // whatever the machine's load.
    let mut head = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    );
    let mut frames = frames.into_iter().peekable();
    while let Some(Frame::Line(line)) = frames.next_if(|f| matches!(f, Frame::Line(_))) {
        head.push_str(&chunk(&line));
    }
    if conn.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for frame in frames {
        match frame {
            Frame::Line(line) => {
                if conn.write_all(chunk(&line).as_bytes()).await.is_err() {
                    return;
                }
            }
            Frame::Cut(line) => {
                let half = &line.as_bytes()[..line.len() / 2];
                let _ = conn
                    .write_all(format!("{:x}\r\n", line.len() + 1).as_bytes())
                    .await;
                let _ = conn.write_all(half).await;
                let _ = conn.flush().await;
                return;
            }
            Frame::Gate(gate) => gate.wait().await,
            Frame::Hold => {
                // Silent until the client goes away or the fake stops.
                let mut sink = [0u8; 1024];
                while matches!(conn.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
        }
    }
    let _ = conn.write_all(b"0\r\n\r\n").await;
}

/// One event line as one HTTP chunk.
fn chunk(line: &str) -> String {
    format!("{:x}\r\n{line}\n\r\n", line.len() + 1)
}

/// A `Deployment` or `StatefulSet` as the apiserver serves it.
///
/// # Panics
/// For a kind lookout-k8s adds later (no fixture yet).
pub fn object(
    kind: Kind,
    ns: &str,
    name: &str,
    uid: &str,
    rv: u64,
    replicas: &serde_json::Value,
) -> serde_json::Value {
    let k = match kind {
        Kind::Deployment => "Deployment",
        Kind::StatefulSet => "StatefulSet",
        other => panic!("k8s fixture: no {other} support"),
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": k,
        "metadata": {
            "name": name, "namespace": ns, "uid": uid,
            "resourceVersion": rv.to_string(),
            "labels": { "app": name }
        },
        "spec": { "replicas": replicas }
    })
}

/// A list response.
///
/// # Panics
/// For a kind lookout-k8s adds later (no fixture yet).
pub fn list(kind: Kind, rv: u64, items: &[serde_json::Value]) -> Reply {
    let k = match kind {
        Kind::Deployment => "DeploymentList",
        Kind::StatefulSet => "StatefulSetList",
        other => panic!("k8s fixture: no {other} support"),
    };
    Reply::Json(
        200,
        json!({
            "apiVersion": "apps/v1",
            "kind": k,
            "metadata": { "resourceVersion": rv.to_string() },
            "items": items
        })
        .to_string(),
    )
}

/// A watch event line.
pub fn event(kind: &str, object: &serde_json::Value) -> String {
    json!({ "type": kind, "object": object }).to_string()
}

/// A watch `ERROR` event carrying a Status with `code`.
pub fn error_event(code: u16, reason: &str, message: &str) -> String {
    json!({
        "type": "ERROR",
        "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code
        }
    })
    .to_string()
}
