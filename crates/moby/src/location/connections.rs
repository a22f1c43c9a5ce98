//! Podman's named connections, as podman reads them (containers/common
//! `pkg/config`): `podman-connections.json` (Podman 5 and later: next to the
//! user's containers.conf, `$XDG_CONFIG_HOME/containers/` else
//! `~/.config/containers/`, or `PODMAN_CONNECTIONS_CONF`), then the
//! containers.conf files (`CONTAINERS_CONF` alone when set, else
//! `/usr/share/containers/containers.conf`, `/etc/containers/containers.conf`
//! and the user's, later ones overriding): `[engine] active_service` and
//! `[engine.service_destinations.NAME] uri = …, identity = …` (what Podman 4
//! writes). A name is looked up in the JSON file first.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::host::ConfigError;

/// A named connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Connection {
    pub(crate) name: String,
    pub(crate) uri: String,
    /// The ssh key (`Identity`, `identity`).
    pub(crate) identity: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
struct JsonFile {
    #[serde(rename = "Connection", default)]
    connection: JsonConnections,
}

#[derive(Deserialize, Default)]
struct JsonConnections {
    #[serde(rename = "Default", default)]
    default: Option<String>,
    #[serde(rename = "Connections", default)]
    connections: BTreeMap<String, JsonDestination>,
}

#[derive(Deserialize)]
struct JsonDestination {
    #[serde(rename = "URI")]
    uri: String,
    #[serde(rename = "Identity", default)]
    identity: Option<String>,
}

#[derive(Deserialize, Default)]
struct ConfFile {
    #[serde(default)]
    engine: ConfEngine,
}

#[derive(Deserialize, Default)]
struct ConfEngine {
    #[serde(default)]
    active_service: Option<String>,
    #[serde(default)]
    service_destinations: BTreeMap<String, ConfDestination>,
}

#[derive(Deserialize)]
struct ConfDestination {
    uri: String,
    #[serde(default)]
    identity: Option<String>,
}

/// What podman knows of its connections: every file read, in order.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    json: BTreeMap<String, Connection>,
    json_default: Option<String>,
    conf: BTreeMap<String, Connection>,
    conf_default: Option<String>,
    /// The files looked at (for an error naming them).
    pub(crate) tried: Vec<PathBuf>,
}

fn user_config_dir(env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")))
        .map(|d| d.join("containers"))
}

fn read(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError::ConfigFile {
            path: path.to_owned(),
            reason: e.to_string(),
        }),
    }
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl Connections {
    /// Reads the files podman reads, from the environment `env`.
    pub(crate) fn load(env: &dyn Fn(&str) -> Option<OsString>) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        let json_path = env("PODMAN_CONNECTIONS_CONF")
            .map(PathBuf::from)
            .or_else(|| user_config_dir(env).map(|d| d.join("podman-connections.json")));
        if let Some(path) = json_path {
            if let Some(text) = read(&path)? {
                let file: JsonFile =
                    serde_json::from_str(&text).map_err(|e| ConfigError::ConfigFile {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                c.json_default = non_empty(file.connection.default);
                c.json = file
                    .connection
                    .connections
                    .into_iter()
                    .map(|(name, d)| {
                        let conn = Connection {
                            name: name.clone(),
                            uri: d.uri,
                            identity: non_empty(d.identity).map(PathBuf::from),
                        };
                        (name, conn)
                    })
                    .collect();
            }
            c.tried.push(path);
        }
        let confs: Vec<PathBuf> = if let Some(only) = env("CONTAINERS_CONF") {
            vec![PathBuf::from(only)]
        } else {
            let mut files = vec![
                PathBuf::from("/usr/share/containers/containers.conf"),
                PathBuf::from("/etc/containers/containers.conf"),
            ];
            files.extend(user_config_dir(env).map(|d| d.join("containers.conf")));
            files
        };
        for path in confs {
            if let Some(text) = read(&path)? {
                let file: ConfFile =
                    toml::from_str(&text).map_err(|e| ConfigError::ConfigFile {
                        path: path.clone(),
                        reason: e.message().to_owned(),
                    })?;
                if let Some(active) = non_empty(file.engine.active_service) {
                    c.conf_default = Some(active);
                }
                for (name, d) in file.engine.service_destinations {
                    let conn = Connection {
                        name: name.clone(),
                        uri: d.uri,
                        identity: non_empty(d.identity).map(PathBuf::from),
                    };
                    c.conf.insert(name, conn);
                }
            }
            c.tried.push(path);
        }
        Ok(c)
    }

    /// The connection named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Connection> {
        self.json.get(name).or_else(|| self.conf.get(name))
    }

    /// The default connection, when one is set (and exists).
    pub(crate) fn default_connection(&self) -> Option<&Connection> {
        match &self.json_default {
            Some(name) => self.get(name),
            None => self.conf_default.as_deref().and_then(|n| self.get(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Dir(PathBuf);

    impl Dir {
        fn new(test: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("lookout-connections-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("containers")).expect("a temp dir");
            Self(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn load(vars: &[(&str, &Path)]) -> Connections {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_os_str().to_owned()))
            .collect();
        Connections::load(&|k| vars.get(k).cloned()).expect("readable")
    }

    #[test]
    fn the_json_file_comes_first_then_containers_conf() {
        let dir = Dir::new("order");
        std::fs::write(
            dir.0.join("containers/podman-connections.json"),
            r#"{"Connection":{"Default":"j","Connections":{
                "j":{"URI":"ssh://me@h:22/run/user/1000/podman/podman.sock","Identity":"/k"},
                "both":{"URI":"unix:///from/json.sock"}}},"Farm":{}}"#,
        )
        .expect("json");
        let conf = dir.0.join("containers.conf");
        std::fs::write(
            &conf,
            "[engine]\nactive_service = \"c\"\n[engine.service_destinations.c]\n\
             uri = \"unix:///from/conf.sock\"\n[engine.service_destinations.both]\n\
             uri = \"unix:///from/conf-both.sock\"\nidentity = \"\"\n",
        )
        .expect("conf");
        let c = load(&[("XDG_CONFIG_HOME", &dir.0), ("CONTAINERS_CONF", &conf)]);
        let d = c.default_connection().expect("a default");
        assert_eq!(
            (d.name.as_str(), d.identity.as_deref()),
            ("j", Some(Path::new("/k")))
        );
        assert_eq!(
            c.get("both").map(|c| c.uri.as_str()),
            Some("unix:///from/json.sock")
        );
        assert_eq!(
            c.get("c").map(|c| c.uri.as_str()),
            Some("unix:///from/conf.sock")
        );
        assert!(c.get("nope").is_none());
        // Without the JSON file: containers.conf's active_service.
        std::fs::remove_file(dir.0.join("containers/podman-connections.json")).expect("rm");
        let c = load(&[("XDG_CONFIG_HOME", &dir.0), ("CONTAINERS_CONF", &conf)]);
        assert_eq!(c.default_connection().map(|c| c.name.as_str()), Some("c"));
        assert_eq!(c.get("both").and_then(|c| c.identity.clone()), None);
    }

    #[test]
    fn a_broken_file_is_a_config_error() {
        let dir = Dir::new("broken");
        let conf = dir.0.join("containers.conf");
        std::fs::write(&conf, "[engine\n").expect("conf");
        let vars: HashMap<String, OsString> =
            [("CONTAINERS_CONF".to_owned(), conf.as_os_str().to_owned())].into();
        let err = Connections::load(&|k| vars.get(k).cloned()).expect_err("bad toml");
        assert!(err.to_string().contains("containers.conf"), "{err}");
    }
}
