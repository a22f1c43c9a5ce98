//! The engine families, one module each that only builds its sources
//! ([`moby`]: Docker, Podman, Swarm; [`k8s`]; [`etcd`]), and the run of a
//! subcommand: its sources, then the [`mode`] they run in.

mod etcd;
mod k8s;
mod moby;

use lookout_moby::Objects;

use crate::cli::{Engine, EngineArgs};
use crate::exit::Exit;
use crate::mode::Also;
use crate::output::Warnings;
use crate::{mode, serve};

/// Runs the subcommand `engine` until SIGTERM or Ctrl-C (`Ok`), or until
/// it must end ([`Exit`]).
pub async fn run(engine: Engine, serve: Option<serve::Prepared>) -> Result<(), Exit> {
    match engine {
        Engine::Docker(a) | Engine::Swarm(a) if !a.connections.is_empty() => Err(Exit::Usage(
            "--connection names a podman connection; docker has contexts \
             (--context NAME, DOCKER_CONTEXT)"
                .to_owned(),
        )),
        Engine::Docker(a) => compat("docker", &lookout_docker::MAPPING, &a, serve).await,
        Engine::Podman(a) if !a.contexts.is_empty() => Err(Exit::Usage(
            "--context names a docker context; podman has connections \
             (--connection NAME, CONTAINER_CONNECTION)"
                .to_owned(),
        )),
        Engine::Podman(a) => compat("podman", &lookout_podman::MAPPING, &a, serve).await,
        Engine::Swarm(a) => compat("swarm", &lookout_swarm::SERVICES, &a, serve).await,
        Engine::K8s(a) => {
            let also = Also::new(&a.common)?;
            let sources = k8s::sources(&a).await?;
            mode::run("k8s", sources, &a.common, &a.publish, serve, also).await
        }
        Engine::Etcd(a) => {
            let also = Also::new(&a.common)?;
            let (config, at) = etcd::config(&a)?;
            let warnings = Warnings::new(a.common.json);
            // Nothing under the prefix at all is likely a prefix misspelt:
            // said once, beside the watch (which waits for keys all the
            // same). The binary may spawn; the library crates never do.
            #[allow(clippy::disallowed_methods)]
            let _check = tokio::spawn(etcd::warn_if_empty(config.clone(), warnings));
            mode::etcd(config, at, &a.common, serve, also).await
        }
    }
}

/// An engine speaking the Docker API.
async fn compat<O: Objects>(
    provider: &'static str,
    objects: &'static O,
    a: &EngineArgs,
    serve: Option<serve::Prepared>,
) -> Result<(), Exit> {
    let mut also = Also::new(&a.common)?;
    let sources = moby::sources(objects, a, &mut also.addressing)?;
    mode::run(provider, sources, &a.common, &a.publish, serve, also).await
}
