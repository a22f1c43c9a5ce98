//! What can go wrong: a configuration that can never work
//! ([`ConfigError`]), a dial, session or probe that failed ([`DialError`]).

use std::fmt;
use std::path::PathBuf;

use kube::core::Status;

use crate::fetch::NOT_A_STATUS;

/// A [`K8sConfig`](crate::K8sConfig) that can never work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `kinds` is empty: there would be nothing to watch.
    #[error("no kind to watch: K8sConfig::kinds is empty")]
    NoKinds,
    /// `namespace` is `Some("")`; use `None` for all namespaces.
    #[error("the namespace is empty; use None to watch all namespaces")]
    EmptyNamespace,
    /// [`max_line`](crate::K8sConfig::max_line) is 0: no line of a watch,
    /// however short, could be read, and every session would end at its
    /// first.
    #[error("max_line is 0: no watch line could be read")]
    ZeroMaxLine,
    /// `context` names no context of the kubeconfig.
    #[non_exhaustive]
    #[error(
        "no context `{context}` in the kubeconfig ({tried}){}",
        known_contexts(known)
    )]
    UnknownContext {
        /// The context asked for.
        context: String,
        /// The kubeconfig files read.
        tried: String,
        /// The contexts they have.
        known: Vec<String>,
    },
    /// A kind that does not read as one ([`KindRef::parse`](crate::KindRef::parse)).
    #[non_exhaustive]
    #[error("`{kind}` names no kind: {why}")]
    BadKind {
        /// As given.
        kind: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A kind the apiserver does not serve ([`check`](crate::check) says so;
    /// a watch waits for it).
    #[non_exhaustive]
    #[error("the apiserver serves no kind `{kind}`{}", nearest_names(nearest))]
    UnknownKind {
        /// As given.
        kind: String,
        /// The served names nearest it (`plural.group`), at most 3.
        nearest: Vec<String>,
    },
    /// A kind name that several served kinds answer to: add the group.
    #[non_exhaustive]
    #[error("`{kind}` is ambiguous: the apiserver serves {}; name one with its group", found.join(" and "))]
    AmbiguousKind {
        /// As given.
        kind: String,
        /// The kinds it names (`plural.group`).
        found: Vec<String>,
    },
    /// A served kind lookout cannot watch as asked.
    #[non_exhaustive]
    #[error("cannot watch `{kind}`: {why}")]
    UnsupportedKind {
        /// As given.
        kind: String,
        /// Why.
        why: String,
    },
}

fn nearest_names(nearest: &[String]) -> String {
    if nearest.is_empty() {
        String::new()
    } else {
        format!(" (nearest: {})", nearest.join(", "))
    }
}

fn known_contexts(known: &[String]) -> String {
    if known.is_empty() {
        "; it has none".to_owned()
    } else {
        format!("; it has {}", known.join(", "))
    }
}

/// Why [`check`](crate::check) refused a configuration, or could not ask.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The configuration can never work on this cluster as it is now (a
    /// kind it does not serve, an ambiguous or unsupported kind…).
    #[error(transparent)]
    Config(ConfigError),
    /// The cluster could not be asked (unreachable, refused, no kubeconfig).
    #[error(transparent)]
    Dial(DialError),
}

