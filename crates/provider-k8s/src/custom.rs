//! An object of any kind but the built-in workloads (a custom resource,
//! most often), read as kube's `DynamicObject`: running by its scale (or by
//! existing), readiness by kstatus's generic rules (`kstatus.rs`), failing
//! when kstatus calls it `Failed` (`why.rs`).

use std::sync::Arc;

use kube::core::DynamicObject;
use lookout_core::{Labels, Listed, Readiness, ResourceStatus};
use serde_json::Value;

use crate::kstatus;
use crate::object::{Object, identify};
use crate::resolve::{Rule, Served};
use crate::why;

impl Object for DynamicObject {
    fn deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    fn listed(mut self, served: &Served, with_readiness: bool) -> Option<Listed> {
        let (id, uid) = identify(&served.prefix, &self.metadata)?;
        let running = match &served.rule {
            Rule::Scaled(path) => match at(&self.data, path) {
                // Unset: as a workload's unset `spec.replicas`, one.
                None | Some(Value::Null) => true,
                Some(n) => {
                    let Some(n) = n.as_i64() else {
                        tracing::warn!(%id, path = %path.join("."), value = %n, "object with an unreadable scale skipped");
                        return None;
                    };
                    n > 0
                }
            },
            Rule::Exists | Rule::Builtin(_) => true,
        };
        let status = with_readiness.then(|| {
            let (status, unreadable) = kstatus::status(&self.metadata, &self.data);
            if let Some(why) = unreadable {
                tracing::warn!(%id, why, "unreadable status: counted as not ready (kstatus cannot read it either)");
            }
            status
        });
        // Running: failing while kstatus calls it `Failed` (its `Stalled`
        // condition's words). Not running: scaled to 0, a requested stop.
        let reason = if running {
            (status == Some(ResourceStatus::Failed)).then(|| Arc::new(why::stalled(&self.data)))
        } else {
            Some(why::stopped())
        };
        let readiness = status.map(Readiness::resource);
        let labels = self
            .metadata
            .labels
            .take()
            .map(Labels::from)
            .unwrap_or_default();
        Some(
            Listed::new(id, running)
                .uid(uid)
                .labels(labels)
                .readiness(readiness)
                .reason(reason),
        )
    }
}

/// The value at `path` (object keys) in `data`.
fn at<'a>(data: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(data, |v, key| v.get(key))
}
