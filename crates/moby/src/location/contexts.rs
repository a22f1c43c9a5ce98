//! Docker's contexts, as the docker CLI stores them (`cli/context/store`):
//! `currentContext` in its `config.json`, and a named context's docker
//! endpoint in `contexts/meta/<sha256 of the name>/meta.json`, its TLS
//! material in `contexts/tls/<same>/docker/`. Where a context stands among
//! the other ways to find the engine is [`Endpoint`](crate::Endpoint)'s.

use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::host::{ConfigError, TlsEnv};

/// A named context, as the store holds it: its docker endpoint's host (not
/// parsed yet) and how to speak TLS to it.
pub(crate) struct Context {
    pub(crate) host: String,
    pub(crate) tls: TlsEnv,
}

/// `currentContext` of the docker CLI's `config.json` (none when the file
/// does not exist, or names none or `default`).
pub(crate) fn current_context(file: &Path) -> Result<Option<String>, ConfigError> {
    #[derive(Deserialize)]
    struct ConfigFile {
        #[serde(rename = "currentContext", default)]
        current_context: Option<String>,
    }
    let text = match std::fs::read(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ConfigError::ConfigFile {
                path: file.to_owned(),
                reason: e.to_string(),
            });
        }
    };
    let config: ConfigFile =
        serde_json::from_slice(&text).map_err(|e| ConfigError::ConfigFile {
            path: file.to_owned(),
            reason: e.to_string(),
        })?;
    Ok(config.current_context.filter(|c| !c.is_empty()))
}

