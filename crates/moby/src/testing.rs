//! What the unit tests of the feed and the history share: a container
//! table and event lines as dockerd writes them.

use lookout_core::EventKind;

use crate::discovery::Discovery;
use crate::protocol::mapping::{HealthTable, Mapping};
use crate::protocol::objects::History;

/// Docker's mapped actions, two ignored ones, the attributes that are not
/// labels; a discovery that finds nothing.
pub(crate) static TABLE: Mapping = Mapping {
    provider: "test",
    actions: &[
        ("create", EventKind::Created),
        ("start", EventKind::Started),
        ("die", EventKind::Stopped),
        ("destroy", EventKind::Removed),
    ],
    ignored: &["kill", "exec_start"],
    non_label_attributes: &["name", "image", "exitCode"],
    history: History::Until,
    discovery: Discovery {
        host_var: "LOOKOUT_TEST_HOST",
        sockets: &[],
        docker_contexts: false,
        podman_connections: false,
        ssh_cli: "docker",
    },
    health: HealthTable {
        status_in_action: true,
        unhealthy_when_paused: true,
        lists_none: true,
    },
};

/// A container event line as dockerd writes it (one label: `app=web`).
pub(crate) fn event(action: &str, uid: &str, name: &str, nanos: i64) -> String {
    format!(
        r#"{{"status":"{action}","id":"{uid}","Type":"container","Action":"{action}","Actor":{{"ID":"{uid}","Attributes":{{"image":"busybox","name":"{name}","app":"web","exitCode":"0"}}}},"scope":"local","time":{},"timeNano":{nanos}}}"#,
        nanos / 1_000_000_000
    )
}

/// A percent-encoded query value decoded (what the request paths carry).
pub(crate) fn percent_decode(s: &str) -> String {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            out.push(u8::from_str_radix(&hex, 16).expect("hex"));
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).expect("utf-8")
}
