//! Where the engine listens: parsing a host string and discovering the default.

use std::fmt;

pub use super::ssh::SshTarget;
use std::path::PathBuf;

/// A host string lookout cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The host is not `unix:///path`, `tcp://host:port`, `http://host[:port]`,
    /// `https://host[:port]` or `ssh://[user@]host[:port][/path]`.
    #[non_exhaustive]
    #[error("unusable engine host {host:?} (from {source_name}): {reason}")]
    InvalidHost {
        /// The host as given.
        host: String,
        /// Where it came from: `config` or an environment variable's name.
        source_name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A docker context named (pinned, `DOCKER_CONTEXT` or `currentContext`)
    /// is not in the store.
    #[non_exhaustive]
    #[error("docker context {name:?} not found: no {}", path.display())]
    UnknownContext {
        /// The context's name.
        name: String,
        /// The store's file that was tried.
        path: PathBuf,
    },
    /// A docker context's store entry cannot be used.
    #[non_exhaustive]
    #[error("docker context {name:?} ({}): {reason}", path.display())]
    Context {
        /// The context's name.
        name: String,
        /// Its `meta.json`.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The docker CLI's `config.json` cannot be read.
    #[non_exhaustive]
    #[error("cannot read {}: {reason}", path.display())]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A Podman connection named (pinned or `CONTAINER_CONNECTION`) is in
    /// none of podman's files.
    #[non_exhaustive]
    #[error("podman connection {name:?} not found (read: {tried})")]
    UnknownConnection {
        /// The connection's name.
        name: String,
        /// The files read.
        tried: String,
    },
    /// Both a context and a host were given.
    #[error("conflicting options: cannot specify both a host and a context")]
    ContextAndHost,
    /// `DOCKER_API_VERSION` is not a version (`1.41`).
    #[non_exhaustive]
    #[error("unusable DOCKER_API_VERSION {value:?}: expected MAJOR.MINOR, e.g. 1.41")]
    InvalidApiVersion {
        /// The variable's value.
        value: String,
    },
}

/// A parsed engine address. Parsing checks the syntax only: the socket or the
/// server is reached (and TLS material read) on every dial.
///
/// `#[non_exhaustive]`: another kind of address (a Windows named pipe) may
/// come; match with a wildcard arm.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Host {
    /// A unix socket.
    Unix(PathBuf),
    /// A TCP endpoint, plain or TLS.
    #[non_exhaustive]
    Tcp {
        /// Host name or IP address (IPv6 without brackets).
        host: String,
        /// Port.
        port: u16,
        /// Whether to speak TLS (`https://`, or `tcp://` with `DOCKER_TLS_VERIFY` or `DOCKER_TLS`).
        tls: bool,
    },
    /// Through the system `ssh`: each connection one `ssh … system
    /// dial-stdio` (see [`SshTarget`]).
    Ssh(SshTarget),
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "unix://{}", path.display()),
            Self::Ssh(target) => fmt::Display::fmt(target, f),
            Self::Tcp { host, port, tls } => {
                let scheme = if *tls { "https" } else { "http" };
                if host.contains(':') {
                    write!(f, "{scheme}://[{host}]:{port}")
                } else {
                    write!(f, "{scheme}://{host}:{port}")
                }
            }
        }
    }
}

