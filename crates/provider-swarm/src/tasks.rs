//! Why a service fails, from its tasks (`GET /tasks`): Swarm sends no task
//! events, and the service list tells how many tasks run, not why the
//! others do not. The readiness poll reads the tasks of the services it
//! found running but not ready (see [`Objects::polled_failures`]).
//!
//! [`Objects::polled_failures`]: lookout_moby::Objects::polled_failures

use std::collections::HashMap;

use lookout_core::Reason;
use lookout_core::rfc3339::parse_nanos;
use serde_json::{Value, json};

/// `GET /tasks` of these services (by ID): every task Swarm keeps of them,
/// its history included (`docker service ps` lists the same).
pub(crate) fn path(services: &[&str]) -> String {
    let filters = json!({ "service": services }).to_string();
    lookout_moby::filtered_path("/tasks", &filters)
}

/// Decodes a `/tasks` list: each failing service's ID and why, in the order
/// of their IDs. A service fails when a slot of it (a replica; a node, for
/// a global service) has a newest task that failed or was rejected, or one
/// that has not run yet (a restart under way) after such a task of the same
/// spec. Told is the most recent of those tasks: its error as `docker
/// service ps --no-trunc` shows it in its `ERROR` column (`Status.Err`,
/// which the CLI quotes), its exit code, and whether Swarm gave up on the
/// service (no task of it is meant to run any more: its restart policy's
/// attempts are spent). An undecodable entry is skipped (one `warn`).
pub(crate) fn failures(body: &[u8]) -> Result<Vec<(String, Reason)>, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let Value::Array(entries) = value else {
        return Err("not a JSON array".to_owned());
    };
    let mut services: HashMap<&str, Vec<Task<'_>>> = HashMap::new();
    for entry in &entries {
        if let Some(task) = Task::decode(entry) {
            services.entry(task.service).or_default().push(task);
        } else {
            tracing::warn!(
                provider = "swarm",
                entry = %entry.to_string().chars().take(200).collect::<String>(),
                "skipping a listed task without an ID, a ServiceID, a CreatedAt or a state"
            );
        }
    }
    let mut failing: Vec<(String, Reason)> = services
        .into_iter()
        .filter_map(|(service, tasks)| Some((service.to_owned(), failure(tasks)?)))
        .collect();
    failing.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(failing)
}

/// Why the service of `tasks` fails, if it does.
fn failure(mut tasks: Vec<Task<'_>>) -> Option<Reason> {
    let given_up = !tasks.iter().any(|t| meant_to_run(t.desired));
    // Newest first within each slot.
    tasks.sort_unstable_by(|a, b| {
        (a.slot, b.created, b.version).cmp(&(b.slot, a.created, a.version))
    });
    let mut told: Option<&Task<'_>> = None;
    for slot in tasks.chunk_by(|a, b| a.slot == b.slot) {
        let failed = match slot {
            [newest, ..] if newest.failed() => Some(newest),
            [newest, before, ..]
                if not_run_yet(newest.state) && before.failed() && before.spec == newest.spec =>
            {
                Some(before)
            }
            _ => None,
        };
        if let Some(task) = failed
            && told.is_none_or(|t| (task.at, task.version) > (t.at, t.version))
        {
            told = Some(task);
        }
    }
    let task = told?;
    let exit_code = (task.state == "failed")
        .then_some(task.exit_code)
        .flatten()
        .filter(|&code| code != 0);
    Some(
        Reason::failing(task.err?)
            .exit_code(exit_code)
            .failed(given_up),
    )
}

/// What lookout reads of a task (an entry of `/tasks`).
#[derive(Debug)]
struct Task<'a> {
    service: &'a str,
    /// Its replica slot, else its node (a global service's), else itself.
    slot: (u64, &'a str),
    /// Its spec: a task of the same spec as another runs the same thing.
    spec: Option<&'a Value>,
    /// `CreatedAt`, in ns since the epoch.
    created: i64,
    /// `Version.Index`: orders two tasks made in the same nanosecond.
    version: u64,
    /// `Status.State`.
    state: &'a str,
    /// `DesiredState`.
    desired: &'a str,
    /// `Status.Err`, when not empty.
    err: Option<&'a str>,
    /// `Status.ContainerStatus.ExitCode`.
    exit_code: Option<i32>,
    /// `Status.Timestamp` (when it reached its state), else `created`.
    at: i64,
}

impl<'a> Task<'a> {
    fn decode(v: &'a Value) -> Option<Self> {
        let text = |v: Option<&'a Value>| v?.as_str().filter(|s| !s.is_empty());
        let id = text(v.get("ID"))?;
        let service = text(v.get("ServiceID"))?;
        let status = v.get("Status")?;
        let created = parse_nanos(text(v.get("CreatedAt"))?)?;
        let slot = match (v.get("Slot").and_then(Value::as_u64), text(v.get("NodeID"))) {
            (Some(slot), _) if slot > 0 => (slot, ""),
            (_, Some(node)) => (0, node),
            _ => (0, id),
        };
        Some(Self {
            service,
            slot,
            spec: v.get("Spec"),
            created,
            version: v
                .get("Version")
                .and_then(|v| v.get("Index"))
                .and_then(Value::as_u64)
                .unwrap_or(0),
            state: text(status.get("State"))?,
            desired: text(v.get("DesiredState"))?,
            err: text(status.get("Err")),
            exit_code: status
                .get("ContainerStatus")
                .and_then(|c| c.get("ExitCode"))
                .and_then(Value::as_i64)
                .and_then(|code| i32::try_from(code).ok()),
            at: text(status.get("Timestamp"))
                .and_then(parse_nanos)
                .unwrap_or(created),
        })
    }

    /// It failed or was rejected, and Swarm says why.
    fn failed(&self) -> bool {
        matches!(self.state, "failed" | "rejected") && self.err.is_some()
    }
}

/// A task in this state has not run yet (Swarm's states before `running`).
fn not_run_yet(state: &str) -> bool {
    matches!(
        state,
        "new"
            | "allocated"
            | "pending"
            | "assigned"
            | "accepted"
            | "preparing"
            | "ready"
            | "starting"
    )
}

/// A task with this desired state is meant to run (or, a job's, to
/// complete): a restart waiting for its delay is desired `ready`.
fn meant_to_run(desired: &str) -> bool {
    not_run_yet(desired) || matches!(desired, "running" | "complete")
}

#[cfg(test)]
mod tests;
