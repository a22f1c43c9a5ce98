//! Helpers of the tests of any kind (`tests/tests/k8s_kinds.rs`): a CRD of
//! the test's own group (with or without a scale subresource), its custom
//! objects, `DaemonSets`, and kstatus itself (the Go helper the bed builds)
//! to compare with. The bed runs no controller: the tests write status
//! through the status subresource, as a controller would.

// A failed test's CRD is deleted on a thread of its own (see `Drop for Crd`).
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

use crate::engines;
use crate::k8s_util::{RUN_LABEL, client, unique};

/// The bound of one API call.
const CALL: Duration = Duration::from_secs(20);

async fn call<T>(what: &str, f: impl Future<Output = kube::Result<T>>) -> T {
    tokio::time::timeout(CALL, f)
        .await
        .unwrap_or_else(|_| panic!("k8s: {what}: no answer within {CALL:?}"))
        .unwrap_or_else(|e| panic!("k8s: {what}: {e}"))
}

/// A CRD of a group of its own (`clusters.GROUP`, kind `Cluster`), deleted
/// by [`Crd::delete`] (or left to the bed's next reset when a test fails).
pub struct Crd {
    client: kube::Client,
    /// `tNNN.lookout.dev`: unique to the test.
    pub group: String,
    /// The plural (`clusters`, `widgets`).
    pub plural: &'static str,
    /// The kind (`Cluster`, `Widget`).
    pub kind: &'static str,
    /// Whether it has the status and scale subresources.
    pub scaled: bool,
    /// Whether it is (to be) served: a CRD left so is deleted on drop.
    applied: std::sync::atomic::AtomicBool,
}

impl Crd {
    /// `clusters.GROUP` (kind `Cluster`) with the status subresource and a
    /// scale one whose replicas are `spec.instances` (as `CloudNativePG`'s
    /// `Cluster`), or without: `widgets.GROUP` (kind `Widget`), neither.
    /// Returns once the apiserver serves it.
    ///
    /// # Panics
    /// When the apiserver refuses, or does not establish it in time.
    pub async fn create(kubeconfig: &Path, scaled: bool) -> Self {
        let client = client(kubeconfig).await;
        let group = format!("{}.lookout.dev", unique("t"));
        let (plural, kind) = if scaled {
            ("clusters", "Cluster")
        } else {
            ("widgets", "Widget")
        };
        let crd = Self {
            client,
            group,
            plural,
            kind,
            scaled,
            applied: false.into(),
        };
        crd.apply().await;
        crd
    }

    /// Creates the CRD (again) and waits until its resource answers.
    ///
    /// # Panics
    /// When the apiserver refuses, or does not serve it in time.
    pub async fn apply(&self) {
        let open = json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
        let mut version = json!({
            "name": "v1", "served": true, "storage": true,
            "schema": { "openAPIV3Schema": {
                "type": "object",
                "properties": { "spec": open, "status": open },
            }},
        });
        if self.scaled {
            version["subresources"] = json!({
                "status": {},
                "scale": { "specReplicasPath": ".spec.instances", "statusReplicasPath": ".status.readyInstances" },
            });
        }
        let body: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": { "name": self.name() },
            "spec": {
                "group": self.group,
                "scope": "Namespaced",
                "names": {
                    "plural": self.plural,
                    "singular": self.kind.to_ascii_lowercase(),
                    "kind": self.kind,
                    "listKind": format!("{}List", self.kind),
                },
                "versions": [version],
            },
        }))
        .expect("a CRD");
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        self.applied
            .store(true, std::sync::atomic::Ordering::Relaxed);
        call("create CRD", crds.create(&PostParams::default(), &body)).await;
        // Served: its list answers (discovery lists it at the same moment).
        let deadline = tokio::time::Instant::now() + CALL;
        loop {
            let any: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.resource());
            if any.list(&kube::api::ListParams::default()).await.is_ok() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "k8s: {} not served within {CALL:?}",
                self.name()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Deletes the CRD (and with it every object of its kind) and waits
    /// until it is gone.
    ///
    /// # Panics
    /// When the apiserver refuses, or keeps it.
    pub async fn delete(&self) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        self.applied
            .store(false, std::sync::atomic::Ordering::Relaxed);
        call(
            "delete CRD",
            crds.delete(&self.name(), &DeleteParams::default()),
        )
        .await;
        let deadline = tokio::time::Instant::now() + CALL;
        while crds.get_opt(&self.name()).await.ok().flatten().is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "k8s: CRD {} not gone within {CALL:?}",
                self.name()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `plural.group`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// `GROUP/v1/KIND`, as `--kind` takes it.
    pub fn gvk(&self) -> String {
        format!("{}/v1/{}", self.group, self.kind)
    }

    /// What lookout's ids of it start with: `kind.group`.
    pub fn prefix(&self) -> String {
        format!("{}.{}", self.kind.to_ascii_lowercase(), self.group)
    }

    /// The API resource.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, "v1", self.kind),
            self.plural,
        )
    }

    /// Its objects in `ns`.
    pub fn api(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &self.resource())
    }

    /// Creates `name` in `ns` with `spec` (and the run label of `ns`).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn create_object(&self, ns: &str, name: &str, spec: Value) {
        let body: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", self.group),
            "kind": self.kind,
            "metadata": { "name": name, "namespace": ns, "labels": { RUN_LABEL: ns } },
            "spec": spec,
        }))
        .expect("an object");
        call(
            "create object",
            self.api(ns).create(&PostParams::default(), &body),
        )
        .await;
    }

    /// Merges `patch` into the object (its spec, metadata, or, without a
    /// status subresource, its status).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn patch(&self, ns: &str, name: &str, patch: Value) {
        call(
            "patch object",
            self.api(ns)
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await;
    }

    /// Merges `status` into the object's status through the status
    /// subresource, as its controller would (a list, such as `conditions`,
    /// is replaced whole).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn status(&self, ns: &str, name: &str, status: Value) {
        call(
            "patch status",
            self.api(ns).patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            ),
        )
        .await;
    }

    /// Sets the replicas through the scale subresource (as `kubectl scale`).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn scale(&self, ns: &str, name: &str, replicas: i32) {
        call(
            "scale object",
            self.api(ns).patch_scale(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "replicas": replicas } })),
            ),
        )
        .await;
    }

    /// Deletes the object.
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn delete_object(&self, ns: &str, name: &str) {
        call(
            "delete object",
            self.api(ns).delete(name, &DeleteParams::default()),
        )
        .await;
    }

    /// The object as the apiserver has it now, as JSON.
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn get(&self, ns: &str, name: &str) -> Value {
        serde_json::to_value(call("get object", self.api(ns).get(name)).await).expect("JSON")
    }
}

