//! etcd (`lookout_etcd`): the configuration of the one watch of the prefix
//! (of every source, or of those named), each event's source printed as
//! its host.

use lookout_etcd::{Client, Credentials, EtcdConfig, model, prefix_range_end};

use crate::cli::EtcdArgs;
use crate::exit::Exit;
use crate::output::Warnings;
use crate::publish;
use crate::sources::Location;

/// The watch's configuration, and where the cluster is (`--endpoints`).
pub fn config(a: &EtcdArgs) -> Result<(EtcdConfig, Location), Exit> {
    let mut config = EtcdConfig::new(&a.endpoints)
        .map_err(|e| Exit::usage("invalid configuration", &e))?
        .prefix(publish::prefix_words(&a.prefix))
        .sources(&a.sources)
        .readiness(a.common.readiness)
        .watch_config(
            EtcdConfig::default_watch().initial(a.common.initial || !a.common.renders.is_empty()),
        );
    if let (Some(user), Some(file)) = (&a.user, &a.password_file) {
        let credentials = Credentials::from_file(user.as_str(), file)
            .map_err(|e| Exit::usage("invalid configuration", &e))?;
        config = config.credentials(credentials);
    }
    let identity = a.cert.as_deref().zip(a.key.as_deref());
    let tls = publish::tls(
        config.get_endpoints(),
        a.cacert.as_deref(),
        identity,
        "--cacert",
    )
    .map_err(|e| Exit::Usage(format!("invalid configuration: {e}")))?;
    if let Some(tls) = tls {
        config = config.tls(tls);
    }
    let at = Location {
        host: a.endpoints.clone(),
        from: "--endpoints".to_owned(),
    };
    Ok((config, at))
}

/// Says through `warnings` when the prefix holds no key at all (no
/// instance, no publisher's status): one request at start; an etcd that
/// cannot be read says nothing here (the watch reports it).
pub async fn warn_if_empty(config: EtcdConfig, warnings: Warnings) {
    let Ok(prefix) = model::check_prefix(config.get_prefix()) else {
        return;
    };
    let key = format!("{prefix}/");
    let client = match Client::new(
        config.get_endpoints().to_vec(),
        config.get_request_timeout(),
    ) {
        Ok(c) => c
            .with_credentials(config.get_credentials().cloned())
            .with_tls(config.get_tls().cloned()),
        Err(_) => return,
    };
    let range_end = prefix_range_end(key.as_bytes());
    match client.newest_modification(key.as_bytes(), &range_end).await {
        Ok(newest) if newest.keys == 0 => {
            warnings.warn(&format!(
                "no key under the prefix `{key}`: no publisher has written there \
                 (`--publish etcd://HOST:PORT/{prefix}` writes under it); waiting for one"
            ));
        }
        Ok(_) => {}
        Err(e) => tracing::debug!("cannot count the keys under `{key}`: {e}"),
    }
}
