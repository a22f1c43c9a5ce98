//! `lookout k8s --kind` of any kind, the real binary on the bed: a
//! misspelt kind exits 2 naming the nearest served ones (as `kubectl get`
//! refuses it); a custom resource's events carry kstatus's word, the same
//! as kstatus itself says of the object; a CRD deleted under the watch is
//! said on stderr as a JSON line with `--json`.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use lookout_e2e::engines;
use lookout_e2e::k8s_kinds::{Crd, kstatus};
use lookout_e2e::k8s_util::{Fixture, require};
use serde_json::{Value, json};

mod common;
use common::{Process, WAIT};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn a_kind_the_cluster_does_not_serve_exits_2_naming_the_nearest() {
    let _lock = engines::lock_engine("k8s", false).unwrap_or_else(|e| panic!("{e}"));
    let Some(kubeconfig) = require() else { return };
    let rt = runtime();
    let crd = rt.block_on(Crd::create(&kubeconfig, true));
    let kc = kubeconfig.display().to_string();
    let misspelt = format!("clusterz.{}", crd.group);
    let stderr = common::usage_error(&["k8s", "--kubeconfig", &kc, "--kind", &misspelt]);
    assert!(
        stderr.contains(&format!("the apiserver serves no kind `{misspelt}`")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("nearest: {}", crd.name())),
        "{stderr}"
    );
    // A served kind whose kstatus rules lookout lacks, with readiness.
    let stderr = common::usage_error(&[
        "k8s",
        "--kubeconfig",
        &kc,
        "--kind",
        "v1/Pod",
        "--readiness",
    ]);
    assert!(stderr.contains("rules of its own"), "{stderr}");
    // A kind that does not read as one, before any request.
    let stderr = common::usage_error(&["k8s", "--kind", "a/b/c/d"]);
    assert!(stderr.contains("names no kind"), "{stderr}");
    rt.block_on(crd.delete());
}

/// The next event line of `id`, bounded.
fn next_of(lookout: &Process, id: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(
            Instant::now() < deadline,
            "no event of {id} within {WAIT:?}"
        );
        let e = lookout.event();
        if e["instance"] == id {
            return e;
        }
    }
}

#[test]
fn a_custom_resource_is_told_with_kstatus_word_and_its_crd_deletion_said() {
    let _lock = engines::lock_engine("k8s", false).unwrap_or_else(|e| panic!("{e}"));
    let Some(kubeconfig) = require() else { return };
    let rt = runtime();
    let fx = rt.block_on(Fixture::new(&kubeconfig));
    let crd = rt.block_on(Crd::create(&kubeconfig, true));
    let kc = kubeconfig.display().to_string();
    let gvk = crd.gvk();
    let mut lookout = Process::spawn(
        &[
            "k8s",
            "--kubeconfig",
            &kc,
            "--namespace",
            &fx.ns,
            "--kind",
            &gvk,
            "--json",
            "--readiness",
            "--serve",
            "127.0.0.1:0",
        ],
        &[],
    );
    let serving = lookout.stderr("serving", |v| v["status"] == "serving");
    let addr = serving["addr"].as_str().expect("an address").to_owned();
    lookout.connected();
    let id = format!("{}/{}/pg", crd.prefix(), fx.ns);
    rt.block_on(crd.create_object(&fx.ns, "pg", json!({ "instances": 2 })));
    let kinds: Vec<Value> = (0..3).map(|_| next_of(&lookout, &id)).collect();
    assert_eq!(
        kinds.iter().map(|e| e["kind"].clone()).collect::<Vec<_>>(),
        ["created", "started", "ready"],
        "{kinds:?}"
    );
    let object = rt.block_on(crd.get(&fx.ns, "pg"));
    assert_eq!(kinds[2]["kstatus"], kstatus(&object), "{kinds:?}");
    rt.block_on(crd.status(
        &fx.ns,
        "pg",
        json!({ "conditions": [{ "type": "Stalled", "status": "True", "reason": "Quota" }] }),
    ));
    let e = next_of(&lookout, &id);
    assert_eq!(e["kind"], "unready", "{e}");
    // Why: kstatus's Failed, in the Stalled condition's words (its reason,
    // as it has no message), and the engine gave up.
    let failing = next_of(&lookout, &id);
    assert_eq!(failing["kind"], "failing", "{failing}");
    assert_eq!(failing["message"], "Quota", "{failing}");
    assert_eq!(failing["failed"], true, "{failing}");
    // `/metrics` counts the kind's instances, and ready ones.
    let kind = crd.prefix();
    let (code, metrics) = common::http_get(&addr, "/metrics");
    assert_eq!(code, 200, "{metrics}");
    assert!(
        metrics.contains(&format!("lookout_k8s_instances{{kind=\"{kind}\"}} 1")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("lookout_k8s_instances_ready{{kind=\"{kind}\"}} 0")),
        "{metrics}"
    );
    let object = rt.block_on(crd.get(&fx.ns, "pg"));
    assert_eq!(e["kstatus"], "Failed", "{e}");
    assert_eq!(kstatus(&object), "Failed");
    // The CRD goes: its object is removed, and stderr says the kind went,
    // as one JSON line among the statuses.
    rt.block_on(crd.delete());
    let e = next_of(&lookout, &id);
    assert_eq!(e["kind"], "removed", "{e}");
    let said = lookout.stderr("the kind went", |v| v["log"] == "warn");
    let message = said["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("kind `{gvk}` is not served any more")),
        "{said}"
    );
    // The kind, once seen, stays at 0.
    let (_, metrics) = common::http_get(&addr, "/metrics");
    assert!(
        metrics.contains(&format!("lookout_k8s_instances{{kind=\"{kind}\"}} 0")),
        "{metrics}"
    );
    // Still running: the kind is looked for again.
    assert!(lookout.child.try_wait().expect("try_wait").is_none());
}
