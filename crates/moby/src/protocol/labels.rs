//! Labels read from the engine's JSON (a list's `Labels`, a service's
//! `Spec.Labels`, an event's attributes), and the label filter's rule.

use std::borrow::Cow;
use std::fmt;

use lookout_core::Labels;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
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

/// The labels in an object's JSON text (an event's `Actor.Attributes`),
/// but the keys in `except`; none when it is no object. Read as
/// [`labels_of`] reads the decoded object (a repeated key counts by its
/// last value), but in one pass over the text, keys and string values
/// borrowed from it: no `Value` is built but for a value that is an array
/// or an object. A container's `create` carries its labels this way, and a
/// map of `String`s and `Value`s built per `create` cost a tenth of an
/// event in the firehose bench.
pub(crate) fn raw_labels(raw: &str, except: &[&str]) -> Labels {
    let mut de = serde_json::Deserializer::from_str(raw);
    de.deserialize_any(PairsVisitor(except))
        .ok()
        .map(|pairs| pairs.into_iter().collect())
        .unwrap_or_default()
}

/// An object's pairs but those `except` names, each value as a label
/// value; an error (skipped as no labels) for what is no object.
struct PairsVisitor<'e>(&'e [&'e str]);

impl<'de> Visitor<'de> for PairsVisitor<'_> {
    type Value = Vec<(Cow<'de, str>, Cow<'de, str>)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(16));
        while let Some(Text(key)) = map.next_key()? {
            if self.0.contains(&&*key) {
                map.next_value::<IgnoredAny>()?;
            } else {
                let LabelValue(value) = map.next_value()?;
                pairs.push((key, value));
            }
        }
        Ok(pairs)
    }
}

/// A JSON string, borrowed unless it has escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A value as [`label_value`] reads it, from the JSON text: a string as it
/// is (borrowed unless it has escapes), anything else as the JSON text of
/// its decoded [`Value`].
struct LabelValue<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for LabelValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LabelValueVisitor)
    }
}

struct LabelValueVisitor;

impl LabelValueVisitor {
    fn text<'a>(v: impl Into<Value>) -> LabelValue<'a> {
        LabelValue(Cow::Owned(v.into().to_string()))
    }
}

impl<'de> Visitor<'de> for LabelValueVisitor {
    type Value = LabelValue<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(LabelValue(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(LabelValue(Cow::Owned(v.to_owned())))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Self::text(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Self::text(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Self::text(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Self::text(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Self::text(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Self::text)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Self::text)
    }
}

/// Whether `labels` carry every label of `filter` (as the engine's `label`
/// filter with `key=value` terms matches).
pub fn matches(labels: &Labels, filter: &Labels) -> bool {
    filter.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

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

    #[test]
    fn raw_labels_read_as_the_decoded_object() {
        let json = r#"{"name":"/web","b":null,"a":"1","n":2,"f":1.50,"t":true,
            "o":{"y":[1, 2],"x":"\u0041"},"e":"\/x","a":"2","image":"nginx"}"#;
        let raw: Box<RawValue> = serde_json::from_str(json).expect("json");
        let value: Value = serde_json::from_str(json).expect("json");
        let except = ["name", "image"];
        let mut decoded = value.as_object().expect("an object").clone();
        decoded.retain(|k, _| !except.contains(&k.as_str()));
        let expected = labels_of(Some(&Value::Object(decoded)));
        assert_eq!(raw_labels(raw.get(), &except), expected);
        assert_eq!(expected.get("a"), Some("2"));
        assert_eq!(expected.get("o"), Some(r#"{"x":"A","y":[1,2]}"#));
        assert_eq!(raw_labels(raw.get(), &[]), labels_of(Some(&value)));
        for not_an_object in ["[1]", "null", "\"x\"", "7"] {
            let raw: Box<RawValue> = serde_json::from_str(not_an_object).expect("json");
            assert!(raw_labels(raw.get(), &[]).is_empty());
        }
    }
}
