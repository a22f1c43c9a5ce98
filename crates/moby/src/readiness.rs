//! Readiness where the events alone do not tell it: a snapshot's container
//! health, from the engine's `health` list filter (one list per status), and
//! the polled list of an engine without readiness events (Swarm).

use std::collections::HashMap;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll as TaskPoll;
use std::time::Duration;

use bytes::Bytes;
use lookout_core::{Health, Listed, Observation, Readiness};
use tokio::time::{Instant, Sleep, sleep_until};

use super::containers::{has_check, inspected_health};
use super::cursor::Cursor;
use super::host::{Host, TlsEnv};
use super::inspect::{Inspection, inspect};
use super::objects::{Objects, Scope};
use super::{CompatError, INSPECT_TIMEOUT, MAX_LIST, http, list_path};

/// The statuses a snapshot lists, in order: a container listed under two
/// (its status changed between the requests) takes the later one's.
const LISTED: [(&str, Health); 4] = [
    ("starting", Health::Starting),
    ("healthy", Health::Healthy),
    ("unhealthy", Health::Unhealthy),
    ("none", Health::None),
];

/// Fills in the health of each `listed` container (their pause is the
/// list's): one list per status (`none` only where the engine's filter
/// finds it, see [`HealthTable::lists_none`](crate::HealthTable::lists_none)),
/// then, for a container in none of them, what the watch learnt of it (no
/// check: `none`), else one inspection. What it learns of each container's
/// check is kept in the scope, for the watch's later sessions.
pub(crate) async fn health<O: Objects>(
    objects: &'static O,
    lists_none: bool,
    host: &Host,
    tls: &TlsEnv,
    scope: &Scope,
    listed: &mut [Listed],
) -> Result<(), CompatError> {
    let base = objects.list_path(true);
    let mut status: HashMap<Arc<str>, Health> = HashMap::with_capacity(listed.len());
    for (name, health) in LISTED {
        if health == Health::None && !lists_none {
            continue;
        }
        let path = list_path(base, &scope.labels, Some(name));
        let body = get(host, tls, &path).await?;
        let found = objects
            .parse_list(&body, false)
            .map_err(|reason| CompatError::List {
                path: http::strip_query(&path).to_owned(),
                reason,
            })?;
        for l in found {
            if let Some(uid) = l.uid {
                status.insert(uid, health);
            }
        }
    }
    let mut inspected = 0usize;
    for l in listed.iter_mut() {
        let Some(uid) = l.uid.clone() else { continue };
        let health = match (status.get(&uid), scope.checks.get(&uid)) {
            (Some(&health), _) => health,
            (None, Some(false)) => Health::None,
            // Not in a list (its status changed meanwhile, or the engine
            // lists no `none`), and not known to have no check: read it.
            (None, _) => {
                inspected += 1;
                let path = format!("/containers/{uid}/json");
                if !uid.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    continue;
                }
                match inspect(host, tls, &path, INSPECT_TIMEOUT).await? {
                    Inspection::Found(object) => {
                        let (health, _) = inspected_health(&object);
                        scope.checks.set(&uid, has_check(&object, health));
                        health
                    }
                    // Gone since the list: the next event or snapshot says so.
                    Inspection::Gone | Inspection::Unusable(_) => Health::None,
                }
            }
        };
        if status.contains_key(&uid) {
            scope.checks.set(&uid, health != Health::None);
        }
        if let Some(Readiness::Container { paused, .. }) = l.readiness {
            l.readiness = Some(Readiness::container(health, paused));
        }
    }
    scope.checks.retain(listed);
    tracing::debug!(
        provider = objects.provider(),
        containers = listed.len(),
        inspected,
        "health listed"
    );
    Ok(())
}

async fn get(host: &Host, tls: &TlsEnv, path: &str) -> Result<Bytes, CompatError> {
    let name = http::strip_query(path);
    http::get(host, tls, path)
        .await?
        .ok(name)
        .await?
        .body(name, MAX_LIST)
        .await
}

/// What a session waits for next: a piece of the `/events` body, or the
/// readiness poll.
pub(crate) enum Next {
    Chunk(Option<Result<Bytes, hyper::Error>>),
    Poll,
}

/// The readiness poll of one session: the objects' list (with the label
/// filter), every `every` and soon after a change, each listed object as an
/// [`Observation::Polled`].
pub(crate) struct Poll<O: 'static> {
    objects: &'static O,
    path: String,
    every: Duration,
    timer: Pin<Box<Sleep>>,
}

impl<O: Objects> Poll<O> {
    pub(crate) fn new(objects: &'static O, path: String, every: Duration) -> Self {
        Self {
            objects,
            path,
            every,
            timer: Box::pin(sleep_until(Instant::now() + every)),
        }
    }

    /// A change was seen: poll within a second (its readiness follows it).
    pub(crate) fn soon(&mut self) {
        let soon = Instant::now() + Duration::from_secs(1).min(self.every);
        if self.timer.deadline() > soon {
            self.timer.as_mut().reset(soon);
        }
    }

    /// The next piece of `events`, or the poll when it is due first.
    pub(crate) async fn next_or(&mut self, events: &mut http::Exchange) -> Next {
        poll_fn(|cx| {
            if let TaskPoll::Ready(chunk) = events.poll_chunk(cx) {
                return TaskPoll::Ready(Next::Chunk(chunk));
            }
            if self.timer.as_mut().poll(cx).is_ready() {
                return TaskPoll::Ready(Next::Poll);
            }
            TaskPoll::Pending
        })
        .await
    }

    /// Polls now: each listed object's readiness. `Err` when the engine
    /// cannot be read (the session ends, and the core redials).
    pub(crate) async fn run(
        &mut self,
        host: &Host,
        tls: &TlsEnv,
    ) -> Result<Vec<Observation<Cursor>>, CompatError> {
        let started = Instant::now();
        let body = tokio::time::timeout(INSPECT_TIMEOUT, get(host, tls, &self.path))
            .await
            .unwrap_or_else(|_| {
                Err(CompatError::Timeout {
                    path: http::strip_query(&self.path).to_owned(),
                    after: INSPECT_TIMEOUT,
                })
            })?;
        self.timer.as_mut().reset(started + self.every);
        let listed = self
            .objects
            .parse_list(&body, true)
            .map_err(|reason| CompatError::List {
                path: http::strip_query(&self.path).to_owned(),
                reason,
            })?;
        Ok(listed
            .into_iter()
            .filter_map(|l| {
                Some(Observation::Polled {
                    readiness: l.readiness?,
                    id: l.id,
                    uid: l.uid,
                })
            })
            .collect())
    }
}
