//! Labels read from the engine's JSON (a list's `Labels`, a service's
//! `Spec.Labels`, an event's attributes), and the label filter's rule.

use lookout_core::Labels;
use serde_json::Value;

/// [`string_value`] borrowed when it is a string (as a label value, to be
/// interned).
pub(crate) fn label_value(v: &Value) -> std::borrow::Cow<'_, str> {
    match v {
        Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
        other => std::borrow::Cow::Owned(other.to_string()),
    }
}

/// A JSON value as a label value: a string as it is, anything else as its
/// JSON text.
pub(crate) fn string_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The labels in a JSON object (`Labels`, `Spec.Labels`); none for `null`
/// or a missing one. Straight into the interned set: no string is copied
/// but those it has not seen yet.
pub fn labels_of(object: Option<&Value>) -> Labels {
    object
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.as_str(), label_value(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `labels` carry every label of `filter` (as the engine's `label`
/// filter with `key=value` terms matches).
pub fn matches(labels: &Labels, filter: &Labels) -> bool {
    filter.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_helpers() {
        let v: Value = serde_json::from_str(r#"{"a":"1","n":2,"b":null}"#).expect("json");
        let labels = labels_of(Some(&v));
        assert_eq!(
            labels,
            Labels::from([
                ("a".into(), "1".into()),
                ("b".into(), "null".into()),
                ("n".into(), "2".into())
            ])
        );
        assert!(labels_of(Some(&Value::Null)).is_empty());
        assert!(labels_of(None).is_empty());
        assert!(matches(&labels, &Labels::new()));
        assert!(matches(&labels, &Labels::from([("a".into(), "1".into())])));
        assert!(!matches(&labels, &Labels::from([("a".into(), "2".into())])));
        assert!(!matches(
            &labels,
            &Labels::from([("z".into(), String::new())])
        ));
    }
}