/// Why a dial, a session or a probe failed; reported inside the core's
/// [`Error`](lookout_core::Error) of a `Disconnected` status.
///
/// When the apiserver refused a request (a `Status` answer: `403 Forbidden`
/// for a role without `list` or `watch`, `401 Unauthorized` for an expired
/// token…), the message ends with the apiserver's own message, on one line,
/// as `kubectl` prints it (`deployments.apps is forbidden: User "…" cannot
/// watch resource "deployments" in API group "apps" at the cluster scope`),
/// and [`source`](std::error::Error::source) is `None`: the chain stops
/// there, so a report of the whole chain carries no debug dump of the
/// `Status`. The kube error stays in the variant's field. Any other error
/// (a connection, TLS, a kubeconfig) keeps its sources.
#[derive(Debug)]
#[non_exhaustive]
pub enum DialError {
    /// The explicit kubeconfig could not be read or used.
    #[non_exhaustive]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig's context `context` could not be used.
    #[non_exhaustive]
    Context {
        /// The context.
        context: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No usable configuration was found (`KUBECONFIG`, `~/.kube/config`, in-cluster).
    Infer(kube::config::InferConfigError),
    /// The client could not be built from the configuration (TLS, auth).
    #[non_exhaustive]
    Client {
        /// The apiserver's URL.
        cluster: String,
        /// Why.
        source: kube::Error,
    },
    /// Listing or watching one kind failed.
    #[non_exhaustive]
    Watch {
        /// Which kind: its plural, and its group unless it is a built-in
        /// workload (`deployments`, `clusters.postgresql.cnpg.io`).
        kind: String,
        /// kube's error.
        source: kube::runtime::watcher::Error,
    },
    /// API discovery of a kind (or its CRD, for its scale) failed.
    #[non_exhaustive]
    Discovery {
        /// The kind, as configured.
        kind: String,
        /// kube's error.
        source: kube::Error,
    },
    /// A kind the configuration names cannot be watched on this cluster
    /// (ambiguous, cluster-scoped…); retried, as the cluster's kinds may
    /// change.
    Kind(ConfigError),
    /// The liveness probe (`GET /version`) failed.
    Probe(kube::Error),
    /// A line of a kind's watch was longer than the limit
    /// ([`K8sConfig::max_line`](crate::K8sConfig::max_line)): the rest of
    /// it was skipped unread, and the session ends (the core redials).
    #[non_exhaustive]
    LineTooLong {
        /// Which kind, as in [`DialError::Watch`].
        kind: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A page of a kind's list was longer than the limit
    /// ([`K8sConfig::max_list_page`](crate::K8sConfig::max_list_page)) even
    /// with one object a page: the session ends (the core redials).
    #[non_exhaustive]
    PageTooLarge {
        /// Which kind, as in [`DialError::Watch`].
        kind: String,
        /// The limit, in bytes.
        limit: usize,
    },
}

impl fmt::Display for DialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kubeconfig { path, source } => {
                write!(f, "cannot use kubeconfig {}: {source}", path.display())
            }
            Self::Context { context, source } => {
                write!(f, "cannot use kubeconfig context {context}: {source}")
            }
            Self::Infer(source) => write!(
                f,
                "cannot infer a cluster configuration (KUBECONFIG, ~/.kube/config, in-cluster): {source}"
            ),
            Self::Client { cluster, source } => {
                write!(f, "cannot build a client for {cluster}: ")?;
                match refused(source) {
                    Some(status) => said(f, status),
                    None => write!(f, "{source}"),
                }
            }
            Self::Discovery { kind, source } => {
                write!(f, "discovering kind `{kind}` failed: ")?;
                match refused(source) {
                    Some(status) => said(f, status),
                    None => write!(f, "{source}"),
                }
            }
            Self::Kind(e) => write!(f, "{e}"),
            Self::Watch { kind, source } => {
                write!(f, "watching {kind} failed: ")?;
                match watch_refused(source) {
                    Some(status) => said(f, status),
                    None => write!(f, "{source}"),
                }
            }
            Self::Probe(source) => {
                f.write_str("the apiserver did not answer GET /version: ")?;
                match refused(source) {
                    Some(status) => said(f, status),
                    None => write!(f, "{source}"),
                }
            }
            Self::LineTooLong { kind, limit } => write!(
                f,
                "watching {kind} failed: a line of the watch exceeded {limit} bytes \
                 (K8sConfig::max_line); the rest of it was not read"
            ),
            Self::PageTooLarge { kind, limit } => write!(
                f,
                "listing {kind} failed: a list page of one object exceeded {limit} bytes \
                 (K8sConfig::max_list_page)"
            ),
        }
    }
}

impl std::error::Error for DialError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Kubeconfig { source, .. } | Self::Context { source, .. } => Some(source),
            Self::Infer(source) => Some(source),
            // The apiserver's answer is the whole story, told in the message.
            Self::Kind(_) | Self::LineTooLong { .. } | Self::PageTooLarge { .. } => None,
            Self::Client { source, .. } | Self::Probe(source) | Self::Discovery { source, .. } => {
                refused(source).is_none().then_some(source as _)
            }
            Self::Watch { source, .. } => watch_refused(source).is_none().then_some(source as _),
        }
    }
}

