//! Docker Swarm's services as a resilient, leak-free stream.
//!
//! [`watch`] connects to a Swarm manager's Docker API and returns a
//! [`Watch`]: a `Stream` of [`Item`]s — instance events
//! and connection statuses — that never ends and never gives up. An instance
//! is a service. The connection, the `/events` decoding, the cursor and the
//! probe are [`lookout_moby`]'s; this crate says what a service
//! event means ([`SERVICES`]), and why a service stopped or fails (see
//! [Why](#why-stops-and-failures)).
//!
//! ```no_run
//! use lookout_swarm::{SwarmConfig, watch};
//! use tokio_stream::StreamExt;
//!
//! # async fn run() -> Result<(), lookout_swarm::ConfigError> {
//! // Host: DOCKER_HOST or the default socket; it must be a manager's.
//! let config = SwarmConfig::default().label("app", "web");
//! let mut events = watch(config)?.events(); // only events; statuses go to `tracing`
//! while let Some(event) = events.next().await {
//!     println!("{} {} ({}) {:?}", event.id, event.kind, event.origin, event.labels);
//! }
//! // Dropping `events` closes the connection; nothing keeps running.
//! # Ok(()) }
//! ```
//!
//! A runnable example: `cargo run -p lookout-swarm --example swarm_watch`
//! ([`examples/swarm_watch.rs`](https://github.com/lookout-rs/lookout/blob/main/crates/provider-swarm/examples/swarm_watch.rs)).
//!
//! # Guarantees
//!
//! Those of [`Watch`](lookout_core::Watch#guarantees). What is Swarm's own:
//! - after a reconnect, what happened meanwhile comes only as the service
//!   list's difference (`resync`): a service event carries the service's
//!   `UpdatedAt`, so dockerd's `since` cannot prove a replay complete, and
//!   the new subscription starts from now
//!   ([`History::Unreliable`]);
//! - an event whose service cannot be inspected is skipped (one `warn`),
//!   like an undecodable one; an inspection under way is closed with the
//!   stream;
//! - the liveness probe is `GET /_ping`, on a connection of its own.
//!
//! # Mapping
//!
//! The id is the service name, the uid the service ID, the labels the
//! service's own labels (`Spec.Labels`, not its containers'). "Running" is the
//! desired state, not the tasks' state: a replicated service runs while its
//! desired replicas are above 0; a global service (or a job) runs while it
//! exists.
//!
//! | service event (`type=service`) | event |
//! |---|---|
//! | `create` | [`Created`](lookout_core::EventKind::Created), then [`Started`](lookout_core::EventKind::Started) unless it has 0 replicas |
//! | `update` with `replicas.new` = 0 | [`Stopped`](lookout_core::EventKind::Stopped), outcome `stopped` |
//! | `update` with `replicas.new` > 0 | [`Started`](lookout_core::EventKind::Started) |
//! | `update` without `replicas.*` (an image, env or label change, a mode change, `--force`) | the service is inspected: its desired state and labels now |
//! | `remove` | [`Removed`](lookout_core::EventKind::Removed) |
//!
//! Each passes only when it changes the known state: scaling 1 → 2 reports
//! nothing, 0 → 2 `Started`, 2 → 0 `Stopped`.
//!
//! # Why: stops and failures
//!
//! What Swarm says, and what lookout tells of it (an event's
//! [`Reason`]):
//!
//! | Swarm | lookout |
//! |---|---|
//! | a replicated service scaled to 0 (`docker service scale s=0`, `--replicas 0`): an `update` event, an inspection or a list that says 0 replicas | [`Stopped`](lookout_core::EventKind::Stopped) with the outcome `stopped` ([`Outcome::Stopped`]): only a request sets the replicas |
//! | its tasks still shutting down after the scale | nothing more: the `stopped` was told at the scale (see below) |
//! | with readiness watched, a task that failed or was rejected (its `Status.State`), while the service runs fewer tasks than desired | [`Failing`](lookout_core::EventKind::Failing), `message`: the task's `Status.Err`, as `docker service ps --no-trunc` shows it in its `ERROR` column (the CLI quotes it: `"task: non-zero exit (7)"`); `exit_code`: a failed task's container's exit code |
//! | a later task failing with other words | `failing` again, with them |
//! | no task of the service meant to run any more (`--restart-max-attempts` spent: every task is desired `shutdown`) | `failing` again, with `failed: true`: Swarm gave up |
//! | every desired task runs again | nothing: the failure is over, and a later one is told anew |
//!
//! A service fails when a slot of it (a replica; a node, for a global
//! service) has a newest task that failed or was rejected, or a restart
//! that has not run yet after such a task of the same spec: a failure of a
//! spec the service has left behind (the task before an update) is not
//! told. When several slots fail, the most recent failure is told. A
//! service that runs all its desired tasks does not fail, whatever its
//! history.
//!
//! How lookout learns it: Swarm sends no task events, and the service list
//! counts the running tasks without saying why the others do not run. So
//! the readiness poll ([`SwarmConfig::readiness`](lookout_moby::Config::readiness),
//! every [`readiness_poll`](lookout_moby::Config::readiness_poll) and
//! within a second after a change) also reads the tasks of the services it
//! finds running but not ready: one `GET /tasks?filters={"service":[…]}`
//! per poll, none while every watched service runs its tasks, its answer
//! capped like the service list. Hence:
//! - without readiness, no `failing` is told;
//! - a failure is told by the first poll that sees it, as
//!   [`Resync`](lookout_core::Origin::Resync) at the local time, even when
//!   the service was never ready;
//! - the snapshot of a (re)connection reads the same task list (when a
//!   service it lists runs but is not ready): a failure already told is
//!   not told again, one found first by the snapshot is told once, as
//!   `resync`;
//! - a service whose tasks run for a moment before they fail may be found
//!   running all its tasks by a poll that lands then: `ready`, its failure
//!   over; the next poll that finds it failing tells `unready`, then the
//!   failure again;
//! - a poll whose task list names a service removed since the service list
//!   (`404`) tells nothing; the next poll reads both again.
//!
//! **No `stopping`.** A scale to 0 is told `stopped` as Swarm accepts it
//! (the desired state), while its tasks may still run their stop grace
//! period (`--stop-grace-period`, 10 s by default). Telling
//! [`Stopping`](lookout_core::EventKind::Stopping) first and `stopped` once
//! the tasks are gone would need what Swarm does not send — an event when
//! the last task ends — so a request per scale, or the readiness poll
//! (which exists only with readiness watched, and lists a stopped service
//! as it lists any other). lookout keeps the desired state, and says so.
//!
//! # What dockerd sends, and what follows
//!
//! Measured on dockerd 20.10: a service event carries only the attributes
//! `name` and, when an update changed the replica count, `replicas.old` and
//! `replicas.new` — never the service's labels. So:
//! - the label filter ([`SwarmConfig::labels`](lookout_moby::Config::labels))
//!   is applied by the engine to the service list, and by lookout to the
//!   events, with the labels it knows of each service: from the list, or from
//!   an inspection (`GET /services/{id}`) of a service first seen in an event
//!   (a `create`, or a service whose labels changed). An update that changes
//!   the labels moves a service into the watch (`Created`) or out of it
//!   (`Removed`), as the next resync would find it. An update that scales and
//!   changes the labels at once keeps the known labels until the next update
//!   without `replicas.*` or the next resync;
//! - an inspection reads the service as it is now, which may already be
//!   ahead of the event (a service scaled right after its creation is
//!   reported created with its replicas then); a service removed before its
//!   inspection is not reported at all;
//! - a service event's time is the service's `CreatedAt`/`UpdatedAt` (set by
//!   the manager that made the change; a `remove` is stamped with the local
//!   clock), so times are not in order across the feed, and a change made
//!   while disconnected may carry a time older than the last event seen.
//!   A redial therefore replays nothing with `since`: the service list tells
//!   what changed ([`Objects::history`]).
//!
//! # Managers only
//!
//! Service events and the service list come from the Swarm's state, which
//! only managers hold: point the watch at a manager (any manager, not only
//! the leader). On a worker, or on an engine that is in no Swarm, listing
//! services fails (`503 This node is not a swarm manager…`): the stream
//! reports it as [`Status::Disconnected`]
//! and keeps retrying, so a node promoted later is picked up. A manager
//! that loses its events for a while (a leader election, a hung connection)
//! is caught up by the periodic resync
//! ([`WatchConfig::resync_every`]),
//! the safety net for any event the engine did not send.
//!
//! # The API and its dependencies
//!
//! [`SwarmConfig`] is an alias of [`lookout_moby::Config`] and [`SwarmDial`] one of
//! [`lookout_moby::CompatDial`]: this crate's configuration *is*
//! `lookout-moby`'s (private fields, builder methods), so an option added
//! there is one here. [`ConfigError`], [`CompatError`], [`Cursor`] and
//! [`ApiVersion`] are `lookout-moby`'s, re-exported.
//!
//! Public dependencies (their types are in this crate's API, so their
//! major version is part of it), both re-exported whole so that a crate
//! depending on this one alone can name every type:
//!
//! - **`lookout-core`** 0.1 ([`lookout_core`]): the [`Watch`] and what it
//!   yields ([`Item`], [`InstanceEvent`], [`EventKind`], [`Status`],
//!   [`Labels`]) and its settings ([`WatchConfig`]), re-exported here too.
//! - **`lookout-moby`** 0.1 ([`lookout_moby`]): the configuration, the
//!   dial, the errors and where the engine is
//!   ([`Endpoint`](lookout_moby::Endpoint), for
//!   [`lookout_moby::watch_at`]).
//!
//! # Features
//!
//! None: TLS (`https://` hosts and `tcp://` hosts with `DOCKER_TLS_VERIFY`,
//! rustls with ring) is always built in (`lookout-moby`'s `tls`).

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use lookout_core::{InstanceId, Listed, Outcome, Readiness, Reason};
use lookout_moby::{
    Decision, Discovery, Event, History, KnownObjects, Objects, ReadinessFrom, Scope, labels_of,
    matches,
};
use serde_json::Value;

