//! Where a watch's engine is ([`Endpoint`]), resolved once per watch as the
//! engine's own CLI resolves it: the order of the ways to find it, each
//! read here or, for Docker's contexts and Podman's connections, in
//! `contexts.rs` and `connections.rs`.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use super::connections::{Connection, Connections};
use super::contexts;
use super::discovery::Discovery;
use super::host::{ConfigError, Host, TlsEnv};

/// Where an [`Endpoint`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The host the caller gave ([`Config::host`](crate::Config::host), `--host`).
    Config,
    /// An environment variable (`DOCKER_HOST`, `CONTAINER_HOST`).
    Env(&'static str),
    /// A docker context.
    #[non_exhaustive]
    Context {
        /// The context's name.
        name: String,
        /// What selected it.
        selected_by: Selected,
    },
    /// A Podman connection (`podman system connection`).
    #[non_exhaustive]
    Connection {
        /// The connection's name.
        name: String,
        /// What selected it.
        selected_by: Selected,
    },
    /// The engine's default socket.
    Default,
}

/// What selected a docker context or a Podman connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Selected {
    /// The caller ([`Config::context`](crate::Config::context), `--context`).
    Pinned,
    /// This environment variable (`DOCKER_CONTEXT`, `CONTAINER_CONNECTION`).
    Env(&'static str),
    /// `currentContext` in this `config.json`.
    ConfigFile(PathBuf),
    /// Podman's default connection.
    Default,
}

impl fmt::Display for Selected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pinned => Ok(()),
            Self::Env(var) => write!(f, " ({var})"),
            Self::ConfigFile(path) => write!(f, " (currentContext of {})", path.display()),
            Self::Default => f.write_str(" (the default connection)"),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config => f.write_str("config"),
            Self::Env(var) => f.write_str(var),
            Self::Context { name, selected_by } => write!(f, "context {name}{selected_by}"),
            Self::Connection { name, selected_by } => {
                write!(f, "connection {name}{selected_by}")
            }
            Self::Default => f.write_str("default"),
        }
    }
}

/// A watch's engine: its address, its TLS settings, where it came from.
///
/// Docker (the docker CLI's `cli/command/cli.go`): a pinned context
/// ([`Config::context`](crate::Config::context), the CLI's `--context`; an
/// error together with a host), then the host given (`--host`), then
/// `DOCKER_HOST`, then the context named by `DOCKER_CONTEXT`, then
/// `currentContext` in `$DOCKER_CONFIG/config.json` (default `~/.docker`),
/// else `default`: `unix:///var/run/docker.sock`. A named context is read from
/// the store the CLI writes, `contexts/meta/<sha256 of the name>/meta.json`
/// (`Endpoints.docker.Host`); its TLS material only from
/// `contexts/tls/<same>/docker/{ca,cert,key}.pem`; with
/// `Endpoints.docker.SkipTLSVerify` it speaks TLS without verifying the
/// engine's certificate. The default context's TLS: `DOCKER_TLS_VERIFY`
/// (verified), else `DOCKER_TLS` (not verified), files in `DOCKER_CERT_PATH`,
/// else the config directory. An unverified certificate is said once per
/// watch (a `tracing` warning naming the context or variable).
///
/// Resolved once, when the watch is made: a redial never lands on another
/// engine (Docker Desktop rewrites `currentContext` when it starts and
/// stops) and never replays a cursor on an engine it is not from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Endpoint {
    /// The address.
    pub host: Host,
    /// Where it came from.
    pub source: Origin,
    pub(crate) tls: TlsEnv,
    /// How the engine is started, said when it does not answer.
    pub(crate) hint: Option<&'static str>,
}

impl Endpoint {
    /// Why the engine's TLS certificate is not verified (a context's
    /// `SkipTLSVerify`, `DOCKER_TLS` without `DOCKER_TLS_VERIFY`), when it
    /// is not: anyone on the path can pose as the engine.
    pub fn unverified(&self) -> Option<&str> {
        self.tls.skip_verify.as_deref()
    }

    /// Where the TLS material (`ca.pem`, `cert.pem`, `key.pem`) is read
    /// from, on every TLS connection.
    pub fn tls_dir(&self) -> Option<&Path> {
        self.tls.cert_path.as_deref()
    }

