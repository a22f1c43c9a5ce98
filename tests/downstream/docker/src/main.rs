//! A downstream consumer of `lookout-docker` alone: watches dockerd (found as
//! the docker CLI finds it: `DOCKER_HOST`, contexts) and prints `connected`
//! once the stream says so, then `event KIND ID` for the container named on
//! its command line, until that container is removed (exit 0) or 120 s pass
//! (exit 1). Driven by `cargo xtask release`.

use std::process::ExitCode;
use std::time::Duration;

use lookout_docker::{DockerConfig, EventKind, Item, Status, watch};
use tokio_stream::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: downstream-docker CONTAINER");
        return ExitCode::from(2);
    };
    let mut items = match watch(DockerConfig::default()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("downstream-docker: {e}");
            return ExitCode::from(2);
        }
    };
    let mut connected = false;
    let run = async {
        while let Some(item) = items.next().await {
            match item {
                Item::Status(Status::Connected { .. }) if !connected => {
                    connected = true;
                    println!("connected");
                }
                Item::Event(e) if e.id.as_str() == name => {
                    println!("event {} {}", e.kind, e.id);
                    if e.kind == EventKind::Removed {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    };
    match tokio::time::timeout(Duration::from_secs(120), run).await {
        Ok(true) => ExitCode::SUCCESS,
        _ => {
            eprintln!("downstream-docker: {name} was not removed within 120 s");
            ExitCode::FAILURE
        }
    }
}