/// The store's directory name of a context: the hex SHA-256 of its name.
pub(crate) fn store_id(name: &str) -> String {
    use std::fmt::Write;
    Sha256::digest(name.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// A context's `meta.json` in the store, what lookout reads of it.
#[derive(Deserialize)]
struct Meta {
    #[serde(rename = "Endpoints", default)]
    endpoints: std::collections::HashMap<String, EndpointMeta>,
}

#[derive(Deserialize)]
struct EndpointMeta {
    #[serde(rename = "Host", default)]
    host: Option<String>,
    #[serde(rename = "SkipTLSVerify", default)]
    skip_tls_verify: bool,
}

/// The context `name` (not `default`) from the store in `dir`, the docker
/// CLI's configuration directory.
pub(crate) fn read(dir: &Path, name: &str) -> Result<Context, ConfigError> {
    let id = store_id(name);
    let meta_file = dir.join("contexts/meta").join(&id).join("meta.json");
    let context_error = |reason: String| ConfigError::Context {
        name: name.to_owned(),
        path: meta_file.clone(),
        reason,
    };
    let text = match std::fs::read(&meta_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError::UnknownContext {
                name: name.to_owned(),
                path: meta_file,
            });
        }
        Err(e) => return Err(context_error(e.to_string())),
    };
    let meta: Meta = serde_json::from_slice(&text).map_err(|e| context_error(e.to_string()))?;
    let docker = meta
        .endpoints
        .get("docker")
        .ok_or_else(|| context_error("it has no docker endpoint".to_owned()))?;
    let host = docker
        .host
        .as_deref()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| context_error("its docker endpoint has no Host".to_owned()))?;
    // Its TLS material is the store's only; a TCP host speaks TLS when
    // there is some, or `SkipTLSVerify` is set: then without verifying the
    // engine's certificate (as the docker CLI does: `context/docker/load.go`).
    let tls_dir = dir.join("contexts/tls").join(&id).join("docker");
    let has_tls = docker.skip_tls_verify
        || ["ca.pem", "cert.pem", "key.pem"]
            .iter()
            .any(|f| tls_dir.join(f).exists());
    Ok(Context {
        host: host.to_owned(),
        tls: TlsEnv {
            tls: has_tls,
            cert_path: Some(tls_dir),
            skip_verify: docker
                .skip_tls_verify
                .then(|| format!("context {name} has SkipTLSVerify")),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::location::host::Host;
    use crate::testing::{Store, resolve};

    #[test]
    fn the_store_id_is_the_names_sha256() {
        // `printf desktop-linux | sha256sum`
        assert_eq!(
            store_id("desktop-linux"),
            "fe9c6bd7a66301f49ca9b6a70b217107cd1284598bfc254700c989b916da791e"
        );
    }

    #[test]
    fn an_unknown_context_names_itself_and_the_path_tried() {
        let store = Store::new("unknown");
        store.current("gone");
        let cfg = store.dir();
        let err = resolve(&[("DOCKER_CONFIG", &cfg)], None, None).expect_err("unknown");
        let text = err.to_string();
        assert!(text.contains("\"gone\""), "{text}");
        assert!(
            text.contains(&format!(
                "{cfg}/contexts/meta/{}/meta.json",
                store_id("gone")
            )),
            "{text}"
        );
        let err = resolve(&[("DOCKER_CONFIG", &cfg)], None, Some("nope")).expect_err("unknown");
        assert!(matches!(err, ConfigError::UnknownContext { .. }), "{err}");
    }

    #[test]
    fn a_named_contexts_tls_comes_from_the_store_only() {
        let store = Store::new("tls");
        store
            .context("remote", "tcp://127.0.0.1:2376")
            .context("plain", "tcp://127.0.0.1:2375");
        let tls = store
            .0
            .join("contexts/tls")
            .join(store_id("remote"))
            .join("docker");
        std::fs::create_dir_all(&tls).expect("tls dir");
        std::fs::write(tls.join("ca.pem"), "x").expect("ca.pem");
        let cfg = store.dir();
        // DOCKER_TLS_VERIFY and DOCKER_CERT_PATH do not apply to a named context.
        let env = [
            ("DOCKER_CONFIG", cfg.as_str()),
            ("DOCKER_TLS_VERIFY", "1"),
            ("DOCKER_CERT_PATH", "/elsewhere"),
        ];
        let remote = resolve(&env, None, Some("remote")).expect("remote");
        assert_eq!(
            remote.host,
            Host::Tcp {
                host: "127.0.0.1".into(),
                port: 2376,
                tls: true
            }
        );
        assert_eq!(remote.tls_dir(), Some(tls.as_path()));
        let plain = resolve(&env, None, Some("plain")).expect("plain");
        assert!(
            matches!(plain.host, Host::Tcp { tls: false, .. }),
            "{:?}",
            plain.host
        );
        // The default context's: the variables, the certs from
        // DOCKER_CERT_PATH, else the configuration directory.
        let default = resolve(&env, Some("tcp://h:1"), None).expect("given");
        assert!(matches!(default.host, Host::Tcp { tls: true, .. }));
        assert_eq!(default.tls_dir(), Some(Path::new("/elsewhere")));
        let default = resolve(
            &[("DOCKER_CONFIG", cfg.as_str()), ("DOCKER_TLS_VERIFY", "1")],
            Some("tcp://h:1"),
            None,
        )
        .expect("given");
        assert_eq!(default.tls_dir(), Some(store.0.as_path()));
    }

    #[test]
    fn skip_tls_verify_speaks_tls_unverified() {
        let store = Store::new("skip");
        store.context("skip", "tcp://127.0.0.1:2376");
        let meta = store.0.join("contexts/meta").join(store_id("skip"));
        let json = serde_json::json!({
            "Name": "skip",
            "Metadata": {},
            "Endpoints": {"docker": {"Host": "tcp://127.0.0.1:2376", "SkipTLSVerify": true}},
        });
        std::fs::write(meta.join("meta.json"), json.to_string()).expect("meta.json");
        let cfg = store.dir();
        // No material in the store: TLS all the same, not verified.
        let skip = resolve(&[("DOCKER_CONFIG", cfg.as_str())], None, Some("skip")).expect("skip");
        assert!(
            matches!(skip.host, Host::Tcp { tls: true, .. }),
            "{:?}",
            skip.host
        );
        assert_eq!(
            skip.tls.skip_verify.as_deref(),
            Some("context skip has SkipTLSVerify")
        );
        assert_eq!(
            skip.tls_dir(),
            Some(
                store
                    .0
                    .join("contexts/tls")
                    .join(store_id("skip"))
                    .join("docker")
                    .as_path()
            )
        );
    }

    #[test]
    fn a_broken_store_is_a_config_error() {
        let store = Store::new("broken");
        std::fs::write(store.0.join("config.json"), "{not json").expect("config.json");
        let cfg = store.dir();
        let err = resolve(&[("DOCKER_CONFIG", &cfg)], None, None).expect_err("bad config.json");
        assert!(err.to_string().contains("config.json"), "{err}");
        let meta = store.0.join("contexts/meta").join(store_id("x"));
        std::fs::create_dir_all(&meta).expect("meta");
        std::fs::write(meta.join("meta.json"), r#"{"Endpoints":{}}"#).expect("meta.json");
        let err = resolve(&[("DOCKER_CONFIG", &cfg)], None, Some("x")).expect_err("no endpoint");
        assert!(err.to_string().contains("no docker endpoint"), "{err}");
    }
}
