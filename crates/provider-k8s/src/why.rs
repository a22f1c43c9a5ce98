//! Why, as the apiserver says it: the [`Reason`] of an object that does not
//! run (it wants no replica: a requested stop), and of a running one whose
//! status conditions say it fails — a `Deployment` past its progress
//! deadline, a workload whose controller cannot make its replicas, a
//! resource kstatus calls `Failed`. The conditions' own words are the
//! message; nothing is guessed.

use std::sync::{Arc, LazyLock};

use lookout_core::{Outcome, Reason};
use serde_json::Value;

/// The reason of every object that does not run: it wants no replica (its
/// scale is 0, a `DaemonSet` has no node to run on), which someone asked
/// for. One `Arc`, shared by every stopped object.
static STOPPED: LazyLock<Arc<Reason>> = LazyLock::new(|| Arc::new(Reason::stop(Outcome::Stopped)));

/// The reason of an object that does not run (see [`STOPPED`]).
pub(crate) fn stopped() -> Arc<Reason> {
    Arc::clone(&STOPPED)
}

/// The reasons a built-in workload's conditions state, read off its
/// `status.conditions` as the watch brings it (no tree is kept).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Failures {
    /// `Progressing` with reason `ProgressDeadlineExceeded`: the
    /// `Deployment` controller gave up waiting for the rollout (`failed`).
    pub(crate) deadline: Option<Arc<Reason>>,
    /// `ReplicaFailure=True`: the controller cannot create or delete pods
    /// (a quota, a pod the admission refuses); it keeps trying.
    pub(crate) replicas: Option<Arc<Reason>>,
}

impl Failures {
    /// What a workload of a kind with a progress deadline (`deadline`:
    /// a `Deployment`) fails with, if anything: the deadline first (it says
    /// the controller gave up), else a replica failure.
    pub(crate) fn of(&self, deadline: bool) -> Option<Arc<Reason>> {
        deadline
            .then(|| self.deadline.clone())
            .flatten()
            .or_else(|| self.replicas.clone())
    }
}

/// The reason `DeploymentProgressing`'s controller writes when the rollout
/// made no progress within `spec.progressDeadlineSeconds`. `kubectl rollout
/// status` and kstatus read the reason alone (the controller writes it with
/// status `False`).
const DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// Reads a workload's `status.conditions` (any JSON value: one that is no
/// list, or a condition that is no object of strings, states nothing).
pub(crate) fn workload_failures(conditions: &Value) -> Failures {
    let mut found = Failures::default();
    for c in conditions.as_array().into_iter().flatten() {
        let Some(c) = Condition::read(c) else {
            continue;
        };
        match c.kind {
            "Progressing" if c.reason == DEADLINE_EXCEEDED && found.deadline.is_none() => {
                found.deadline = Some(Arc::new(c.failing().failed(true)));
            }
            "ReplicaFailure" if c.status == "True" && found.replicas.is_none() => {
                found.replicas = Some(Arc::new(c.failing()));
            }
            _ => {}
        }
    }
    found
}

/// The reason of a resource kstatus calls `Failed`: its first
/// `Stalled=True` condition (the one kstatus's verdict stands on), its
/// message; the controller has given up (`failed`).
pub(crate) fn stalled(data: &Value) -> Reason {
    let conditions = data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array);
    conditions
        .into_iter()
        .flatten()
        .filter_map(Condition::read)
        .find(|c| c.kind == "Stalled" && c.status == "True")
        .map_or_else(|| Reason::failing("Stalled"), |c| c.failing())
        .failed(true)
}

/// One status condition, its strings borrowed.
struct Condition<'a> {
    kind: &'a str,
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

impl<'a> Condition<'a> {
    /// `None` when `c` is no object, or its `type` is no string; another
    /// field that is no string counts as empty.
    fn read(c: &'a Value) -> Option<Self> {
        let c = c.as_object()?;
        let field = |name: &str| c.get(name).and_then(Value::as_str).unwrap_or("");
        Some(Self {
            kind: c.get("type")?.as_str()?,
            status: field("status"),
            reason: field("reason"),
            message: field("message"),
        })
    }

