//! What can go wrong: a configuration that can never work
//! ([`ConfigError`]), a dial, session or probe that failed ([`DialError`]).

use std::path::PathBuf;

use crate::kind::Kind;

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
}

fn known_contexts(known: &[String]) -> String {
    if known.is_empty() {
        "; it has none".to_owned()
    } else {
        format!("; it has {}", known.join(", "))
    }
}

/// Why a dial, a session or a probe failed; reported inside the core's
/// [`Error`](lookout_core::Error) of a `Disconnected` status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// The explicit kubeconfig could not be read or used.
    #[non_exhaustive]
    #[error("cannot use kubeconfig {path}: {source}", path = path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig's context `context` could not be used.
    #[non_exhaustive]
    #[error("cannot use kubeconfig context {context}: {source}")]
    Context {
        /// The context.
        context: String,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No usable configuration was found (`KUBECONFIG`, `~/.kube/config`, in-cluster).
    #[error("cannot infer a cluster configuration (KUBECONFIG, ~/.kube/config, in-cluster): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The client could not be built from the configuration (TLS, auth).
    #[non_exhaustive]
    #[error("cannot build a client for {cluster}: {source}")]
    Client {
        /// The apiserver's URL.
        cluster: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Listing or watching one kind failed.
    #[non_exhaustive]
    #[error("watching {kind}s failed: {source}")]
    Watch {
        /// Which kind.
        kind: Kind,
        /// kube's error.
        #[source]
        source: kube::runtime::watcher::Error,
    },
    /// The liveness probe (`GET /version`) failed.
    #[error("the apiserver did not answer GET /version: {0}")]
    Probe(#[source] kube::Error),
}
