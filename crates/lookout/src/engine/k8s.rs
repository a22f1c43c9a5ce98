//! Kubernetes (`lookout_k8s`): one cluster, or with `--context` repeated
//! several, a watch each. Where a cluster is, its kubeconfig says at each
//! dial.

use std::time::Duration;

use lookout_k8s::{CheckError, K8sConfig, K8sDial, Kind, KindRef};

use crate::cli::K8sArgs;
use crate::exit::Exit;
use crate::sources::{NamedWatch, Sources};

/// How long the check of named kinds may take before the watch starts
/// anyway (and waits for the cluster as it always does).
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// The watches `a` names. Kinds other than the built-in workloads are
/// checked on each cluster first: one the cluster does not serve is a usage
/// error (exit 2), as `kubectl get` refuses it; a cluster that cannot be
/// asked is waited for by the watch.
pub async fn sources(a: &K8sArgs) -> Result<Sources<K8sDial>, Exit> {
    let kinds: Vec<KindRef> = if a.kinds.is_empty() {
        vec![Kind::Deployment.into(), Kind::StatefulSet.into()]
    } else {
        a.kinds.clone()
    };
    let config = |context: Option<&String>| {
        let mut c = K8sConfig::default()
            .kinds(kinds.iter().cloned())
            // No periodic or lag relist: the watch protocol resumes
            // from its resourceVersion and says when it cannot (410).
            .watch_config(K8sConfig::default_watch().initial(
                a.common.initial || a.publish.publish.is_some() || !a.common.renders.is_empty(),
            ))
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
    // A kubeconfig named and unreadable is a usage error, as with kubectl
    // (a cluster that is down is waited for).
    lookout_k8s::check_kubeconfig(&config(None))
        .map_err(|e| Exit::usage("invalid configuration", &e))?;
    if kinds.iter().any(|k| k.builtin().is_none()) {
        let contexts: Vec<Option<&String>> = if a.contexts.is_empty() {
            vec![None]
        } else {
            a.contexts.iter().map(Some).collect()
        };
        for context in contexts {
            check(&config(context), context).await?;
        }
    }
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

/// Checks the kinds of `config` on its cluster (`context`, for messages).
async fn check(config: &K8sConfig, context: Option<&String>) -> Result<(), Exit> {
    let whose = context.map_or_else(String::new, |c| format!(" of `{c}`"));
    match tokio::time::timeout(CHECK_TIMEOUT, lookout_k8s::check(config)).await {
        Ok(Err(CheckError::Config(e))) => {
            Err(Exit::usage(&format!("invalid configuration{whose}"), &e))
        }
        // Unreachable now (or slow): the watch retries, and says why.
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "kinds not checked: the watch will resolve them");
            Ok(())
        }
        Ok(Ok(())) | Err(_) => Ok(()),
    }
}
