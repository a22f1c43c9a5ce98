//! Watch Podman's containers, starting with what exists now:
//!
//! ```text
//! cargo run -p lookout-podman --example podman_watch
//! ```
//!
//! Host: `CONTAINER_HOST`, else the rootless socket under `XDG_RUNTIME_DIR`,
//! else `/run/podman/podman.sock` (`podman system service` must run). With
//! `initial`, the first snapshot comes as `initial` events; the connection
//! statuses are printed too, so a service that is down shows as
//! `Disconnected` (retried forever), not as an error.

use lookout_core::{Item, WatchConfig};
use lookout_podman::{PodmanConfig, watch};
use tokio_stream::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lookout_podman::ConfigError> {
    let config = PodmanConfig::default().watch_config(WatchConfig::default().initial(true));
    let mut stream = watch(config)?;
    while let Some(item) = stream.next().await {
        match item {
            Item::Event(e) => println!("{} {} ({}) at {:?}", e.id, e.kind, e.origin, e.at),
            Item::Status(status) => eprintln!("status: {status:?}"),
        }
    }
    Ok(())
}
