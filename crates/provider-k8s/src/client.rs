//! The client of a dial: the configuration is resolved anew on every dial
//! (explicit kubeconfig, else `KUBECONFIG`, `~/.kube/config`, in-cluster), and
//! the last client is kept while what it was built from did not change, so a
//! redial reuses its connections and a resumed watch talks to the same
//! apiserver.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use kube::Client;
use kube::config::KubeConfigOptions;

use crate::K8sConfig;
use crate::error::{ConfigError, DialError};
use crate::limit::BodyLimit;

/// Reads the explicit kubeconfig of `config` ([`K8sConfig::kubeconfig`])
/// as every dial does, without contacting the cluster: a
/// [`DialError::Kubeconfig`] when it cannot be read or parsed, `Ok` when it
/// can or none is given (an inferred one is each dial's to find). For a
/// program that treats a kubeconfig it was told to use and cannot read as
/// a usage error at start, as `kubectl --kubeconfig` does and `lookout k8s`
/// does (exit 2); the watch itself keeps retrying, for a file that may yet
/// appear (a secret not mounted yet).
pub fn check_kubeconfig(config: &K8sConfig) -> Result<(), DialError> {
    match config.get_kubeconfig() {
        Some(path) => kube::config::Kubeconfig::read_from(path)
            .map(drop)
            .map_err(|source| DialError::Kubeconfig {
                path: path.to_owned(),
                source,
            }),
        None => Ok(()),
    }
}

/// The last client and the fingerprint of the configuration it was built
/// from. Only a hash is kept: no credential is stored twice, and none is
/// ever logged.
#[derive(Default)]
pub(crate) struct Cache(Mutex<Option<(u64, String, Client)>>);

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Cache")
            .field("cluster", &slot.as_ref().map(|(_, cluster, _)| cluster))
            .finish()
    }
}

impl Cache {
    /// Resolves the configuration (`kubeconfig`, else inferred) and returns
    /// a client for it with the apiserver's URL: the last one when the
    /// configuration is unchanged, else a new one.
    /// Every answer kube reads whole (API discovery) fails past `limit`
    /// bytes (`limit.rs`).
    pub(crate) async fn connect(
        &self,
        kubeconfig: Option<&Path>,
        context: Option<&str>,
        limit: usize,
    ) -> Result<(Client, String), DialError> {
        let options = KubeConfigOptions {
            context: context.map(str::to_owned),
            ..KubeConfigOptions::default()
        };
        let config = match (kubeconfig, context) {
            (Some(path), _) => {
                let to_err = |source| DialError::Kubeconfig {
                    path: path.to_owned(),
                    source,
                };
                let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(to_err)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(to_err)?
            }
            // A context is a kubeconfig's: `KUBECONFIG`, else `~/.kube/config`.
            (None, Some(context)) => {
                kube::Config::from_kubeconfig(&options)
                    .await
                    .map_err(|source| DialError::Context {
                        context: context.to_owned(),
                        source,
                    })?
            }
            (None, None) => kube::Config::infer().await.map_err(DialError::Infer)?,
        };
        let cluster = config.cluster_url.to_string();
        let print = fingerprint(&config, kubeconfig, context);
        {
            let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((p, c, client)) = slot.as_ref()
                && *p == print
                && *c == cluster
            {
                return Ok((client.clone(), cluster));
            }
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err only when another thread installed one meanwhile: fine either way.
            let _ = lookout_transport::crypto_provider().install_default();
        }
        tracing::debug!(%cluster, "connecting with a new client");
        let client = kube::client::ClientBuilder::try_from(config)
            .map_err(|source| DialError::Client {
                cluster: cluster.clone(),
                source,
            })?
            .with_layer(&BodyLimit(limit))
            .build();
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some((print, cluster.clone(), client.clone()));
        Ok((client, cluster))
    }
}

/// A hash of what a client is built from: the resolved configuration (its
/// debug form, in which kube redacts secrets) and the bytes of the
/// kubeconfig files it came from (so a changed token or certificate in them
/// makes a new client).
fn fingerprint(config: &kube::Config, kubeconfig: Option<&Path>, context: Option<&str>) -> u64 {
    let mut h = DefaultHasher::new();
    format!("{config:?}").hash(&mut h);
    context.hash(&mut h);
    for file in kubeconfig_files(kubeconfig) {
        std::fs::read(&file).ok().hash(&mut h);
    }
    h.finish()
}

/// The kubeconfig files a configuration is read from: the explicit one,
/// else those of `KUBECONFIG`, else `~/.kube/config`.
fn kubeconfig_files(kubeconfig: Option<&Path>) -> Vec<PathBuf> {
    match kubeconfig {
        Some(path) => vec![path.to_owned()],
        None => match std::env::var_os("KUBECONFIG") {
            Some(paths) => std::env::split_paths(&paths).collect(),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".kube").join("config"))
                .into_iter()
                .collect(),
        },
    }
}

/// Checks that the kubeconfig (`kubeconfig`, else `KUBECONFIG`, else
/// `~/.kube/config`) has `context`: a context that a readable kubeconfig
/// does not have is a configuration that can never work, said at once
/// rather than by every dial.
pub(crate) fn check_context(kubeconfig: Option<&Path>, context: &str) -> Result<(), ConfigError> {
    let files = kubeconfig_files(kubeconfig);
    let tried = files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let read = match kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path),
        None => kube::config::Kubeconfig::read(),
    };
    // A kubeconfig that cannot be read may appear: each dial says so.
    let Ok(config) = read else {
        return Ok(());
    };
    if config.contexts.iter().any(|c| c.name == context) {
        return Ok(());
    }
    Err(ConfigError::UnknownContext {
        context: context.to_owned(),
        tried,
        known: config.contexts.into_iter().map(|c| c.name).collect(),
    })
}
