//! What a snapshot's list cannot tell of why: the OOM kill of a container
//! that `SIGKILL` ended, and the output of a running container's failing
//! health check. One inspection each, of those containers only.

use std::sync::Arc;

use lookout_core::{Health, Listed, Outcome, Readiness, Signal};

use crate::api::Api;
use crate::error::CompatError;
use crate::inspect::{INSPECT_TIMEOUT, inspect};
use crate::protocol::containers::{failing_check, oom_killed};
use crate::protocol::inspection::Inspection;

/// Completes the reasons of `listed` containers: one that `SIGKILL` ended
/// (exit code 137, which the list takes as a requested stop) is inspected
/// for `State.OOMKilled` — an OOM kill failed —, and, with readiness
/// watched, one running unhealthy for its last check's output. Every other
/// container costs nothing.
pub(crate) async fn inspect_listed(api: &Api, listed: &mut [Listed]) -> Result<(), CompatError> {
    let mut inspected = 0usize;
    for l in listed.iter_mut() {
        let Some(uid) = l.uid.as_deref() else {
            continue;
        };
        let killed = !l.running
            && l.reason
                .as_ref()
                .is_some_and(|r| r.signal == Some(Signal::KILL) && !r.restarting);
        let unhealthy = l.running
            && matches!(
                l.readiness,
                Some(Readiness::Container {
                    health: Health::Unhealthy,
                    ..
                })
            );
        if !(killed || unhealthy) || !uid.bytes().all(|b| b.is_ascii_alphanumeric()) {
            continue;
        }
        inspected += 1;
        let path = format!("/containers/{uid}/json");
        let Inspection::Found(object) = inspect(api, &path, INSPECT_TIMEOUT).await? else {
            // Gone since the list: the next event or snapshot says so.
            continue;
        };
        if killed && oom_killed(&object) {
            if let Some(reason) = l.reason.take() {
                let reason = Arc::unwrap_or_clone(reason)
                    .oom(true)
                    .outcome(Some(Outcome::Failed));
                l.reason = Some(Arc::new(reason));
            }
        } else if unhealthy {
            l.reason = failing_check(&object);
        }
    }
    if inspected > 0 {
        tracing::debug!(inspected, "inspected listed containers for why");
    }
    Ok(())
}