mod tasks;

pub use lookout_core::{self, EventKind, InstanceEvent, Item, Labels, Status, Watch, WatchConfig};
pub use lookout_moby::{self, ApiVersion, CompatError, ConfigError, Cursor};

/// What to watch: [`lookout_moby::Config`] (host, labels, watch settings). Without
/// a host: as the docker CLI finds it ([`lookout_moby::Endpoint`]:
/// `DOCKER_HOST`, `DOCKER_CONTEXT`, `currentContext`, else
/// `unix:///var/run/docker.sock`), resolved once, when the watch is made.
pub type SwarmConfig = lookout_moby::Config;

/// Dials a Swarm manager; the [`Dial`](lookout_core::Dial) behind [`watch`].
pub type SwarmDial = lookout_moby::CompatDial<Services>;

/// Swarm's services, as [`lookout_moby`] watches them.
pub static SERVICES: Services = Services;

/// Watches the services of the Swarm whose manager `config` points at.
///
/// Fails only when the host (given, or `DOCKER_HOST` now) cannot be parsed;
/// an engine that is down (or not a manager) is no error: the stream reports
/// it and retries.
pub fn watch(config: SwarmConfig) -> Result<Watch<SwarmDial>, ConfigError> {
    lookout_moby::watch(&SERVICES, config)
}

