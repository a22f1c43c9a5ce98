//! The fuzzing harness of Swarm's service events (feature `fuzzing`; not a
//! public API): [`lookout_moby::fuzzing`]'s, with [`SERVICES`]
//! and an engine whose answers to inspections the input chooses.

use lookout_core::{EventKind, Labels, Listed};
use lookout_moby::Inspection;
use lookout_moby::fuzzing::{TAIL_NANOS, Target, run};
use serde_json::{Value, json};

use crate::{SERVICES, Services};

/// The service of the valid event appended after the garbage.
const TAIL_ID: &str = "f0220fa11ed0";

/// Swarm's services, with inspections answered from the input.
#[derive(Debug, Clone, Copy)]
struct Swarm;

impl Target for Swarm {
    type Objects = Services;

    fn objects(&self) -> &'static Services {
        &SERVICES
    }

    fn listed(&self) -> Listed {
        Listed {
            id: "web".into(),
            running: true,
            uid: Some("kq2x9m3v0w4t".into()),
            labels: Labels::from([("app".into(), "web".into())]),
        }
    }

    fn labels(&self) -> Labels {
        Labels::from([("app".into(), "web".into())])
    }

    fn tail(&self) -> String {
        format!(
            concat!(
                r#"{{"Type":"service","Action":"create","Actor":{{"ID":"{}","#,
                r#""Attributes":{{"name":"lookout-fuzz-tail"}}}},"scope":"swarm","#,
                r#""time":{},"timeNano":{}}}"#
            ),
            TAIL_ID,
            TAIL_NANOS / 1_000_000_000,
            TAIL_NANOS
        )
    }

    fn tail_change(&self) -> (&'static str, EventKind) {
        // One replica: running.
        ("lookout-fuzz-tail", EventKind::Started)
    }

    fn inspect(&self, path: &str, choice: u64) -> Inspection {
        let id = path.strip_prefix("/services/").unwrap_or(path);
        if id == TAIL_ID {
            return Inspection::Found(service(id, "lookout-fuzz-tail", Some(1), true));
        }
        let replicas = Some((choice >> 8) % 3);
        let labelled = choice & (1 << 12) != 0;
        Inspection::Found(match choice % 7 {
            0 => return Inspection::Gone,
            1 => return Inspection::Unusable(format!("GET {path} answered 500: boom")),
            2 => service(id, &format!("svc-{id}"), replicas, labelled),
            3 => service(id, &format!("svc-{id}"), None, labelled),
            4 => json!({ "ID": id }),
            5 => service("someoneelse", "other", replicas, labelled),
            _ => json!({ "ID": id, "Spec": { "Name": 7, "Labels": "app=web", "Mode": [] } }),
        })
    }
}

/// A service as `GET /services/{id}` answers it: replicated with `replicas`,
/// or global when `None`.
fn service(id: &str, name: &str, replicas: Option<u64>, labelled: bool) -> Value {
    let mode = match replicas {
        Some(n) => json!({ "Replicated": { "Replicas": n } }),
        None => json!({ "Global": {} }),
    };
    let labels = if labelled {
        json!({ "app": "web" })
    } else {
        json!({})
    };
    json!({
        "ID": id,
        "Version": { "Index": 42 },
        "CreatedAt": "2026-11-30T05:15:27.249852166Z",
        "UpdatedAt": "2026-11-30T05:15:27.249852166Z",
        "Spec": {
            "Name": name,
            "Labels": labels,
            "TaskTemplate": { "ContainerSpec": { "Image": "busybox:latest" } },
            "Mode": mode,
        },
    })
}

/// Feeds `data` (see [`lookout_moby::fuzzing`]) and then one valid
/// service event through the decoder of a Swarm session; panics when an
/// invariant does not hold.
pub fn swarm_events(data: &[u8]) {
    run(&Swarm, data, &mut || {});
}

/// [`swarm_events`], calling `after_push` after every chunk.
pub fn swarm_events_with(data: &[u8], after_push: &mut dyn FnMut()) {
    run(&Swarm, data, after_push);
}
