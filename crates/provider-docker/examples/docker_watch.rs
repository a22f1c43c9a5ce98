//! Watch dockerd's containers that carry the given labels:
//!
//! ```text
//! cargo run -p lookout-docker --example docker_watch -- app=web tier=front
//! ```
//!
//! Host: `DOCKER_HOST`, else `/var/run/docker.sock`. Connection statuses go
//! to `tracing` (not set up here): only the instance events are printed.
//! Ctrl-C ends the process; in a program, dropping the stream is what stops
//! it, and it closes the connection at once.

use lookout_docker::{DockerConfig, watch};
use tokio_stream::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = DockerConfig::default();
    for arg in std::env::args().skip(1) {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(format!("a label filter is KEY=VALUE, not {arg:?}").into());
        };
        config = config.label(key, value);
    }
    let mut events = watch(config)?.events();
    while let Some(e) = events.next().await {
        println!("{} {} ({}) {:?}", e.id, e.kind, e.origin, e.labels);
    }
    Ok(())
}
