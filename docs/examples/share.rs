//! The hub example of `docs/library.md` (one connection, many consumers),
//! compiled by `crates/lookout/tests/docs.rs`, which also checks that the
//! page shows it as it is here.

use lookout_core::Start;
use std::time::Duration;

/// Share one Docker watch among two subscriptions and a store; wait until
/// `web` runs.
// The subscriptions are only named here: a program hands each to a task.
#[allow(unused_variables)]
pub async fn share_docker() -> Result<(), Box<dyn std::error::Error>> {
    let hub = lookout_docker::watch(lookout_docker::DockerConfig::default())?.share();
    let store = hub.store();
    let dashboard = hub.subscribe(Start::Initial); // the present, then every change
    let proxy = hub.subscribe(Start::Baseline); // only the changes

    // … hand each subscription to its own task; each reads at its own pace.
    let web_runs = store.until("web", |web| web.is_some_and(|web| web.running));
    tokio::time::timeout(Duration::from_secs(10), web_runs).await?;
    Ok(())
}