    /// Resolves the endpoint of an engine found by `discovery` as its CLI
    /// does (see [`Endpoint`]; `context` is a pinned docker
    /// context, `host` a given address), from the environment now.
    pub fn resolve(
        discovery: &Discovery,
        host: Option<&str>,
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        resolve_with(&process_env, &Sys::now(), discovery, host, context)
    }
}

/// The process's environment: a variable that is set and not empty.
fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// The docker CLI's configuration directory: `DOCKER_CONFIG`, else `~/.docker`.
fn config_dir(env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    env("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".docker")))
}

/// The default context's TLS, as the docker CLI's `--tls` and `--tlsverify`
/// default to: `DOCKER_TLS_VERIFY` speaks TLS and verifies the engine;
/// `DOCKER_TLS` without it speaks TLS without verifying; the files in
/// `DOCKER_CERT_PATH`, else the configuration directory.
fn default_tls(env: &dyn Fn(&str) -> Option<OsString>) -> TlsEnv {
    let verify = env("DOCKER_TLS_VERIFY").is_some();
    let tls = verify || env("DOCKER_TLS").is_some();
    TlsEnv {
        tls,
        cert_path: env("DOCKER_CERT_PATH")
            .map(PathBuf::from)
            .or_else(|| config_dir(env)),
        skip_verify: (tls && !verify).then(|| "DOCKER_TLS without DOCKER_TLS_VERIFY".to_owned()),
    }
}

/// [`Endpoint::resolve`] with `env` for the environment.
pub(crate) fn resolve_with(
    env: &dyn Fn(&str) -> Option<OsString>,
    sys: &Sys,
    discovery: &Discovery,
    host: Option<&str>,
    context: Option<&str>,
) -> Result<Endpoint, ConfigError> {
    let mut endpoint = resolve_any(env, sys, discovery, host, context)?;
    // An ssh:// host runs the engine's own CLI remotely.
    if let Host::Ssh(target) = &mut endpoint.host {
        target.cli = discovery.ssh_cli;
    }
    Ok(endpoint)
}

fn resolve_any(
    env: &dyn Fn(&str) -> Option<OsString>,
    sys: &Sys,
    discovery: &Discovery,
    host: Option<&str>,
    context: Option<&str>,
) -> Result<Endpoint, ConfigError> {
    if let Some(name) = context {
        if host.is_some() {
            return Err(ConfigError::ContextAndHost);
        }
        if discovery.podman_connections {
            return connection(env, name, Selected::Pinned);
        }
        return named(env, discovery, name, Selected::Pinned);
    }
    let tls = default_tls(env);
    if let Some(host) = host {
        return Ok(Endpoint {
            host: Host::parse(host, "config", tls.tls)?,
            source: Origin::Config,
            tls,
            hint: None,
        });
    }
    if discovery.podman_connections
        && let Some(name) = env("CONTAINER_CONNECTION")
    {
        return connection(
            env,
            &name.to_string_lossy(),
            Selected::Env("CONTAINER_CONNECTION"),
        );
    }
    if let Some(mut endpoint) = from_host_var(env, discovery)? {
        if discovery.podman_connections
            && let (Host::Ssh(target), Some(key)) = (&mut endpoint.host, env("CONTAINER_SSHKEY"))
        {
            target.identity = Some(PathBuf::from(key));
        }
        return Ok(endpoint);
    }
    if discovery.podman_connections {
        let connections = Connections::load(env)?;
        if let Some(c) = connections.default_connection() {
            return from_connection(c, Selected::Default);
        }
        let hint = if sys.uid == 0 {
            "Podman's API service: `systemctl start podman.socket`, or `podman system service`"
        } else {
            "Podman's API service for this user: `systemctl --user start podman.socket`, \
             or `podman system service`"
        };
        return Ok(Endpoint {
            host: Host::Unix(podman_socket(env, sys)),
            source: Origin::Default,
            tls,
            hint: Some(hint),
        });
    }
    if discovery.docker_contexts {
        if let Some(name) = env("DOCKER_CONTEXT") {
            return named(
                env,
                discovery,
                &name.to_string_lossy(),
                Selected::Env("DOCKER_CONTEXT"),
            );
        }
        if let Some(dir) = config_dir(env) {
            let file = dir.join("config.json");
            if let Some(name) = contexts::current_context(&file)? {
                return named(env, discovery, &name, Selected::ConfigFile(file));
            }
        }
    }
    default_socket(env, discovery, tls)
}

/// A Podman connection by name (unknown: an error naming the files read).
fn connection(
    env: &dyn Fn(&str) -> Option<OsString>,
    name: &str,
    selected_by: Selected,
) -> Result<Endpoint, ConfigError> {
    let connections = Connections::load(env)?;
    match connections.get(name) {
        Some(c) => from_connection(c, selected_by),
        None => Err(ConfigError::UnknownConnection {
            name: name.to_owned(),
            tried: connections
                .tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn from_connection(c: &Connection, selected_by: Selected) -> Result<Endpoint, ConfigError> {
    let source_name = format!("connection {}", c.name);
    let mut host = Host::parse(&c.uri, &source_name, false)?;
    if let Host::Ssh(target) = &mut host {
        target.identity.clone_from(&c.identity);
    }
    Ok(Endpoint {
        host,
        source: Origin::Connection {
            name: c.name.clone(),
            selected_by,
        },
        tls: TlsEnv::default(),
        hint: None,
    })
}

/// What the rootless socket rule reads of the system: the user, and where
/// the runtime directories are (`/run/user`).
#[derive(Debug, Clone)]
pub(crate) struct Sys {
    pub(crate) uid: u32,
    pub(crate) run_user: PathBuf,
}

impl Sys {
    fn now() -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            // `/proc/self` belongs to the process's user.
            uid: std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid()),
            run_user: PathBuf::from("/run/user"),
        }
    }
}

/// Podman's own socket: as root `/run/podman/podman.sock`; else
/// `$XDG_RUNTIME_DIR/podman/podman.sock`, else under `/run/user/UID` (podman
/// takes that runtime directory when it exists, is the user's and mode 0700;
/// otherwise it has none, and the socket named does not answer either).
fn podman_socket(env: &dyn Fn(&str) -> Option<OsString>, sys: &Sys) -> PathBuf {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if sys.uid == 0 {
        return PathBuf::from("/run/podman/podman.sock");
    }
    if let Some(dir) = env("XDG_RUNTIME_DIR") {
        return Path::new(&dir).join("podman/podman.sock");
    }
    let dir = sys.run_user.join(sys.uid.to_string());
    if let Ok(m) = std::fs::metadata(&dir)
        && (m.uid() != sys.uid || m.permissions().mode() & 0o777 != 0o700)
    {
        tracing::warn!(
            dir = %dir.display(),
            "not the user's runtime directory (owner or mode): Podman would not use it"
        );
    }
    dir.join("podman/podman.sock")
}

/// The discovery's host variable (`DOCKER_HOST`), when set.
fn from_host_var(
    env: &dyn Fn(&str) -> Option<OsString>,
    discovery: &Discovery,
) -> Result<Option<Endpoint>, ConfigError> {
    let Some(value) = env(discovery.host_var) else {
        return Ok(None);
    };
    let tls = default_tls(env);
    Ok(Some(Endpoint {
        host: Host::parse(&value.to_string_lossy(), discovery.host_var, tls.tls)?,
        source: Origin::Env(discovery.host_var),
        tls,
        hint: None,
    }))
}

/// The discovery's default sockets: the first that exists, else the last.
fn default_socket(
    env: &dyn Fn(&str) -> Option<OsString>,
    discovery: &Discovery,
    tls: TlsEnv,
) -> Result<Endpoint, ConfigError> {
    let candidates: Vec<PathBuf> = discovery
        .sockets
        .iter()
        .filter_map(|(var, path)| {
            if var.is_empty() {
                Some(PathBuf::from(path))
            } else {
                env(var).map(|dir| Path::new(&dir).join(path))
            }
        })
        .collect();
    let path = candidates
        .iter()
        .find(|p| p.exists())
        .or(candidates.last())
        .cloned()
        .ok_or(ConfigError::InvalidHost {
            host: String::new(),
            source_name: "defaults".to_owned(),
            reason: "no default socket applies",
        })?;
    Ok(Endpoint {
        host: Host::Unix(path),
        source: Origin::Default,
        tls,
        hint: None,
    })
}

/// A context by name: `default` is the default endpoint (`DOCKER_HOST`,
/// else the default socket); any other is read from the store.
fn named(
    env: &dyn Fn(&str) -> Option<OsString>,
    discovery: &Discovery,
    name: &str,
    selected_by: Selected,
) -> Result<Endpoint, ConfigError> {
    if name == "default" {
        let endpoint = match from_host_var(env, discovery)? {
            Some(endpoint) => endpoint,
            None => default_socket(env, discovery, default_tls(env))?,
        };
        return Ok(Endpoint {
            source: Origin::Context {
                name: name.to_owned(),
                selected_by,
            },
            ..endpoint
        });
    }
    let dir = config_dir(env).ok_or_else(|| ConfigError::UnknownContext {
        name: name.to_owned(),
        path: PathBuf::from("~/.docker/contexts (no DOCKER_CONFIG and no HOME)"),
    })?;
    let context = contexts::read(&dir, name)?;
    let source_name = format!("context {name}");
    Ok(Endpoint {
        host: Host::parse(&context.host, &source_name, context.tls.tls)?,
        source: Origin::Context {
            name: name.to_owned(),
            selected_by,
        },
        tls: context.tls,
        hint: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Store, resolve, root};
    use std::collections::HashMap;

    fn unix(path: &str) -> Host {
        Host::Unix(path.into())
    }

    #[test]
    fn precedence_as_the_docker_cli() {
        let store = Store::new("precedence");
        store
            .context("a", "unix:///run/a.sock")
            .context("b", "unix:///run/b.sock")
            .context("c", "unix:///run/c.sock")
            .current("c");
        let cfg = store.dir();
        let base = [("DOCKER_CONFIG", cfg.as_str())];
        let with = |more: &[(&'static str, &'static str)]| {
            let mut v: Vec<(&str, &str)> = base.to_vec();
            v.extend_from_slice(more);
            v
        };
        let host_of = |r: Result<Endpoint, ConfigError>| r.map(|e| (e.host, e.source.to_string()));
        let config_file = format!("{cfg}/config.json");
        // currentContext.
        assert_eq!(
            host_of(resolve(&base, None, None)),
            Ok((
                unix("/run/c.sock"),
                format!("context c (currentContext of {config_file})")
            ))
        );
        // DOCKER_CONTEXT over currentContext.
        let env = with(&[("DOCKER_CONTEXT", "b")]);
        assert_eq!(
            host_of(resolve(&env, None, None)),
            Ok((unix("/run/b.sock"), "context b (DOCKER_CONTEXT)".to_owned()))
        );
        // DOCKER_HOST over both.
        let env = with(&[
            ("DOCKER_CONTEXT", "b"),
            ("DOCKER_HOST", "unix:///run/h.sock"),
        ]);
        assert_eq!(
            host_of(resolve(&env, None, None)),
            Ok((unix("/run/h.sock"), "DOCKER_HOST".to_owned()))
        );
        // The given host over all of them.
        assert_eq!(
            host_of(resolve(&env, Some("unix:///run/g.sock"), None)),
            Ok((unix("/run/g.sock"), "config".to_owned()))
        );
        // A pinned context over every variable.
        assert_eq!(
            host_of(resolve(&env, None, Some("a"))),
            Ok((unix("/run/a.sock"), "context a".to_owned()))
        );
        // … but not together with a host.
        assert_eq!(
            resolve(&env, Some("unix:///run/g.sock"), Some("a")),
            Err(ConfigError::ContextAndHost)
        );
        // `default` is the default endpoint: DOCKER_HOST, else the socket.
        assert_eq!(
            host_of(resolve(&env, None, Some("default"))),
            Ok((unix("/run/h.sock"), "context default".to_owned()))
        );
        assert_eq!(
            host_of(resolve(&with(&[("DOCKER_CONTEXT", "default")]), None, None)),
            Ok((
                unix("/var/run/docker.sock"),
                "context default (DOCKER_CONTEXT)".to_owned()
            ))
        );
        // Empty variables count as unset.
        let env = with(&[("DOCKER_HOST", ""), ("DOCKER_CONTEXT", "")]);
        assert_eq!(
            resolve(&env, None, None).map(|e| e.host),
            Ok(unix("/run/c.sock"))
        );
        // No store, no variables: the default socket.
        let empty = Store::new("precedence-empty");
        let dir = empty.dir();
        assert_eq!(
            host_of(resolve(&[("DOCKER_CONFIG", dir.as_str())], None, None)),
            Ok((unix("/var/run/docker.sock"), "default".to_owned()))
        );
        // HOME/.docker when DOCKER_CONFIG is not set.
        let home = Store::new("precedence-home");
        std::fs::create_dir_all(home.0.join(".docker")).expect(".docker");
        let docker_dir = Store(home.0.join(".docker"));
        docker_dir
            .context("h", "unix:///run/home.sock")
            .current("h");
        let home_dir = home.dir();
        assert_eq!(
            resolve(&[("HOME", home_dir.as_str())], None, None).map(|e| e.host),
            Ok(unix("/run/home.sock"))
        );
        std::mem::forget(docker_dir); // removed with `home`
    }

    #[test]
    fn docker_tls_speaks_tls_verified_or_not() {
        // DOCKER_TLS alone: TLS, not verified; with DOCKER_TLS_VERIFY: verified.
        let tls = resolve(
            &[("DOCKER_TLS", "1"), ("DOCKER_CERT_PATH", "/certs")],
            Some("tcp://h:1"),
            None,
        )
        .expect("given");
        assert!(
            matches!(tls.host, Host::Tcp { tls: true, .. }),
            "{:?}",
            tls.host
        );
        assert_eq!(
            tls.tls.skip_verify.as_deref(),
            Some("DOCKER_TLS without DOCKER_TLS_VERIFY")
        );
        assert_eq!(tls.tls_dir(), Some(Path::new("/certs")));
        let from_var = resolve(
            &[("DOCKER_TLS", "1"), ("DOCKER_HOST", "tcp://h")],
            None,
            None,
        )
        .expect("DOCKER_HOST");
        assert_eq!(
            from_var.host,
            Host::Tcp {
                host: "h".into(),
                port: 2376,
                tls: true
            }
        );
        assert!(from_var.tls.skip_verify.is_some());
        let both = resolve(
            &[("DOCKER_TLS", "1"), ("DOCKER_TLS_VERIFY", "1")],
            Some("tcp://h:1"),
            None,
        )
        .expect("given");
        assert!(matches!(both.host, Host::Tcp { tls: true, .. }));
        assert_eq!(both.tls.skip_verify, None);
        // Neither: plain TCP, and the context without SkipTLSVerify verifies.
        let plain = resolve(&[], Some("tcp://h:1"), None).expect("given");
        assert!(matches!(plain.host, Host::Tcp { tls: false, .. }));
        assert_eq!(plain.tls.skip_verify, None);
    }

    #[test]
    fn without_contexts_only_the_variable_and_the_sockets() {
        let store = Store::new("podman");
        store.context("c", "unix:///run/c.sock").current("c");
        let cfg = store.dir();
        let podman = Discovery {
            host_var: "CONTAINER_HOST",
            sockets: &[("", "/nonexistent/podman.sock")],
            docker_contexts: false,
            podman_connections: false,
            ssh_cli: "podman",
        };
        let vars: HashMap<&str, OsString> = [("DOCKER_CONFIG", OsString::from(&cfg))].into();
        let env = |k: &str| vars.get(k).cloned();
        let e = resolve_with(&env, &root(), &podman, None, None).expect("the socket");
        assert_eq!(e.host, unix("/nonexistent/podman.sock"));
        assert_eq!(e.source, Origin::Default);
    }

    /// Podman's discovery, with `vars`, as user `uid` (`run_user` as `/run/user`).
    fn podman(
        vars: &[(&str, &str)],
        uid: u32,
        run_user: &Path,
        context: Option<&str>,
    ) -> Result<Endpoint, ConfigError> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        let discovery = Discovery {
            host_var: "CONTAINER_HOST",
            sockets: &[],
            docker_contexts: false,
            podman_connections: true,
            ssh_cli: "podman",
        };
        let sys = Sys {
            uid,
            run_user: run_user.to_owned(),
        };
        resolve_with(&|k| vars.get(k).cloned(), &sys, &discovery, None, context)
    }

    #[test]
    fn podman_connections_then_host_then_default_then_the_rootless_socket() {
        let store = Store::new("podman-connections");
        let conf = store.0.join("containers.conf");
        std::fs::write(
            &conf,
            "[engine]\nactive_service = \"def\"\n\
             [engine.service_destinations.def]\nuri = \"unix:///run/def.sock\"\n\
             [engine.service_destinations.remote]\n\
             uri = \"ssh://core@h:2222/run/user/1000/podman/podman.sock\"\nidentity = \"/k/id\"\n",
        )
        .expect("containers.conf");
        let conf = conf.display().to_string();
        let none = Path::new("/nonexistent/run/user");
        let base = [("CONTAINERS_CONF", conf.as_str())];
        let with = |more: &[(&'static str, &'static str)]| {
            let mut v: Vec<(&str, &str)> = base.to_vec();
            v.extend_from_slice(more);
            v
        };
        let show = |r: Result<Endpoint, ConfigError>| {
            r.map(|e| (e.host.to_string(), e.source.to_string()))
        };
        // The default connection.
        assert_eq!(
            show(podman(&base, 1000, none, None)),
            Ok((
                "unix:///run/def.sock".into(),
                "connection def (the default connection)".into()
            ))
        );
        // CONTAINER_HOST over it (with CONTAINER_SSHKEY for ssh).
        let e = podman(
            &with(&[
                ("CONTAINER_HOST", "ssh://me@h/run/p.sock"),
                ("CONTAINER_SSHKEY", "/k/2"),
            ]),
            1000,
            none,
            None,
        )
        .expect("CONTAINER_HOST");
        let Host::Ssh(t) = &e.host else {
            panic!("{:?}", e.host)
        };
        assert_eq!(
            (t.cli, t.identity.as_deref()),
            ("podman", Some(Path::new("/k/2")))
        );
        assert_eq!(e.source.to_string(), "CONTAINER_HOST");
        // CONTAINER_CONNECTION over CONTAINER_HOST; its identity is ssh's -i.
        let e = podman(
            &with(&[
                ("CONTAINER_HOST", "unix:///run/h.sock"),
                ("CONTAINER_CONNECTION", "remote"),
            ]),
            1000,
            none,
            None,
        )
        .expect("CONTAINER_CONNECTION");
        assert_eq!(
            e.source.to_string(),
            "connection remote (CONTAINER_CONNECTION)"
        );
        let Host::Ssh(t) = &e.host else {
            panic!("{:?}", e.host)
        };
        assert_eq!(
            t.argv().join(" "),
            "-o ConnectTimeout=30 -o BatchMode=yes -T -i /k/id -l core -p 2222 -- h podman \
             --url unix:///run/user/1000/podman/podman.sock system dial-stdio"
        );
        // A pinned connection over everything.
        assert_eq!(
            show(podman(
                &with(&[("CONTAINER_CONNECTION", "remote")]),
                1000,
                none,
                Some("def")
            )),
            Ok(("unix:///run/def.sock".into(), "connection def".into()))
        );
        // An unknown one names itself and the files read.
        let err = podman(&with(&[("CONTAINER_CONNECTION", "gone")]), 1000, none, None)
            .expect_err("unknown");
        assert!(
            err.to_string().contains("\"gone\"") && err.to_string().contains(&conf),
            "{err}"
        );
        // No connection: the rootless socket, never the rootful one.
        let empty = store.0.join("empty.conf");
        std::fs::write(&empty, "").expect("empty.conf");
        let empty = empty.display().to_string();
        let no_connection = [("CONTAINERS_CONF", empty.as_str())];
        let mut env = no_connection.to_vec();
        env.push(("XDG_RUNTIME_DIR", "/run/user/1000"));
        let e = podman(&env, 1000, none, None).expect("XDG_RUNTIME_DIR");
        assert_eq!(e.host, unix("/run/user/1000/podman/podman.sock"));
        assert!(
            e.hint
                .is_some_and(|h| h.contains("systemctl --user start podman.socket"))
        );
        // Without XDG_RUNTIME_DIR: /run/user/UID, not /run/podman.
        let e = podman(&no_connection, 1000, &store.0, None).expect("/run/user/UID");
        assert_eq!(e.host, Host::Unix(store.0.join("1000/podman/podman.sock")));
        // Root: the rootful socket, whatever XDG_RUNTIME_DIR says.
        let e = podman(&env, 0, none, None).expect("root");
        assert_eq!(e.host, unix("/run/podman/podman.sock"));
        assert_eq!(e.source, Origin::Default);
    }
}