/// The table of Swarm's services: subscribe to `type=service` events (scope
/// `swarm`), list `/services`, inspect `/services/{id}`. See the
/// [crate documentation](crate) for the mapping.
#[derive(Debug, Clone, Copy)]
pub struct Services;

impl Objects for Services {
    type Known = KnownServices;

    fn provider(&self) -> &'static str {
        "swarm"
    }

    fn discovery(&self) -> &Discovery {
        &Discovery::DOCKER
    }

    fn event_type(&self) -> &'static str {
        "service"
    }

    fn actions(&self, _readiness: bool) -> Vec<&'static str> {
        vec!["create", "update", "remove"]
    }

    fn labels_in_events(&self) -> bool {
        false
    }

    fn list_path(&self, readiness: bool) -> &'static str {
        if readiness {
            "/services?status=true"
        } else {
            "/services"
        }
    }

    fn readiness_from(&self) -> ReadinessFrom {
        ReadinessFrom::Polled
    }

    fn parse_list(&self, body: &[u8], readiness: bool) -> Result<Vec<Listed>, String> {
        let value: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let Value::Array(entries) = value else {
            return Err("not a JSON array".to_owned());
        };
        Ok(entries
            .iter()
            .filter_map(|entry| {
                let Some(s) = Service::decode(entry) else {
                    tracing::warn!(
                        provider = "swarm",
                        entry = %entry.to_string().chars().take(200).collect::<String>(),
                        "skipping a listed service without an ID or a Spec.Name"
                    );
                    return None;
                };
                Some(
                    Listed::new(InstanceId::from(s.name), s.running)
                        .uid(Some(Arc::from(s.uid)))
                        .labels(s.labels)
                        .readiness(readiness.then(|| service_status(entry)).flatten())
                        .reason((!s.running).then(scaled_to_zero)),
                )
            })
            .collect())
    }

    fn polled_failures(
        &self,
        uids: &[&str],
    ) -> Option<(String, fn(&[u8]) -> Result<Vec<(String, Reason)>, String>)> {
        Some((tasks::path(uids), tasks::failures))
    }

    fn history(&self) -> History {
        History::Unreliable
    }

    fn known(&'static self, scope: &Scope, listed: &[Listed]) -> KnownServices {
        KnownServices {
            filter: scope.labels.clone(),
            services: listed
                .iter()
                .filter_map(|l| Some((Arc::clone(l.uid.as_ref()?), Arc::new(l.labels.clone()))))
                .collect(),
        }
    }
}