/// The apiserver's answer, when `e` is one (kube's `Display` of it appends
/// the `Status`'s debug form).
fn refused(e: &kube::Error) -> Option<&Status> {
    match e {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

/// The apiserver's answer to a list or watch, or its `ERROR` event.
fn watch_refused(e: &kube::runtime::watcher::Error) -> Option<&Status> {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => refused(e),
        W::WatchError(status) => Some(status),
        W::NoResourceVersion => None,
    }
}

/// What the apiserver said, on one line: its message (as `kubectl`
/// prints it); a body that was no `Status` with its HTTP code; a
/// `Status` without a message as its code and reason.
fn said(f: &mut fmt::Formatter<'_>, status: &Status) -> fmt::Result {
    let mut words = status.message.split_whitespace();
    let Some(first) = words.next() else {
        write!(f, "HTTP {}", status.code)?;
        if !status.reason.is_empty() {
            write!(f, " {}", status.reason)?;
        }
        return Ok(());
    };
    if status.reason == NOT_A_STATUS {
        write!(f, "HTTP {}: ", status.code)?;
    }
    if status.message.contains(['\n', '\r']) {
        // One line, whatever the body: its words, one space apart.
        f.write_str(first)?;
        for word in words {
            write!(f, " {word}")?;
        }
        Ok(())
    } else {
        f.write_str(status.message.trim())
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use kube::runtime::watcher;

    use super::*;

    /// What the apiserver answers a role without `watch` (as measured on
    /// the test bed).
    const FORBIDDEN: &str = "deployments.apps is forbidden: User \
        \"system:serviceaccount:ns:lookout\" cannot watch resource \"deployments\" \
        in API group \"apps\" at the cluster scope";

    fn forbidden() -> Box<Status> {
        Box::new(Status {
            status: Some(kube::core::response::StatusSummary::Failure),
            code: 403,
            message: FORBIDDEN.to_owned(),
            reason: "Forbidden".to_owned(),
            details: Some(kube::core::response::StatusDetails {
                group: "apps".to_owned(),
                kind: "deployments".to_owned(),
                name: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 0,
            }),
            metadata: None,
        })
    }

    /// Every source's message, `: `-separated (as anyhow's `{:#}`).
    fn chain(e: &DialError) -> String {
        let mut s = e.to_string();
        let mut next = e.source();
        while let Some(cause) = next {
            s.push_str(": ");
            s.push_str(&cause.to_string());
            next = cause.source();
        }
        s
    }

    #[test]
    fn a_refused_list_or_watch_is_the_apiservers_one_line() {
        let errors = [
            watcher::Error::InitialListFailed(kube::Error::Api(forbidden())),
            watcher::Error::WatchStartFailed(kube::Error::Api(forbidden())),
            watcher::Error::WatchFailed(kube::Error::Api(forbidden())),
            watcher::Error::WatchError(forbidden()),
        ];
        for source in errors {
            let e = DialError::Watch {
                kind: "deployments".to_owned(),
                source,
            };
            let line = format!("watching deployments failed: {FORBIDDEN}");
            assert_eq!(e.to_string(), line);
            assert!(
                e.source().is_none(),
                "the chain stops at the apiserver's word"
            );
            assert_eq!(chain(&e), line);
            // Wrapped by the core, as a `Disconnected` status carries it.
            let core = lookout_core::Error::Session(Box::new(e));
            assert_eq!(
                core.to_string(),
                format!("the engine's change feed failed: {line}")
            );
            assert!(!format!("{core}").contains("Status {"));
            let mut cause = core.source();
            while let Some(c) = cause {
                assert!(!c.to_string().contains("Status {"), "{c}");
                cause = c.source();
            }
        }
    }

    #[test]
    fn a_refused_probe_or_client_is_the_apiservers_one_line() {
        let e = DialError::Probe(kube::Error::Api(forbidden()));
        assert_eq!(
            e.to_string(),
            format!("the apiserver did not answer GET /version: {FORBIDDEN}")
        );
        assert!(e.source().is_none());
        let e = DialError::Client {
            cluster: "https://127.0.0.1:6443/".to_owned(),
            source: kube::Error::Api(forbidden()),
        };
        assert_eq!(
            e.to_string(),
            format!("cannot build a client for https://127.0.0.1:6443/: {FORBIDDEN}")
        );
        assert!(e.source().is_none());
    }

    #[test]
    fn any_answer_is_one_line() {
        let status = |code, message: &str, reason: &str| {
            let mut s = Status::failure(message, reason).with_code(code);
            s.details = None;
            watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(s)))
        };
        let line = |source| {
            DialError::Watch {
                kind: "statefulsets".to_owned(),
                source,
            }
            .to_string()
        };
        // A body that was no Status (a proxy's page): its code, its words.
        assert_eq!(
            line(status(
                502,
                "<html>\r\n  <h1>Bad Gateway</h1>\n</html>\n",
                NOT_A_STATUS
            )),
            "watching statefulsets failed: HTTP 502: <html> <h1>Bad Gateway</h1> </html>"
        );
        // A Status without a message: its code and reason.
        assert_eq!(
            line(status(401, "", "Unauthorized")),
            "watching statefulsets failed: HTTP 401 Unauthorized"
        );
        assert_eq!(
            line(status(500, " ", "")),
            "watching statefulsets failed: HTTP 500"
        );
    }

    #[test]
    fn other_errors_keep_their_chain() {
        let e = DialError::Watch {
            kind: "deployments".to_owned(),
            source: watcher::Error::NoResourceVersion,
        };
        assert!(e.source().is_some());
        assert_eq!(
            e.to_string(),
            "watching deployments failed: no metadata.resourceVersion in watch result \
             (does resource support watch?)"
        );
        let io = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "eof");
        let e = DialError::Probe(kube::Error::ReadEvents(io));
        assert_eq!(
            e.to_string(),
            "the apiserver did not answer GET /version: Error reading events stream: eof"
        );
        let source = e.source().expect("a source");
        assert_eq!(
            source.source().map(ToString::to_string).as_deref(),
            Some("eof")
        );
    }
}