impl Drop for Crd {
    /// A test that failed leaves no CRD behind: it is deleted (without
    /// waiting), on a thread of its own (a test's runtime may be the
    /// caller's).
    fn drop(&mut self) {
        if !self.applied.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let client = self.client.clone();
        let name = self.name();
        let done = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let crds: Api<CustomResourceDefinition> = Api::all(client);
                let _ =
                    tokio::time::timeout(CALL, crds.delete(&name, &DeleteParams::default())).await;
            });
        });
        let _ = done.join();
    }
}

impl std::fmt::Debug for Crd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crd")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// `DaemonSets` of a namespace.
pub struct DaemonSets {
    api: Api<DaemonSet>,
    ns: String,
}

impl std::fmt::Debug for DaemonSets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSets")
            .field("ns", &self.ns)
            .finish_non_exhaustive()
    }
}

impl DaemonSets {
    /// The `DaemonSets` of `ns`.
    pub async fn new(kubeconfig: &Path, ns: &str) -> Self {
        Self {
            api: Api::namespaced(client(kubeconfig).await, ns),
            ns: ns.to_owned(),
        }
    }

    /// Creates `name` (one busybox container).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn create(&self, name: &str, image: &str) {
        let body: DaemonSet = serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": self.ns, "labels": { RUN_LABEL: self.ns } },
            "spec": {
                "selector": { "matchLabels": { "app": name } },
                "template": {
                    "metadata": { "labels": { "app": name } },
                    "spec": { "containers": [{ "name": "main", "image": image }] },
                },
            },
        }))
        .expect("a DaemonSet");
        call(
            "create DaemonSet",
            self.api.create(&PostParams::default(), &body),
        )
        .await;
    }

    /// Changes the pod template's image (a new generation).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn set_image(&self, name: &str, image: &str) {
        let patch = json!({ "spec": { "template": { "spec": { "containers": [{ "name": "main", "image": image }] } } } });
        call(
            "patch DaemonSet",
            self.api
                .patch(name, &PatchParams::default(), &Patch::Strategic(&patch)),
        )
        .await;
    }

    /// Merges `status` into the status, through the status subresource.
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn status(&self, name: &str, status: Value) {
        call(
            "patch DaemonSet status",
            self.api.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            ),
        )
        .await;
    }

    /// Deletes it.
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn delete(&self, name: &str) {
        call(
            "delete DaemonSet",
            self.api.delete(name, &DeleteParams::default()),
        )
        .await;
    }

    /// It as the apiserver has it now, as JSON (with its apiVersion and kind).
    ///
    /// # Panics
    /// When the apiserver refuses.
    pub async fn get(&self, name: &str) -> Value {
        let mut v =
            serde_json::to_value(call("get DaemonSet", self.api.get(name)).await).expect("JSON");
        v["apiVersion"] = json!("apps/v1");
        v["kind"] = json!("DaemonSet");
        v
    }
}

/// kstatus's status of `object` (`Current`, `InProgress`, `Failed`,
/// `Terminating`, `Unknown`), from the Go helper built from
/// `sigs.k8s.io/cli-utils` with the bed.
///
/// # Panics
/// When the helper is missing or fails.
pub fn kstatus(object: &Value) -> String {
    let bin = engines::kstatus_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kstatus runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(object.to_string().as_bytes())
            .expect("kstatus reads");
    }
    let out = child.wait_with_output().expect("kstatus ends");
    assert!(
        out.status.success(),
        "kstatus: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: Value = serde_json::from_slice(&out.stdout).expect("kstatus prints JSON");
    line["status"].as_str().expect("a status").to_owned()
}