/// The services one session reports — those carrying the filter's labels,
/// listed or seen in an event — and their labels.
#[derive(Debug)]
pub struct KnownServices {
    filter: Labels,
    /// Service ID → labels.
    services: HashMap<Arc<str>, Arc<Labels>>,
}

impl KnownObjects for KnownServices {
    fn event(&mut self, event: &Event) -> Decision {
        let uid = event.uid();
        match event.action() {
            "create" => inspect(uid),
            "update" => match (self.services.get(uid), desired_replicas(event)) {
                (Some(labels), Some(0)) => stopped(Arc::clone(labels)),
                (Some(labels), Some(_)) => Decision::Report {
                    kind: EventKind::Started,
                    labels: Arc::clone(labels),
                    readiness: None,
                },
                // Not scaled (or not known yet): read what it is now.
                _ => inspect(uid),
            },
            "remove" => {
                if let Some(labels) = self.services.remove(uid) {
                    Decision::Report {
                        kind: EventKind::Removed,
                        labels,
                        readiness: None,
                    }
                } else {
                    tracing::debug!(
                        provider = "swarm",
                        id = event.name(),
                        "skipping the removal of a service not watched (outside the label \
                         filter, or gone before the snapshot)"
                    );
                    Decision::Skip
                }
            }
            action => {
                tracing::debug!(provider = "swarm", action, "ignoring an unknown action");
                Decision::Skip
            }
        }
    }

