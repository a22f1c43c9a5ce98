//! What the unit tests share: a container table and event lines as dockerd
//! writes them (the feed's and the history's tests); a docker configuration
//! directory and Docker's endpoint resolved from it (the endpoint's and the
//! contexts' tests).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;

use lookout_core::EventKind;

use crate::location::contexts::store_id;
use crate::location::discovery::Discovery;
use crate::location::endpoint::{Endpoint, Sys, resolve_with};
use crate::location::host::ConfigError;
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
        status_in_list: false,
    },
    stops_logged: true,
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

/// A temporary docker configuration directory, removed on drop.
pub(crate) struct Store(pub(crate) PathBuf);

impl Store {
    pub(crate) fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("lookout-contexts-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        Self(dir)
    }

    /// A context as `docker context create NAME --docker host=HOST` writes it.
    pub(crate) fn context(&self, name: &str, host: &str) -> &Self {
        let meta = self.0.join("contexts/meta").join(store_id(name));
        std::fs::create_dir_all(&meta).expect("meta dir");
        let json = serde_json::json!({
            "Name": name,
            "Metadata": {},
            "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": false}},
        });
        std::fs::write(meta.join("meta.json"), json.to_string()).expect("meta.json");
        self
    }

    pub(crate) fn current(&self, name: &str) -> &Self {
        let json = serde_json::json!({"auths": {}, "currentContext": name});
        std::fs::write(self.0.join("config.json"), json.to_string()).expect("config.json");
        self
    }

    pub(crate) fn dir(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const DOCKER: Discovery = Discovery::DOCKER;

/// The system as root, without `/run/user`.
pub(crate) fn root() -> Sys {
    Sys {
        uid: 0,
        run_user: PathBuf::from("/nonexistent/run/user"),
    }
}

/// Docker's endpoint as root, from `vars` (an empty value: unset), `host`
/// and a pinned `context`.
pub(crate) fn resolve(
    vars: &[(&str, &str)],
    host: Option<&str>,
    context: Option<&str>,
) -> Result<Endpoint, ConfigError> {
    let vars: HashMap<String, OsString> = vars
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
        .collect();
    resolve_with(&|k| vars.get(k).cloned(), &root(), &DOCKER, host, context)
}
