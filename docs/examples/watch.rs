//! The library example of the README (and of `docs/library.md`), compiled by
//! `crates/lookout/tests/docs.rs`, which also checks that the pages show it
//! as it is here.

use lookout_core::Item;
use tokio_stream::StreamExt;

/// Print the default Docker engine's container events (stdout) and the
/// connection's status (stderr), forever: drop the future to stop.
pub async fn watch_docker() -> Result<(), Box<dyn std::error::Error>> {
    let mut watch = lookout_docker::watch(lookout_docker::DockerConfig::default())?;
    while let Some(item) = watch.next().await {
        match item {
            Item::Event(e) => println!("{} {} ({})", e.id, e.kind, e.origin),
            Item::Status(s) => eprintln!("{s:?}"),
        }
    }
    Ok(())
}
