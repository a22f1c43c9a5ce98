//! Containers, the objects a [`Mapping`] describes (Docker, Podman): the
//! list, and what each container event means.

use std::collections::HashMap;
use std::sync::Arc;

use lookout_core::rfc3339::parse_nanos as rfc3339_nanos;
use lookout_core::{EventKind, Health, Labels, Listed, Readiness};
use serde_json::Value;

use super::cursor::Cursor;
use super::event::Event;
use super::feed::MAX_INSPECTIONS;
use super::mapping::Mapping;
use super::objects::{Checks, Decision, History, KnownObjects, Objects, ReadinessFrom, Scope};
use crate::location::discovery::Discovery;

/// The actions that tell a container's readiness, besides its start and stop.
const READINESS_ACTIONS: [&str; 3] = ["health_status", "pause", "unpause"];

/// The action that tells the kernel's OOM killer ended a container's
/// process (Docker: logged before its `die`).
const OOM: &str = "oom";

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

    fn actions(&self, readiness: bool) -> Vec<&'static str> {
        let mapped = self.actions.iter().map(|(a, _)| *a).chain([OOM]);
        if readiness {
            mapped.chain(READINESS_ACTIONS).collect()
        } else {
            mapped.collect()
        }
    }

    fn labels_in_events(&self) -> bool {
        true
    }

    fn list_path(&self, _readiness: bool) -> &'static str {
        "/containers/json?all=1"
    }

    fn parse_list(&self, body: &[u8], readiness: bool) -> Result<Vec<Listed>, String> {
        parse_list(body, self, readiness)
    }

    fn readiness_from(&self) -> ReadinessFrom {
        if self.health.status_in_list {
            ReadinessFrom::Status
        } else {
            ReadinessFrom::Health {
                lists_none: self.health.lists_none,
            }
        }
    }

    fn history(&self) -> History {
        self.history
    }

    fn known(&'static self, scope: &Scope, listed: &[Listed]) -> KnownContainers {
        KnownContainers {
            mapping: self,
            containers: listed
                .iter()
                .filter_map(|l| {
                    let (health, paused) = match l.readiness {
                        Some(Readiness::Container { health, paused, .. }) => (health, paused),
                        _ => (Health::None, false),
                    };
                    let known = Container {
                        labels: Arc::new(l.labels.clone()),
                        health,
                        health_known: true,
                        paused,
                        since_start: SinceStart::default(),
                    };
                    Some((Arc::clone(l.uid.as_ref()?), known))
                })
                .collect(),
            replaying: false,
            readiness: scope.readiness,
            checks: scope.checks.clone(),
        }
    }

    fn known_history(&'static self, scope: &Scope) -> KnownContainers {
        KnownContainers {
            mapping: self,
            containers: HashMap::default(),
            replaying: true,
            readiness: scope.readiness,
            checks: scope.checks.clone(),
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
///
/// With readiness, it also follows each container's health and pause: a
/// start is `starting` for a container with a check (the engine sets it at
/// every start) and ready at once without one; whether it has one is fixed
/// at create, and learnt once per container (the snapshot's lists, else
/// one inspection at its first start), for the whole watch.
#[derive(Debug)]
pub struct KnownContainers {
    mapping: &'static Mapping,
    /// Container id → what is known of it. foldhash rather than std's
    /// `SipHash` (as the core's tracker): the ids are the user's own
    /// engine's, random hex, not input an attacker chooses, and the map is
    /// still seeded at random per process; `SipHash` cost some 2 % of an
    /// event in the firehose bench.
    pub(crate) containers: HashMap<Arc<str>, Container, foldhash::fast::RandomState>,
    /// Replaying the history: a container first seen in it takes its labels
    /// from the event's attributes, whatever the event.
    replaying: bool,
    /// Readiness is watched.
    readiness: bool,
    /// Which containers have a healthcheck (the watch's).
    checks: Checks,
}

/// One container as a session knows it.
#[derive(Debug)]
pub(crate) struct Container {
    pub(crate) labels: Arc<Labels>,
    /// Its health as last told (readiness watched).
    health: Health,
    /// Whether `health` is the container's: not for one first seen in a
    /// replayed history by another event than its `create`, until an
    /// event or an inspection tells it.
    health_known: bool,
    /// Paused (readiness watched).
    paused: bool,
    /// What the engine said of its stop since its last start.
    since_start: SinceStart,
}

/// What the engine said of a container's stop since its last start.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SinceStart {
    /// Asked to stop (a `kill` with a signal that stops, Podman's `stop`):
    /// its `die` is no failure, and its engine does not restart it.
    stop_requested: bool,
    /// The OOM killer ended it (Docker's `oom`, before the `die`).
    oom: bool,
}

impl Container {
    fn readiness(&self) -> Readiness {
        Readiness::container(self.health, self.paused)
    }
}

/// The kind that a readiness state is told as, for a running container.
fn readiness_kind(readiness: Readiness) -> EventKind {
    if readiness.is_ready() {
        EventKind::Ready
    } else {
        EventKind::Unready
    }
}

/// A health status as the engine writes it.
fn parse_health(status: &str) -> Option<Health> {
    Some(match status.trim() {
        "starting" => Health::Starting,
        "healthy" => Health::Healthy,
        "unhealthy" => Health::Unhealthy,
        "none" | "" => Health::None,
        _ => return None,
    })
}

/// An inspected container's health (`State.Health.Status`; none without a
/// check) and pause.
pub(crate) fn inspected_health(object: &Value) -> (Health, bool) {
    let state = object.get("State");
    let health = state
        .and_then(|s| s.get("Health"))
        .and_then(|h| h.get("Status"))
        .and_then(Value::as_str)
        .and_then(parse_health)
        .unwrap_or(Health::None);
    let paused = state
        .and_then(|s| s.get("Paused"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (health, paused)
}

/// `GET /containers/{id}/json`, for an id that cannot smuggle anything
/// into the path.
pub(super) fn inspect(uid: &str) -> Decision {
    if uid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Decision::Inspect(format!("/containers/{uid}/json"))
    } else {
        Decision::Undecodable("a container id that is not alphanumeric")
    }
}

impl KnownContainers {
    /// What an event of a container with readiness watched means, once
    /// its kind (a mapped transition, or `None` for a readiness action) and
    /// its container are known.
    fn with_readiness(&mut self, event: &Event, kind: Option<EventKind>) -> Decision {
        let uid = event.uid();
        let action = event.action();
        let has_check = self.checks.get(uid);
        let table = self.mapping.health;
        let Some(c) = self.containers.get_mut(uid) else {
            return Decision::Skip;
        };
        let labels = Arc::clone(&c.labels);
        let report = |kind, readiness| Decision::Report {
            kind,
            labels: Arc::clone(&labels),
            readiness: Some(readiness),
        };
        match kind {
            Some(EventKind::Started) => {
                let Some(has_check) = has_check else {
                    return inspect(uid);
                };
                c.health = if has_check {
                    Health::Starting
                } else {
                    Health::None
                };
                c.health_known = true;
                c.paused = false;
                report(EventKind::Started, c.readiness())
            }
            Some(EventKind::Stopped) => {
                if table.unhealthy_when_paused && has_check == Some(true) {
                    c.health = Health::Unhealthy;
                }
                c.paused = false;
                report(EventKind::Stopped, c.readiness())
            }
            Some(kind) => Decision::Report {
                kind,
                labels: Arc::clone(&labels),
                readiness: None,
            },
            None if Mapping::is_health(action) => {
                if !table.status_in_action {
                    return inspect(uid);
                }
                let status = action.split_once(':').map(|(_, status)| status);
                let Some(health) = status.and_then(parse_health) else {
                    return Decision::Undecodable("a health_status without a known status");
                };
                if health == Health::Unhealthy {
                    // Why: the failing check's output, which only an
                    // inspection reads (it also tells the status).
                    return inspect(uid);
                }
                self.checks.set(uid, health != Health::None);
                c.health = health;
                c.health_known = true;
                report(readiness_kind(c.readiness()), c.readiness())
            }
            None if action == "pause" => {
                match has_check {
                    Some(true) if table.unhealthy_when_paused => {
                        c.health = Health::Unhealthy;
                        c.health_known = true;
                    }
                    Some(false) => {
                        c.health = Health::None;
                        c.health_known = true;
                    }
                    _ => {}
                }
                c.paused = true;
                report(EventKind::Unready, c.readiness())
            }
            None => {
                // `unpause`: ready again if its health is. A container
                // first seen in a replay by this event (paused before it)
                // has a health that no event told: known by the engine's
                // rule when it has a check (Docker set it unhealthy at the
                // pause), else read.
                if !c.health_known {
                    match has_check {
                        Some(false) => c.health = Health::None,
                        Some(true) if table.unhealthy_when_paused => c.health = Health::Unhealthy,
                        _ => return inspect(uid),
                    }
                    c.health_known = true;
                }
                c.paused = false;
                report(readiness_kind(c.readiness()), c.readiness())
            }
        }
    }
}

impl KnownObjects for KnownContainers {
    fn event(&mut self, event: &Event) -> Decision {
        let provider = self.mapping.provider;
        let action = event.action();
        if action == OOM {
            // No transition: its `die` follows, and tells it.
            if let Some(c) = self.containers.get_mut(event.uid()) {
                c.since_start.oom = true;
            }
            return Decision::Skip;
        }
        let kind = self.mapping.kind(action);
        let telling = self.readiness
            && kind.is_none()
            && (Mapping::is_health(action) || matches!(action, "pause" | "unpause"));
        if kind.is_none() && !telling {
            if self.mapping.is_ignored(action) {
                tracing::trace!(provider, action, "ignoring an action");
            } else {
                tracing::debug!(provider, action, "ignoring an unknown action");
            }
            return Decision::Skip;
        }
        let uid = event.uid();
        if !self.containers.contains_key(uid) {
            if kind == Some(EventKind::Created) || self.replaying {
                // The engine mixes the labels into the attributes.
                let labels: Arc<Labels> =
                    Arc::new(event.labels_except(self.mapping.non_label_attributes));
                let known = Container {
                    labels,
                    health: Health::None,
                    health_known: kind == Some(EventKind::Created),
                    paused: false,
                    since_start: SinceStart::default(),
                };
                self.containers.insert(Arc::clone(uid), known);
            } else {
                tracing::debug!(
                    provider,
                    id = event.name(),
                    action,
                    "skipping an event of a container the snapshot did not list and this \
                     session did not see created: it was gone before the snapshot, which \
                     reported it"
                );
                return Decision::Skip;
            }
        }
        if kind == Some(EventKind::Removed) {
            let labels = self
                .containers
                .remove(uid)
                .map(|c| c.labels)
                .unwrap_or_default();
            return Decision::Report {
                kind: EventKind::Removed,
                labels,
                readiness: None,
            };
        }
        let Some(c) = self.containers.get_mut(uid) else {
            return Decision::Skip;
        };
        let reason = match stop_told(self.mapping, self.readiness, c, event, kind) {
            Ok(reason) => reason,
            Err(decision) => return decision,
        };
        let decision = if self.readiness {
            self.with_readiness(event, kind)
        } else {
            match kind {
                Some(kind) => Decision::Report {
                    kind,
                    labels: Arc::clone(&c.labels),
                    readiness: None,
                },
                None => Decision::Skip,
            }
        };
        explained(decision, reason)
    }

    fn inspected(&mut self, event: &Event, object: Option<&Value>) -> Decision {
        let uid = event.uid();
        let Some(c) = self.containers.get_mut(uid) else {
            return Decision::Skip;
        };
        let labels = Arc::clone(&c.labels);
        let Some(object) = object else {
            // Gone meanwhile: its removal follows; what it was cannot be read.
            tracing::debug!(
                provider = self.mapping.provider,
                id = event.name(),
                action = event.action(),
                "the container was removed before it could be inspected"
            );
            let kind = self.mapping.kind(event.action());
            let reason = (kind == Some(EventKind::Stopped))
                .then(|| died(self.mapping, event, c.since_start.oom, false));
            let decision = match kind {
                Some(kind) => Decision::Report {
                    kind,
                    labels,
                    readiness: None,
                },
                None => Decision::Skip,
            };
            return explained(decision, reason);
        };
        let action = event.action();
        if self.mapping.kind(action) == Some(EventKind::Stopped) {
            let code = exit_code(event);
            let (shown, by_policy, oom) = inspected_stop(object, event.time(), code);
            let oom = oom || c.since_start.oom;
            // A stop taken as requested is not restarted by a policy.
            let restarting = shown || (by_policy && !taken_as_requested(self.mapping, code, oom));
            let reason = died(self.mapping, event, oom, restarting);
            let decision = self.with_readiness(event, Some(EventKind::Stopped));
            return explained(decision, Some(reason));
        }
        let (health, paused) = inspected_health(object);
        self.checks.set(uid, has_check(object, health));
        if Mapping::is_health(action) {
            // The container's current status (Podman), once the check the
            // event announced is logged.
            if !check_logged(object, event.time()) && event.inspections() < MAX_INSPECTIONS {
                tracing::trace!(
                    provider = self.mapping.provider,
                    id = event.name(),
                    inspections = event.inspections(),
                    "the check the event announced is not logged yet: reading again"
                );
                return inspect(uid);
            }
            c.health = health;
            c.health_known = true;
            c.paused = paused;
            let readiness = c.readiness();
            let decision = Decision::Report {
                kind: readiness_kind(readiness),
                labels,
                readiness: Some(readiness),
            };
            // A failing check says why, in its output.
            let failure = (health == Health::Unhealthy)
                .then(|| failing_check(object))
                .flatten();
            return explained(decision, failure.map(Arc::unwrap_or_clone));
        }
        if action == "unpause" {
            // Its health, which no event told (see `with_readiness`).
            c.health = health;
            c.health_known = true;
        }
        // A start of a container not known to have a check or not: whether
        // it has one is all that is read (a check made since the start may
        // have passed already; its event follows).
        self.with_readiness(event, self.mapping.kind(action))
    }
}

/// How long before a `health_status` event the check it announces may
/// have been logged: Podman 4.7 and later log the result, then emit the
/// event (with the current status) at once.
const LOGGED_BEFORE_EVENT: i64 = 50_000_000;

/// Whether an inspected container's health log holds the check that a
/// `health_status` event at `time` announced. Podman before 4.7 emits the
/// event while the check runs, and logs its result (what an inspection
/// reads) when it ends: until then the newest entry (`State.Health.Log`)
/// is the previous check's, which ended before this one started. So the
/// check is logged when the newest entry ended after the event (Podman
/// 4.3), or at most [`LOGGED_BEFORE_EVENT`] before it (4.7: logged, then
/// told). A log that cannot be read tells nothing: taken as logged.
pub(crate) fn check_logged(object: &Value, time: Cursor) -> bool {
    let newest_end = object
        .get("State")
        .and_then(|s| s.get("Health"))
        .and_then(|h| h.get("Log"))
        .and_then(Value::as_array)
        .and_then(|log| log.last())
        .and_then(|entry| entry.get("End"))
        .and_then(Value::as_str)
        .and_then(rfc3339_nanos);
    newest_end.is_none_or(|end| end >= time.unix_nanos().saturating_sub(LOGGED_BEFORE_EVENT))
}

/// Whether an inspected container has a healthcheck: a health state, or a
/// `Config.Healthcheck.Test` that is not `["NONE"]`.
pub(crate) fn has_check(object: &Value, health: Health) -> bool {
    if health != Health::None {
        return true;
    }
    let test = object
        .get("Config")
        .and_then(|c| c.get("Healthcheck"))
        .and_then(|h| h.get("Test"))
        .and_then(Value::as_array);
    test.and_then(|t| t.first())
        .and_then(Value::as_str)
        .is_some_and(|first| !first.is_empty() && first != "NONE")
}

mod list;
mod why;

pub(crate) use list::{container_name, parse_list};
use why::{died, exit_code, explained, inspected_stop, stop_told, taken_as_requested};
pub(crate) use why::{failing_check, oom_killed};

#[cfg(test)]
mod tests;
