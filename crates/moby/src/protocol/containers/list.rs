//! `GET /containers/json?all=1`, decoded: of each entry only what is told
//! (its id, name, state, status and labels), borrowed from the body where
//! no escape forces a copy; the rest of the entry (ports, mounts, network
//! settings…) is skipped, never built. With readiness, a running
//! container's health read from its `Status` where the engine writes it
//! there ([`HealthTable::status_in_list`](crate::HealthTable::status_in_list)).

use std::borrow::Cow;
use std::sync::Arc;

use lookout_core::{Health, InstanceId, Labels, Listed, Readiness};
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::why::listed_stop;
use crate::protocol::framing::preview;
use crate::protocol::mapping::Mapping;

/// One entry, each field as its raw JSON (an entry with a field of an
/// unexpected type is skipped, not the list).
#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(rename = "Id", borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(rename = "Names", borrow, default)]
    names: Option<&'a RawValue>,
    #[serde(rename = "State", borrow, default)]
    state: Option<&'a RawValue>,
    #[serde(rename = "Status", borrow, default)]
    status: Option<&'a RawValue>,
    #[serde(rename = "Labels", borrow, default)]
    labels: Option<&'a RawValue>,
}

/// A JSON string, borrowed when it has no escape.
fn text(raw: &RawValue) -> Option<Cow<'_, str>> {
    let json = raw.get();
    if !json.starts_with('"') {
        return None;
    }
    match serde_json::from_str::<&str>(json) {
        Ok(s) => Some(Cow::Borrowed(s)),
        Err(_) => serde_json::from_str::<String>(json).ok().map(Cow::Owned),
    }
}

/// A label value: a string as it is, anything else as its JSON text (as
/// [`labels_of`](crate::labels_of) reads it).
fn label_value(raw: &RawValue) -> Cow<'_, str> {
    text(raw).unwrap_or_else(|| {
        serde_json::from_str::<serde_json::Value>(raw.get())
            .map_or_else(|_| Cow::Borrowed(raw.get()), |v| Cow::Owned(v.to_string()))
    })
}

/// A JSON object's pairs, keys borrowed where they can be (`Labels`).
struct Pairs<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Pairs<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key<'a>(Cow<'a, str>);
        impl<'de> Deserialize<'de> for Key<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Key<'de>;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                        Ok(Key(Cow::Borrowed(s)))
                    }
                    fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                        Ok(Key(Cow::Owned(s.to_owned())))
                    }
                }
                d.deserialize_str(V)
            }
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Pairs<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs<'de>, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    pairs.push((k, v));
                }
                Ok(Pairs(pairs))
            }
        }
        d.deserialize_map(V)
    }
}