    fn inspected(&mut self, event: &Event, object: Option<&Value>) -> Decision {
        let Some(object) = object else {
            tracing::debug!(
                provider = "swarm",
                id = event.name(),
                action = event.action(),
                "the service was removed before it could be inspected"
            );
            return Decision::Skip;
        };
        let Some(service) = Service::decode(object) else {
            return Decision::Undecodable("the inspected service has no ID or Spec.Name");
        };
        let uid = event.uid();
        if service.uid != &**uid {
            return Decision::Undecodable("the inspected service is another one");
        }
        if matches(&service.labels, &self.filter) {
            let labels = Arc::new(service.labels);
            self.services.insert(Arc::clone(uid), Arc::clone(&labels));
            let kind = match (service.running, event.action()) {
                (true, _) => EventKind::Started,
                (false, "create") => EventKind::Created,
                (false, _) => return stopped(labels),
            };
            Decision::Report {
                kind,
                labels,
                readiness: None,
            }
        } else if let Some(labels) = self.services.remove(uid) {
            // Its labels changed: it leaves the watch, as a resync would find.
            Decision::Report {
                kind: EventKind::Removed,
                labels,
                readiness: None,
            }
        } else {
            Decision::Skip
        }
    }
}

/// Why a service does not run: its desired replicas are 0, which only a
/// request sets (`docker service scale …=0`, `--replicas 0`).
fn scaled_to_zero() -> Arc<Reason> {
    static REASON: LazyLock<Arc<Reason>> =
        LazyLock::new(|| Arc::new(Reason::stop(Outcome::Stopped)));
    Arc::clone(&REASON)
}

/// A service that no longer runs: [`Stopped`](EventKind::Stopped), scaled
/// to 0.
fn stopped(labels: Arc<Labels>) -> Decision {
    Decision::Explained {
        kind: EventKind::Stopped,
        labels,
        readiness: None,
        reason: scaled_to_zero(),
    }
}

/// `GET /services/{id}`, for an ID that cannot smuggle anything into the path.
fn inspect(uid: &str) -> Decision {
    if uid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Decision::Inspect(format!("/services/{uid}"))
    } else {
        Decision::Undecodable("a service ID that is not alphanumeric")
    }
}

/// A listed service's readiness (`GET /services?status=true`): its
/// `ServiceStatus`, desired tasks and running tasks (Swarm moves a task to
/// `running` only once its container's healthcheck passed).
fn service_status(entry: &Value) -> Option<Readiness> {
    let status = entry.get("ServiceStatus")?;
    let count = |key| {
        status
            .get(key)
            .and_then(Value::as_u64)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    Some(Readiness::replicas(
        count("DesiredTasks"),
        count("RunningTasks"),
        true,
    ))
}

/// The desired replica count an update event says it set (`replicas.new`).
fn desired_replicas(event: &Event) -> Option<u64> {
    event.attribute("replicas.new")?.trim().parse().ok()
}

/// What lookout reads of a service (an entry of `/services`, or
/// `/services/{id}`).
struct Service<'a> {
    uid: &'a str,
    name: &'a str,
    labels: Labels,
    running: bool,
}

impl<'a> Service<'a> {
    fn decode(v: &'a Value) -> Option<Self> {
        let uid = v.get("ID")?.as_str().filter(|s| !s.is_empty())?;
        let spec = v.get("Spec")?;
        let name = spec.get("Name")?.as_str().filter(|s| !s.is_empty())?;
        Some(Self {
            uid,
            name,
            labels: labels_of(spec.get("Labels")),
            running: desired_running(spec.get("Mode")),
        })
    }
}

/// A replicated service runs while its desired replicas are above 0; any
/// other mode (global, a job) while it exists.
fn desired_running(mode: Option<&Value>) -> bool {
    match mode.and_then(|m| m.get("Replicated")) {
        Some(replicated) => {
            replicated
                .get("Replicas")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                > 0
        }
        None => true,
    }
}

#[cfg(test)]
mod tests;
