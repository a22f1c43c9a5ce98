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

use crate::DialError;

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
    pub(crate) async fn connect(
        &self,
        kubeconfig: Option<&Path>,
    ) -> Result<(Client, String), DialError> {
        let config = match kubeconfig {
            Some(path) => {
                let to_err = |source| DialError::Kubeconfig {
                    path: path.to_owned(),
                    source,
                };
                let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(to_err)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(to_err)?
            }
            None => kube::Config::infer().await.map_err(DialError::Infer)?,
        };
        let cluster = config.cluster_url.to_string();
        let print = fingerprint(&config, kubeconfig);
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
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        tracing::debug!(%cluster, "connecting with a new client");
        let client = Client::try_from(config).map_err(|source| DialError::Client {
            cluster: cluster.clone(),
            source,
        })?;
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some((print, cluster.clone(), client.clone()));
        Ok((client, cluster))
    }
}

/// A hash of what a client is built from: the resolved configuration (its
/// debug form, in which kube redacts secrets) and the bytes of the
/// kubeconfig files it came from (so a changed token or certificate in them
/// makes a new client).
fn fingerprint(config: &kube::Config, kubeconfig: Option<&Path>) -> u64 {
    let mut h = DefaultHasher::new();
    format!("{config:?}").hash(&mut h);
    let files: Vec<PathBuf> = match kubeconfig {
        Some(path) => vec![path.to_owned()],
        None => match std::env::var_os("KUBECONFIG") {
            Some(paths) => std::env::split_paths(&paths).collect(),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".kube").join("config"))
                .into_iter()
                .collect(),
        },
    };
    for file in files {
        std::fs::read(&file).ok().hash(&mut h);
    }
    h.finish()
}
