//! kstatus's generic rules (`sigs.k8s.io/cli-utils/pkg/kstatus/status`,
//! `checkGenericProperties` then `checkReadyCondition`), for any kind
//! without rules of its own: what Flux, kpt and Config Sync call a
//! resource's status, here computed from each watch event instead of
//! polled.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use lookout_core::ResourceStatus;
use serde_json::Value;

/// The status of an object with metadata `meta` and body `data` (its
/// `status` field read here), in kstatus's order:
///
/// 1. `metadata.deletionTimestamp` set: `Terminating`;
/// 2. `status.observedGeneration` present and ≠ `metadata.generation`: `InProgress`;
/// 3. the first condition `Reconciling=True` or `Stalled=True`, in the
///    list's order: `InProgress`, or `Failed`;
/// 4. the first `Ready` condition whose status is `True`: `Current`; `False`
///    or `Unknown`: `InProgress` (another value is passed over);
/// 5. else `Current` (a kind that states nothing is taken as reconciled).
///
/// A field of the wrong type (`observedGeneration` no integer, `conditions`
/// no list of objects with string `type` and `status`) makes kstatus fail
/// (its `Unknown`); here it is `InProgress`, with the reason returned for
/// the log: never `Current`, so ready ⇔ kstatus `Current` holds.
pub(crate) fn status(meta: &ObjectMeta, data: &Value) -> (ResourceStatus, Option<&'static str>) {
    if meta.deletion_timestamp.is_some() {
        return (ResourceStatus::Terminating, None);
    }
    let status = match data.get("status") {
        None | Some(Value::Null) => None,
        Some(s @ Value::Object(_)) => Some(s),
        Some(_) => return (ResourceStatus::InProgress, Some("status is no object")),
    };
    if let Some(generation) = meta.generation
        && let Some(observed) = status.and_then(|s| s.get("observedGeneration"))
        && !observed.is_null()
    {
        match observed.as_i64() {
            Some(o) if o == generation => {}
            Some(_) => return (ResourceStatus::InProgress, None),
            None => {
                return (
                    ResourceStatus::InProgress,
                    Some("status.observedGeneration is no integer"),
                );
            }
        }
    }
    let conditions = match status.and_then(|s| s.get("conditions")) {
        None | Some(Value::Null) => return (ResourceStatus::Current, None),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return (
                ResourceStatus::InProgress,
                Some("status.conditions is no list"),
            );
        }
    };
    let mut read = Vec::with_capacity(conditions.len());
    for c in conditions {
        let field = |name: &str| match c.get(name) {
            None | Some(Value::Null) => Some(""),
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => None,
        };
        let (Value::Object(_), Some(kind), Some(state)) = (c, field("type"), field("status"))
        else {
            return (
                ResourceStatus::InProgress,
                Some("a status condition is no object with string type and status"),
            );
        };
        read.push((kind, state));
    }
    for &(kind, state) in &read {
        match (kind, state) {
            ("Reconciling", "True") => return (ResourceStatus::InProgress, None),
            ("Stalled", "True") => return (ResourceStatus::Failed, None),
            _ => {}
        }
    }
    for &(kind, state) in &read {
        match (kind, state) {
            ("Ready", "True") => return (ResourceStatus::Current, None),
            ("Ready", "False" | "Unknown") => return (ResourceStatus::InProgress, None),
            _ => {}
        }
    }
    (ResourceStatus::Current, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(generation: Option<i64>) -> ObjectMeta {
        ObjectMeta {
            generation,
            ..ObjectMeta::default()
        }
    }

    fn of(generation: Option<i64>, data: &Value) -> ResourceStatus {
        status(&meta(generation), data).0
    }

    #[test]
    fn kstatus_generic_rules_in_order() {
        use ResourceStatus::*;
        // Nothing stated: current.
        assert_eq!(of(Some(1), &json!({})), Current);
        assert_eq!(of(Some(1), &json!({"status": null})), Current);
        // Observed generation behind; absent is not checked.
        assert_eq!(
            of(Some(2), &json!({"status": {"observedGeneration": 1}})),
            InProgress
        );
        // Ahead is "≠" too, as kstatus compares.
        assert_eq!(
            of(Some(2), &json!({"status": {"observedGeneration": 3}})),
            InProgress
        );
        assert_eq!(
            of(None, &json!({"status": {"observedGeneration": 3}})),
            Current
        );
        let conds = |c: Value| json!({"status": {"observedGeneration": 1, "conditions": c}});
        assert_eq!(
            of(
                Some(1),
                &conds(json!([{"type": "Ready", "status": "True"}]))
            ),
            Current
        );
        assert_eq!(
            of(
                Some(1),
                &conds(json!([{"type": "Ready", "status": "False"}]))
            ),
            InProgress
        );
        assert_eq!(
            of(
                Some(1),
                &conds(json!([{"type": "Ready", "status": "Unknown"}]))
            ),
            InProgress
        );
        // Another value is passed over; a later Ready decides.
        assert_eq!(
            of(
                Some(1),
                &conds(
                    json!([{"type": "Ready", "status": "Maybe"}, {"type": "Ready", "status": "True"}])
                )
            ),
            Current
        );
        // Reconciling and Stalled come before Ready, the first of them wins.
        assert_eq!(
            of(
                Some(1),
                &conds(
                    json!([{"type": "Ready", "status": "True"}, {"type": "Reconciling", "status": "True"}])
                )
            ),
            InProgress
        );
        assert_eq!(
            of(
                Some(1),
                &conds(
                    json!([{"type": "Stalled", "status": "True"}, {"type": "Reconciling", "status": "True"}])
                )
            ),
            Failed
        );
        assert_eq!(
            of(
                Some(1),
                &conds(
                    json!([{"type": "Reconciling", "status": "False"}, {"type": "Ready", "status": "True"}])
                )
            ),
            Current
        );
        // Being deleted comes first of all.
        let mut m = meta(Some(1));
        m.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_eq!(
            status(&m, &conds(json!([{"type": "Ready", "status": "True"}]))).0,
            Terminating
        );
    }

    #[test]
    fn unreadable_fields_are_never_current() {
        for data in [
            json!({"status": "ready"}),
            json!({"status": {"observedGeneration": "1"}}),
            json!({"status": {"conditions": {"Ready": true}}}),
            json!({"status": {"conditions": ["Ready"]}}),
            json!({"status": {"conditions": [{"type": "Ready", "status": true}]}}),
        ] {
            let (s, why) = status(&meta(Some(1)), &data);
            assert_eq!(s, ResourceStatus::InProgress, "{data}");
            assert!(why.is_some(), "{data}");
        }
    }
}
