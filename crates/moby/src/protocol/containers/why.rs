//! Why a container stops or fails, as the engine says it: a `die`'s exit
//! code, signal and OOM kill, a stop request, the restart decision an
//! inspection reads, a failing check's output, and what a list says of a
//! container that does not run (see docs/why.md).

use std::sync::Arc;

use lookout_core::rfc3339::parse_nanos as rfc3339_nanos;
use lookout_core::{EventKind, Reason, Signal};
use serde_json::Value;

use super::{Container, SinceStart, inspect};
use crate::protocol::cursor::Cursor;
use crate::protocol::event::Event;
use crate::protocol::mapping::Mapping;
use crate::protocol::objects::Decision;

/// The last health check's output of an inspected container
/// (`State.Health.Log`, newest last), as a failure's reason; `None` when
/// it printed nothing.
pub(crate) fn failing_check(object: &Value) -> Option<Arc<Reason>> {
    let output = object
        .get("State")?
        .get("Health")?
        .get("Log")?
        .as_array()?
        .last()?
        .get("Output")?
        .as_str()?;
    let reason = Reason::failing(output);
    reason.message.is_some().then(|| Arc::new(reason))
}

/// The exit code of a `die` event: Docker's `exitCode`, Podman's
/// `containerExitCode` (its compat API sends both).
pub(super) fn exit_code(event: &Event) -> Option<i32> {
    event.exit_code()
}

/// The reason of a `die` no logged request explains: its exit code (and
/// the signal it tells), the OOM kill the engine reported, and whether the
/// engine starts it again (`restarting`: only known from an inspection).
/// On an engine that logs no stop request ([`Mapping::stops_logged`]), a
/// death by `SIGTERM` or `SIGKILL` that no OOM kill explains is taken as
/// requested (see [`taken_as_requested`]).
pub(super) fn died(mapping: &Mapping, event: &Event, oom: bool, restarting: bool) -> Reason {
    use lookout_core::Outcome;
    let code = exit_code(event);
    if taken_as_requested(mapping, code, oom) {
        return Reason::stop(Outcome::Stopped)
            .exit_code(code)
            .restarting(restarting);
    }
    let reason = match code {
        Some(code) => Reason::exited(code, restarting),
        None => Reason::stop(Outcome::Failed).restarting(restarting),
    };
    if oom {
        reason.oom(true).outcome(Some(Outcome::Failed))
    } else {
        reason
    }
}

/// Whether a `die` with `exit_code` is taken as a requested stop on an
/// engine that logs no stop request: ended by `SIGTERM` or `SIGKILL`,
/// which is how engines stop a container, and not by the OOM killer.
pub(super) fn taken_as_requested(mapping: &Mapping, exit_code: Option<i32>, oom: bool) -> bool {
    !mapping.stops_logged
        && !oom
        && exit_code
            .and_then(Signal::from_exit_code)
            .is_some_and(|s| s == Signal::TERM || s == Signal::KILL)
}

