//! Containers, the objects a [`Mapping`] describes (Docker, Podman): the
//! list, and what each container event means.

use std::collections::HashMap;
use std::sync::Arc;

use lookout_core::{EventKind, InstanceId, Labels, Listed};
use serde_json::Value;

use super::history::History;
use super::host::Discovery;
use super::mapping::Mapping;
use super::objects::{Decision, Event, KnownObjects, Objects, labels_of, preview, string_value};

impl Objects for Mapping {
    type Known = KnownContainers;

    fn provider(&self) -> &'static str {
        self.provider
    }

    fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    fn event_type(&self) -> &'static str {
        "container"
    }

    fn actions(&self) -> Vec<&'static str> {
        self.actions.iter().map(|(a, _)| *a).collect()
    }

    fn labels_in_events(&self) -> bool {
        true
    }

    fn list_path(&self) -> &'static str {
        "/containers/json?all=1"
    }

    fn parse_list(&self, body: &[u8]) -> Result<Vec<Listed>, String> {
        parse_list(body, self)
    }

    fn history(&self) -> History {
        self.history
    }

    fn known(&'static self, _labels: &Labels, listed: &[Listed]) -> KnownContainers {
        KnownContainers {
            mapping: self,
            containers: listed
                .iter()
                .filter_map(|l| Some((Arc::clone(l.uid.as_ref()?), Arc::new(l.labels.clone()))))
                .collect(),
            replaying: false,
        }
    }

    fn known_history(&'static self, _labels: &Labels) -> KnownContainers {
        KnownContainers {
            mapping: self,
            containers: HashMap::new(),
            replaying: true,
        }
    }
}

/// The containers one session may report, and their labels.
///
/// On a subscription, a change passes only for a container the snapshot
/// listed or whose `create` this session saw. Any other event is from before
/// the snapshot, about a container that was already gone when it was taken
/// (the resync reported its removal): passing it on would resurrect the
/// container for a moment. While a redial replays the engine's history
/// (before any list), every container in it passes: the session before saw
/// them. The engine filters the events by label, so every container here is
/// watched.
#[derive(Debug)]
pub struct KnownContainers {
    mapping: &'static Mapping,
    /// Container id → labels.
    pub(crate) containers: HashMap<Arc<str>, Arc<Labels>>,
    /// Replaying the history: a container first seen in it takes its labels
    /// from the event's attributes, whatever the event.
    replaying: bool,
}

impl KnownObjects for KnownContainers {
    fn event(&mut self, event: &Event) -> Decision {
        let provider = self.mapping.provider;
        let action = event.action();
        let Some(kind) = self.mapping.kind(action) else {
            if self.mapping.is_ignored(action) {
                tracing::trace!(provider, action, "ignoring an action");
            } else {
                tracing::debug!(provider, action, "ignoring an unknown action");
            }
            return Decision::Skip;
        };
        let uid = event.uid();
        let labels = if let Some(labels) = self.containers.get(uid) {
            Arc::clone(labels)
        } else if kind == EventKind::Created || self.replaying {
            // The engine mixes the labels into the attributes.
            let labels: Arc<Labels> = Arc::new(
                event
                    .attributes()
                    .iter()
                    .filter(|(k, _)| !self.mapping.non_label_attributes.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), string_value(v)))
                    .collect(),
            );
            self.containers.insert(Arc::clone(uid), Arc::clone(&labels));
            labels
        } else {
            tracing::debug!(
                provider,
                id = event.name(),
                action,
                "skipping an event of a container the snapshot did not list and this session \
                 did not see created: it was gone before the snapshot, which reported it"
            );
            return Decision::Skip;
        };
        if kind == EventKind::Removed {
            self.containers.remove(uid);
        }
        Decision::Report { kind, labels }
    }
}

/// Decodes `GET /containers/json?all=1`. An entry without an id or a name is
/// skipped with a warning.
pub(crate) fn parse_list(body: &[u8], mapping: &Mapping) -> Result<Vec<Listed>, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let Value::Array(entries) = value else {
        return Err("not a JSON array".to_owned());
    };
    let mut listed = Vec::with_capacity(entries.len());
    for entry in &entries {
        let uid = entry
            .get("Id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let name = container_name(entry);
        let (Some(uid), Some(name)) = (uid, name) else {
            tracing::warn!(
                provider = mapping.provider,
                entry = %preview(entry.to_string().as_bytes()),
                "skipping a listed container without an Id or a name"
            );
            continue;
        };
        let state = entry.get("State").and_then(Value::as_str).unwrap_or("");
        listed.push(Listed {
            id: InstanceId::from(name),
            // A paused container still runs: no event says otherwise (`pause`
            // is not a stop). A restarting one has died and not started yet.
            running: matches!(state, "running" | "paused"),
            uid: Some(Arc::from(uid)),
            labels: labels_of(entry.get("Labels")),
            readiness: None,
        });
    }
    Ok(listed)
}

/// The container's own name from `Names`: without the leading `/`, and not a
/// legacy link alias (`/other/alias`).
fn container_name(entry: &Value) -> Option<&str> {
    let names = entry.get("Names")?.as_array()?;
    let names = || {
        names
            .iter()
            .filter_map(Value::as_str)
            .map(|n| n.trim_start_matches('/'))
            .filter(|n| !n.is_empty())
    };
    names()
        .find(|n| !n.contains('/'))
        .or_else(|| names().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    static TABLE: Mapping = Mapping {
        provider: "test",
        actions: &[],
        ignored: &[],
        non_label_attributes: &[],
        history: History::Until,
        discovery: Discovery {
            host_var: "LOOKOUT_TEST_HOST",
            sockets: &[],
        },
    };

    #[test]
    fn parses_the_list() {
        let body = br#"[
          {"Id":"a1","Names":["/web"],"State":"running","Labels":{"app":"web"}},
          {"Id":"b2","Names":["/other/alias","/db"],"State":"exited","Labels":null},
          {"Id":"c3","Names":["/paused"],"State":"paused","Labels":{}},
          {"Id":"d4","Names":["/restarting"],"State":"restarting"},
          {"Names":["/no-id"],"State":"running"},
          {"Id":"e5","Names":[],"State":"running"}
        ]"#;
        let listed = parse_list(body, &TABLE).expect("valid list");
        let summary: Vec<(&str, bool, &str, usize)> = listed
            .iter()
            .map(|l| {
                (
                    l.id.as_str(),
                    l.running,
                    l.uid.as_deref().unwrap_or(""),
                    l.labels.len(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("web", true, "a1", 1),
                ("db", false, "b2", 0),
                ("paused", true, "c3", 0),
                ("restarting", false, "d4", 0),
            ]
        );
        assert!(parse_list(b"{}", &TABLE).is_err());
        assert!(parse_list(b"[", &TABLE).is_err());
    }
}