/// The labels of an entry's raw `Labels` (none for `null`, or what is no
/// object).
fn labels(raw: Option<&RawValue>) -> Labels {
    let Some(Pairs(pairs)) = raw.and_then(|raw| serde_json::from_str::<Pairs<'_>>(raw.get()).ok())
    else {
        return Labels::new();
    };
    pairs.iter().map(|(k, v)| (k, label_value(v))).collect()
}

/// The container's own name from `Names`: without the leading `/`, and not a
/// legacy link alias (`/other/alias`).
pub(crate) fn container_name(raw: Option<&RawValue>) -> Option<String> {
    let names: Vec<&RawValue> = serde_json::from_str(raw?.get()).ok()?;
    let names: Vec<Cow<'_, str>> = names.into_iter().filter_map(text).collect();
    let names = || {
        names
            .iter()
            .map(|n| n.trim_start_matches('/'))
            .filter(|n| !n.is_empty())
    };
    names()
        .find(|n| !n.contains('/'))
        .or_else(|| names().next())
        .map(str::to_owned)
}

/// A running container's health as the list's `Status` tells it (Docker:
/// `Up 3 minutes (healthy)`, `(unhealthy)`, `(health: starting)`; `Up 3
/// minutes` without a check); `None` when it does not tell it (a paused
/// container's `(Paused)`, words of another engine).
pub(crate) fn status_health(status: &str) -> Option<Health> {
    let status = status.trim();
    if !status.starts_with("Up ") {
        return None;
    }
    let Some(open) = status.strip_suffix(')').and_then(|s| s.rfind('(')) else {
        return Some(Health::None);
    };
    match &status[open + 1..status.len() - 1] {
        "healthy" => Some(Health::Healthy),
        "unhealthy" => Some(Health::Unhealthy),
        "health: starting" | "starting" => Some(Health::Starting),
        _ => None,
    }
}

/// Decodes (a part of) `GET /containers/json?all=1`: a JSON array of
/// entries. An entry without an id or a name is skipped with a warning.
/// With `readiness`, each gets its pause and, where the table says the
/// list's `Status` tells it, a running container its health; a running
/// container whose `Status` does not tell it (paused) gets no readiness
/// (the snapshot inspects it). Otherwise its health is `none` until the
/// snapshot's health lists tell it.
pub(crate) fn parse_list(
    body: &[u8],
    mapping: &Mapping,
    readiness: bool,
) -> Result<Vec<Listed>, String> {
    let entries: Vec<&RawValue> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut listed = Vec::with_capacity(entries.len());
    for raw in entries {
        if let Some(l) = entry(raw, mapping, readiness) {
            listed.push(l);
        } else {
            tracing::warn!(
                provider = mapping.provider,
                entry = %preview(raw.get().as_bytes()),
                "skipping a listed container without an Id or a name"
            );
        }
    }
    Ok(listed)
}

fn entry(raw: &RawValue, mapping: &Mapping, readiness: bool) -> Option<Listed> {
    let entry: Entry<'_> = serde_json::from_str(raw.get()).ok()?;
    let uid = entry.id.and_then(text).filter(|s| !s.is_empty())?;
    let name = container_name(entry.names)?;
    let state = entry.state.and_then(text);
    let state = state.as_deref().unwrap_or("");
    let status = entry.status.and_then(text);
    // A paused container still runs: no event says otherwise (`pause` is
    // not a stop). A restarting one has died and not started yet.
    let running = matches!(state, "running" | "paused");
    let paused = state == "paused";
    let reason = if running {
        None
    } else {
        listed_stop(state, status.as_deref()).map(Arc::new)
    };
    let readiness = readiness
        .then(|| {
            if !mapping.health.status_in_list {
                return Some(Health::None);
            }
            if !running {
                return Some(Health::None);
            }
            status.as_deref().and_then(status_health)
        })
        .map(|health| health.map(|h| Readiness::container(h, paused)));
    Some(
        Listed::new(InstanceId::from(name), running)
            .uid(Some(Arc::from(uid)))
            .labels(labels(entry.labels))
            .readiness(readiness.flatten())
            .reason(reason),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::objects::History;

    static DOCKER: Mapping = Mapping::new("docker", crate::Discovery::DOCKER, History::Until)
        .health(crate::HealthTable::DOCKER);
    static PODMAN: Mapping = Mapping::new("podman", crate::Discovery::DOCKER, History::Until);

    #[test]
    fn a_status_tells_a_running_containers_health() {
        for (status, health) in [
            ("Up 3 minutes", Some(Health::None)),
            ("Up Less than a second", Some(Health::None)),
            ("Up About a minute (healthy)", Some(Health::Healthy)),
            ("Up 2 hours (unhealthy)", Some(Health::Unhealthy)),
            ("Up 5 seconds (health: starting)", Some(Health::Starting)),
            ("Up 5 seconds (starting)", Some(Health::Starting)),
            ("Up 4 seconds (Paused)", None),
            ("Exited (0) 3 minutes ago", None),
            ("Created", None),
            ("", None),
        ] {
            assert_eq!(status_health(status), health, "{status:?}");
        }
    }

    /// Docker's list tells a running container's health; a paused one's,
    /// and Podman's, it does not (Podman 4.3 writes `Up 4 seconds` with a
    /// check too).
    #[test]
    fn the_list_gives_health_where_the_table_says_it_tells_it() {
        let body = br#"[
          {"Id":"a1","Names":["/web"],"State":"running","Status":"Up 3 minutes (healthy)","Labels":{"app":"web","n":2}},
          {"Id":"b2","Names":["/db"],"State":"running","Status":"Up 3 minutes","Ports":[{"PrivatePort":5432}]},
          {"Id":"c3","Names":["/p"],"State":"paused","Status":"Up 3 minutes (Paused)"},
          {"Id":"d4","Names":["/e"],"State":"exited","Status":"Exited (137) 1 second ago"},
          {"Id":"e5","Names":["/s\u0041"],"State":"running","Status":"Up 1 second (health: starting)"},
          {"Id":7,"Names":["/bad-id"]},
          "not an object"
        ]"#;
        let readiness = |table| -> Vec<(String, Option<Readiness>)> {
            parse_list(body, table, true)
                .expect("a list")
                .into_iter()
                .map(|l| (l.id.as_str().to_owned(), l.readiness))
                .collect()
        };
        let c = |h, p| Some(Readiness::container(h, p));
        assert_eq!(
            readiness(&DOCKER),
            [
                ("web".to_owned(), c(Health::Healthy, false)),
                ("db".to_owned(), c(Health::None, false)),
                ("p".to_owned(), None),
                ("e".to_owned(), c(Health::None, false)),
                ("sA".to_owned(), c(Health::Starting, false)),
            ]
        );
        assert_eq!(
            readiness(&PODMAN)
                .into_iter()
                .map(|(_, r)| r)
                .collect::<Vec<_>>(),
            [
                c(Health::None, false),
                c(Health::None, false),
                c(Health::None, true),
                c(Health::None, false),
                c(Health::None, false),
            ]
        );
        let listed = parse_list(body, &DOCKER, false).expect("a list");
        assert_eq!(listed[0].labels.get("n"), Some("2"));
        assert_eq!(listed[0].labels.get("app"), Some("web"));
        assert!(listed.iter().all(|l| l.readiness.is_none()));
        let killed = listed[3].reason.as_deref().expect("a reason");
        assert_eq!(killed.signal, Some(lookout_core::Signal::KILL));
    }
}
