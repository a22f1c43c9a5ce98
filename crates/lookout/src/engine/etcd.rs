//! etcd (`lookout_etcd`): the configuration of the one watch of the prefix
//! (of every source, or of those named), each event's source printed as
//! its host.

use lookout_etcd::{Credentials, EtcdConfig};

use crate::cli::EtcdArgs;
use crate::exit::Exit;
use crate::publish;
use crate::watched::Location;

/// The watch's configuration, and where the cluster is (`--endpoints`).
pub fn config(a: &EtcdArgs) -> Result<(EtcdConfig, Location), Exit> {
    let mut config = EtcdConfig::new(&a.endpoints)
        .map_err(|e| Exit::usage("invalid configuration", &e))?
        .prefix(a.prefix.as_str())
        .sources(&a.sources)
        .readiness(a.common.readiness)
        .watch_config(EtcdConfig::default_watch().initial(a.common.initial));
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
