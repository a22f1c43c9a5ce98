//! Kubernetes (`lookout_k8s`): one cluster, or with `--context` repeated
//! several, a watch each. Where a cluster is, its kubeconfig says at each
//! dial.

use lookout_k8s::{K8sConfig, K8sDial, Kind};

use crate::cli::{K8sArgs, KindArg};
use crate::exit::Exit;
use crate::watched::{NamedWatch, Sources};

/// The watches `a` names.
pub fn sources(a: &K8sArgs) -> Result<Sources<K8sDial>, Exit> {
    let kinds = if a.kinds.is_empty() {
        vec![Kind::Deployment, Kind::StatefulSet]
    } else {
        a.kinds
            .iter()
            .map(|k| match k {
                KindArg::Deployment => Kind::Deployment,
                KindArg::Statefulset => Kind::StatefulSet,
            })
            .collect()
    };
    let config = |context: Option<&String>| {
        let mut c = K8sConfig::default()
            .kinds(kinds.iter().copied())
            // No periodic or lag relist: the watch protocol resumes
            // from its resourceVersion and says when it cannot (410).
            .watch_config(
                K8sConfig::default_watch().initial(a.common.initial || a.publish.publish.is_some()),
            )
            .readiness(a.common.readiness);
        if let Some(path) = &a.kubeconfig {
            c = c.kubeconfig(path.clone());
        }
        if let Some(context) = context {
            c = c.context(context.clone());
        }
        if let Some(namespace) = &a.namespace {
            c = c.namespace(namespace.clone());
        }
        if let Some(selector) = &a.label_selector {
            c = c.label_selector(selector.clone());
        }
        c
    };
    if a.contexts.len() <= 1 {
        let watch = lookout_k8s::watch(config(a.contexts.first()))
            .map_err(|e| Exit::usage("invalid configuration", &e))?;
        return Ok(Sources::One { watch, at: None });
    }
    if a.publish.publish.is_some() {
        return Err(Exit::Usage(
            "--publish takes one cluster (a source each: one run each)".to_owned(),
        ));
    }
    let mut watches = Vec::with_capacity(a.contexts.len());
    for context in &a.contexts {
        let watch = lookout_k8s::watch(config(Some(context)))
            .map_err(|e| Exit::usage(&format!("invalid configuration of `{context}`"), &e))?;
        watches.push(NamedWatch {
            name: context.clone(),
            watch,
            at: None,
        });
    }
    Ok(Sources::Several(watches))
}
