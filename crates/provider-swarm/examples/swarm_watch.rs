//! Watch a Swarm's services until the first reconnect, then stop:
//!
//! ```text
//! cargo run -p lookout-swarm --example swarm_watch
//! ```
//!
//! Host: `DOCKER_HOST`, else `/var/run/docker.sock`; it must be a manager's.
//! Stopping is dropping the stream: leaving the loop drops it, which closes
//! the events subscription, an inspection under way and the probe at once.

use lookout_core::{Item, Status};
use lookout_swarm::{SwarmConfig, watch};
use tokio_stream::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lookout_swarm::ConfigError> {
    let mut stream = watch(SwarmConfig::default())?;
    let mut connected = 0;
    while let Some(item) = stream.next().await {
        match item {
            Item::Event(e) => println!("service {} {} ({})", e.id, e.kind, e.origin),
            Item::Status(Status::Connected { instances }) => {
                connected += 1;
                eprintln!("connected: {instances} services");
                if connected > 1 {
                    eprintln!("reconnected once: stopping");
                    break;
                }
            }
            Item::Status(Status::Disconnected {
                error, retry_in, ..
            }) => {
                eprintln!("disconnected ({error}); retrying in {retry_in:?}");
            }
            // Only a hub's subscription lags (and a status may be added).
            Item::Status(_) => {}
        }
    }
    Ok(())
}