/// What an inspection right after a `die` says of it: whether the engine
/// starts it again, and whether the OOM killer ended it.
///
/// Restarting: Docker's restart manager decides before the event (the
/// state is `restarting`); Podman's restarts after it (a `restart` event
/// follows). Either may have started it again by the time it is read
/// (running, started since the event). Otherwise its restart policy says
/// it, with the restart count as of the `die` (`on-failure:N` restarts
/// while fewer than N restarts were made; `always` and `unless-stopped`
/// always: a stop nobody asked for is no request).
/// Returns whether the engine shows it restarting (or started again),
/// whether its policy restarts it, and whether the OOM killer ended it.
pub(super) fn inspected_stop(
    object: &Value,
    died_at: Cursor,
    exit_code: Option<i32>,
) -> (bool, bool, bool) {
    let state = object.get("State");
    let flag = |key| {
        state
            .and_then(|s| s.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let started_since = state
        .and_then(|s| s.get("StartedAt"))
        .and_then(Value::as_str)
        .and_then(rfc3339_nanos)
        .is_some_and(|t| t >= died_at.unix_nanos());
    let policy = object
        .get("HostConfig")
        .and_then(|h| h.get("RestartPolicy"));
    let name = policy
        .and_then(|p| p.get("Name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let max = policy
        .and_then(|p| p.get("MaximumRetryCount"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let count = object
        .get("RestartCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let by_policy = match name {
        "always" | "unless-stopped" => true,
        "on-failure" => exit_code.is_some_and(|c| c != 0) && (max == 0 || count < max),
        _ => false,
    };
    let shown = flag("Restarting") || (flag("Running") && started_since);
    (shown, by_policy, oom_killed(object))
}

/// Whether the OOM killer ended an inspected container (`State.OOMKilled`).
pub(crate) fn oom_killed(object: &Value) -> bool {
    object
        .get("State")
        .and_then(|s| s.get("OOMKilled"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Whether a `kill` event asks the container to stop: a signal that stops
/// a process (`SIGTERM`, `SIGINT`, `SIGQUIT`, `SIGKILL`), or no signal
/// named (Podman's `kill`, `stop`). `docker kill -s HUP` is no stop.
fn asks_to_stop(event: &Event) -> bool {
    event
        .attribute("signal")
        .is_none_or(|s| Signal::from_name(&s).is_none_or(Signal::stops))
}

/// What a start, a stop request or a `die` of container `c` tells of its
/// stop: `Ok` with the `die`'s reason (`None` for another event) to decide
/// on as usual, or `Err` with the decision itself (a stop request; a `die`
/// to inspect first, with readiness watched: will the engine restart it?).
pub(super) fn stop_told(
    mapping: &Mapping,
    readiness: bool,
    c: &mut Container,
    event: &Event,
    kind: Option<EventKind>,
) -> Result<Option<Reason>, Decision> {
    match kind {
        Some(EventKind::Stopping) => {
            if !asks_to_stop(event) {
                return Err(Decision::Skip);
            }
            c.since_start.stop_requested = true;
            Err(Decision::Report {
                kind: EventKind::Stopping,
                labels: Arc::clone(&c.labels),
                readiness: None,
            })
        }
        Some(EventKind::Started) => {
            c.since_start = SinceStart::default();
            Ok(None)
        }
        Some(EventKind::Stopped) => {
            if readiness && !c.since_start.stop_requested {
                // Whether the engine starts it again: its restart
                // manager decided before the event, and says so.
                return Err(inspect(event.uid()));
            }
            Ok(Some(died(mapping, event, c.since_start.oom, false)))
        }
        _ => Ok(None),
    }
}

/// A decision, with why: a report becomes [`Decision::Explained`].
pub(super) fn explained(decision: Decision, reason: Option<Reason>) -> Decision {
    match (decision, reason) {
        (
            Decision::Report {
                kind,
                labels,
                readiness,
            },
            Some(reason),
        ) => Decision::Explained {
            kind,
            labels,
            readiness,
            reason: Arc::new(reason),
        },
        (decision, _) => decision,
    }
}

/// Why a listed container does not run, as the list says it: its `State`
/// and the exit code in its `Status` (`Exited (137) 5 seconds ago`, Docker
/// and Podman alike). A list cannot tell who stopped a container: one that
/// `SIGTERM` or `SIGKILL` ended (`143`, `137`) is taken as stopped on
/// request — the engine's own shutdown, `docker stop` or `kill` while
/// lookout was away — until an inspection says the OOM killer did it
/// (`reasons::inspect`); any other nonzero code failed, `0` completed.
pub(crate) fn listed_stop(state: &str, status: Option<&str>) -> Option<Reason> {
    use lookout_core::Outcome;
    let code = status
        .and_then(|s| s.split_once('('))
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(n, _)| n.trim().parse::<i32>().ok());
    match state {
        "restarting" => Some(match code {
            Some(code) => Reason::exited(code, true),
            None => Reason::stop(Outcome::Failed).restarting(true),
        }),
        "exited" => {
            let code = code?;
            let by_request = Signal::from_exit_code(code)
                .is_some_and(|s| s == Signal::TERM || s == Signal::KILL);
            Some(if by_request {
                Reason::stop(Outcome::Stopped).exit_code(Some(code))
            } else {
                Reason::exited(code, false)
            })
        }
        "dead" => Some(Reason::stop(Outcome::Failed).exit_code(code)),
        // `created` (it never ran), `removing`: nothing to tell.
        _ => None,
    }
}