impl Host {
    /// Parses `unix:///path`, `tcp://host:port`, `http://host[:port]`,
    /// `https://host[:port]` or `ssh://[user@]host[:port][/path]` (whose
    /// remote CLI is `docker`; see [`SshTarget::cli`]). A `tcp://` host speaks TLS when `tcp_tls` is set
    /// (the caller reads `DOCKER_TLS_VERIFY` and `DOCKER_TLS`); without a port, `tcp://` and
    /// `http://` use 2375, TLS uses 2376 (Docker's conventions).
    pub fn parse(s: &str, source_name: &str, tcp_tls: bool) -> Result<Self, ConfigError> {
        let invalid = |reason| ConfigError::InvalidHost {
            host: s.to_owned(),
            source_name: source_name.to_owned(),
            reason,
        };
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            invalid("missing scheme (unix://, tcp://, http://, https://, ssh://)")
        })?;
        let tls = match scheme {
            "unix" => {
                if rest.is_empty() || !rest.starts_with('/') {
                    return Err(invalid(
                        "a unix socket needs an absolute path: unix:///path",
                    ));
                }
                return Ok(Self::Unix(PathBuf::from(rest)));
            }
            "tcp" => tcp_tls,
            "http" => false,
            "https" => true,
            "ssh" => return SshTarget::parse(rest).map(Self::Ssh).map_err(invalid),
            "npipe" => return Err(invalid("npipe:// is not supported (Windows named pipes)")),
            _ => return Err(invalid("unknown scheme")),
        };
        // Only an authority, optionally followed by a lone `/`.
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() {
            return Err(invalid("missing host name"));
        }
        if authority.contains(['/', '?', '#', '@']) {
            return Err(invalid("expected only host[:port], without path or user"));
        }
        let default_port = if tls { 2376 } else { 2375 };
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| invalid("unclosed [ in an IPv6 address"))?;
            let port = match after {
                "" => default_port,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| invalid("invalid port"))?,
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => {
                    (h, p.parse().map_err(|_| invalid("invalid port"))?)
                }
                Some(_) => return Err(invalid("an IPv6 address needs brackets: [::1]:2375")),
                None => (authority, default_port),
            }
        };
        if host.is_empty() {
            return Err(invalid("missing host name"));
        }
        Ok(Self::Tcp {
            host: host.to_owned(),
            port,
            tls,
        })
    }

    /// The value of the `Host` header.
    pub(crate) fn authority(&self) -> String {
        match self {
            // Docker's own clients send this for local sockets.
            Self::Unix(_) | Self::Ssh(_) => "localhost".to_owned(),
            Self::Tcp { host, port, .. } if host.contains(':') => format!("[{host}]:{port}"),
            Self::Tcp { host, port, .. } => format!("{host}:{port}"),
        }
    }
}

/// The TLS settings of an endpoint (the files are read on every TLS
/// connection).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsEnv {
    /// `tcp://` speaks TLS: `DOCKER_TLS_VERIFY` or `DOCKER_TLS` is set
    /// (non-empty), or a named context has TLS material or `SkipTLSVerify`.
    pub(crate) tls: bool,
    /// Where `ca.pem`, `cert.pem` and `key.pem` are: `DOCKER_CERT_PATH`, else
    /// the docker configuration directory; a named context's store.
    pub(crate) cert_path: Option<PathBuf>,
    /// Set when the engine's certificate is not verified, as the docker CLI
    /// does not verify it: why (`DOCKER_TLS without DOCKER_TLS_VERIFY`,
    /// `context NAME has SkipTLSVerify`). `ca.pem` is then not read; the
    /// handshake's signatures are still checked.
    pub(crate) skip_verify: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16, tls: bool) -> Host {
        Host::Tcp {
            host: host.to_owned(),
            port,
            tls,
        }
    }

    #[test]
    fn parses_the_four_schemes() {
        let p = |s| Host::parse(s, "config", false);
        assert_eq!(
            p("unix:///var/run/docker.sock"),
            Ok(Host::Unix("/var/run/docker.sock".into()))
        );
        assert_eq!(p("tcp://10.0.0.1:2375"), Ok(tcp("10.0.0.1", 2375, false)));
        assert_eq!(p("tcp://docker"), Ok(tcp("docker", 2375, false)));
        assert_eq!(p("http://docker:80/"), Ok(tcp("docker", 80, false)));
        assert_eq!(p("https://docker"), Ok(tcp("docker", 2376, true)));
        assert_eq!(p("tcp://[::1]:1234"), Ok(tcp("::1", 1234, false)));
        assert_eq!(
            Host::parse("tcp://docker", "DOCKER_HOST", true),
            Ok(tcp("docker", 2376, true))
        );
    }

    #[test]
    fn rejects_what_it_cannot_use() {
        for bad in [
            "",
            "/var/run/docker.sock",
            "unix://relative.sock",
            "unix://",
            "ssh://me:pw@host",
            "npipe:////./pipe/docker_engine",
            "ftp://x",
            "tcp://",
            "tcp://host:port",
            "tcp://host:99999",
            "tcp://::1:2375",
            "tcp://[::1",
            "http://host/path",
            "tcp://user@host:1",
        ] {
            let err = Host::parse(bad, "DOCKER_HOST", false).expect_err(bad);
            assert!(err.to_string().contains("DOCKER_HOST"), "{err}");
        }
    }

    #[test]
    fn displays_and_authority() {
        assert_eq!(tcp("::1", 1, true).to_string(), "https://[::1]:1");
        assert_eq!(tcp("::1", 1, false).authority(), "[::1]:1");
        assert_eq!(tcp("h", 2, false).authority(), "h:2");
        assert_eq!(Host::Unix("/s".into()).to_string(), "unix:///s");
    }
}
