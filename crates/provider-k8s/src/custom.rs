//! An object of any kind but the built-in workloads (a custom resource,
//! most often), read as kube's `DynamicObject`: running by its scale (or by
//! existing), readiness by kstatus's generic rules (`kstatus.rs`).

use kube::core::DynamicObject;
use lookout_core::{Labels, Listed, Readiness};
use serde_json::Value;

use crate::kstatus;
use crate::object::{Object, identify};
use crate::resolve::{Rule, Served};

impl Object for DynamicObject {
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
        let readiness = with_readiness.then(|| {
            let (status, unreadable) = kstatus::status(&self.metadata, &self.data);
            if let Some(why) = unreadable {
                tracing::warn!(%id, why, "unreadable status: counted as not ready (kstatus cannot read it either)");
            }
            Readiness::resource(status)
        });
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
                .readiness(readiness),
        )
    }
}

/// The value at `path` (object keys) in `data`.
fn at<'a>(data: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(data, |v, key| v.get(key))
}