    /// Failing with the condition's message; without one, its reason, else
    /// its type: a failing instance is told with words.
    fn failing(&self) -> Reason {
        let words = [self.message, self.reason, self.kind]
            .into_iter()
            .find(|w| !w.trim().is_empty())
            .unwrap_or(self.kind);
        Reason::failing(words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(r: Option<&Arc<Reason>>) -> Option<&str> {
        r.and_then(|r| r.message.as_deref())
    }

    #[test]
    fn a_deadline_past_is_failed_with_the_controllers_words() {
        let f = workload_failures(&json!([
            { "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
              "message": "Deployment does not have minimum availability." },
            { "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
              "message": "ReplicaSet \"web-5d4\" has timed out progressing." },
        ]));
        let r = f.of(true).expect("failing");
        assert_eq!(
            r.message.as_deref(),
            Some("ReplicaSet \"web-5d4\" has timed out progressing.")
        );
        assert!(r.failed);
        assert_eq!(r.outcome, None);
        // Only a Deployment has a progress deadline.
        assert_eq!(f.of(false), None);
        // The reason alone decides, as kubectl and kstatus read it.
        let unknown = workload_failures(&json!([
            { "type": "Progressing", "status": "Unknown", "reason": "ProgressDeadlineExceeded" },
        ]));
        assert_eq!(
            message(unknown.of(true).as_ref()),
            Some("ProgressDeadlineExceeded")
        );
        // Progressing as usual is nothing.
        let fine = workload_failures(&json!([
            { "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
              "message": "ReplicaSet \"web-5d4\" has successfully progressed." },
        ]));
        assert_eq!(fine, Failures::default());
    }

    #[test]
    fn a_replica_failure_is_failing_not_failed() {
        let f = workload_failures(&json!([
            { "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
              "message": "pods \"web-5d4-x\" is forbidden: exceeded quota: q" },
        ]));
        for deadline in [true, false] {
            let r = f.of(deadline).expect("failing");
            assert_eq!(
                r.message.as_deref(),
                Some("pods \"web-5d4-x\" is forbidden: exceeded quota: q")
            );
            assert!(!r.failed);
        }
        let over = workload_failures(&json!([
            { "type": "ReplicaFailure", "status": "False", "reason": "FailedCreate", "message": "x" },
        ]));
        assert_eq!(over.of(true), None);
        // Both: the deadline tells (the controller gave up).
        let both = workload_failures(&json!([
            { "type": "ReplicaFailure", "status": "True", "message": "quota" },
            { "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
              "message": "timed out" },
        ]));
        assert_eq!(message(both.of(true).as_ref()), Some("timed out"));
        assert_eq!(message(both.of(false).as_ref()), Some("quota"));
    }

    #[test]
    fn unreadable_conditions_state_nothing() {
        for c in [
            json!(null),
            json!("ProgressDeadlineExceeded"),
            json!({ "type": "ReplicaFailure", "status": "True" }),
            json!([1, "x", null, []]),
            json!([{ "type": 5, "status": "True", "reason": "ProgressDeadlineExceeded" }]),
        ] {
            assert_eq!(workload_failures(&c), Failures::default(), "{c}");
        }
        // A message that is no string: the reason speaks.
        let f = workload_failures(&json!([
            { "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": 7 },
        ]));
        assert_eq!(message(f.of(false).as_ref()), Some("FailedCreate"));
        // Nothing but the type: the type speaks.
        let f = workload_failures(&json!([{ "type": "ReplicaFailure", "status": "True" }]));
        assert_eq!(message(f.of(false).as_ref()), Some("ReplicaFailure"));
    }

    #[test]
    fn messages_are_capped() {
        let long = "x".repeat(5000);
        let f = workload_failures(&json!([
            { "type": "ReplicaFailure", "status": "True", "message": long },
        ]));
        let m = f
            .of(false)
            .and_then(|r| r.message.clone())
            .expect("message");
        assert!(m.len() <= lookout_core::MAX_MESSAGE, "{}", m.len());
    }

    #[test]
    fn stalled_tells_the_first_stalled_conditions_message() {
        let data = json!({ "status": { "conditions": [
            { "type": "Ready", "status": "False", "message": "not yet" },
            { "type": "Stalled", "status": "False", "message": "old news" },
            { "type": "Stalled", "status": "True", "reason": "InvalidSpec",
              "message": "spec.instances: must be at least 1" },
        ] } });
        let r = stalled(&data);
        assert_eq!(
            r.message.as_deref(),
            Some("spec.instances: must be at least 1")
        );
        assert!(r.failed);
        let r = stalled(&json!({ "status": { "conditions": [
            { "type": "Stalled", "status": "True", "reason": "InvalidSpec" },
        ] } }));
        assert_eq!(r.message.as_deref(), Some("InvalidSpec"));
        assert_eq!(stalled(&json!({})).message.as_deref(), Some("Stalled"));
    }

    #[test]
    fn stopped_is_a_requested_stop() {
        let r = stopped();
        assert_eq!(r.outcome, Some(Outcome::Stopped));
        assert!(!r.failed && r.message.is_none());
        assert!(Arc::ptr_eq(&r, &stopped()), "shared");
    }
}
