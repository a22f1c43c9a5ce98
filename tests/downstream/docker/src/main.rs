//! A downstream consumer of `lookout-docker` alone: watches dockerd (found as
//! the docker CLI finds it: `DOCKER_HOST`, contexts) and prints `connected`
//! once the stream says so, then `event KIND ID` for the container named on
//! its command line, until that container is removed (exit 0) or 120 s pass
//! (exit 1). Driven by `cargo xtask release`.

use std::process::ExitCode;

use lookout_docker::{self as lookout, DockerConfig, watch};

#[path = "../../follow.rs"]
mod follow;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: downstream-docker CONTAINER");
        return ExitCode::from(2);
    };
    let items = match watch(DockerConfig::default()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("downstream-docker: {e}");
            return ExitCode::from(2);
        }
    };
    follow::until_removed("downstream-docker", items, &name).await
}
