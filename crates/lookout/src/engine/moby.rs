//! Docker, Podman and Swarm (`lookout_moby`): the sources of `--host`,
//! `--context` and `--connection`, each at the endpoint its CLI would use
//! (resolved once, here).

use std::sync::Arc;

use lookout_core::{Labels, WatchConfig};
use lookout_moby::{CompatDial, Objects};

use crate::cli::{Common, EngineArgs, Named};
use crate::exit::Exit;
use crate::output::Warnings;
use crate::sources::{Location, NamedWatch, Sources};

/// The watches `a` names: one engine (as its CLI finds it, or named once),
/// or several; with `--render`, beside each, a dial of its own to list
/// where its objects are (`addressing`, in the same order).
pub fn sources<O: Objects>(
    objects: &'static O,
    a: &EngineArgs,
    addressing: &mut Vec<Arc<dyn crate::render::Addressing>>,
) -> Result<Sources<CompatDial<O>>, Exit> {
    let named = a.sources().map_err(Exit::Usage)?;
    if named.len() > 1 {
        if a.publish.publish.is_some() {
            return Err(Exit::Usage(
                "--publish takes one engine (a source each: one run each)".to_owned(),
            ));
        }
        return several(objects, a, &named, addressing);
    }
    let endpoint =
        resolve(objects, named.first()).map_err(|e| Exit::usage("cannot find the engine", &e))?;
    warn_unverified(None, &endpoint, Warnings::new(a.common.json));
    let at = location(&endpoint);
    if !a.common.renders.is_empty() {
        addressing.push(lister(objects, a, endpoint.clone())?);
    }
    let watch = lookout_moby::watch_at(objects, endpoint, compat_config(a))
        .map_err(|e| Exit::usage("invalid configuration", &e))?;
    Ok(Sources::One {
        watch,
        at: Some(at),
    })
}

/// Several engines in one stream: a watch each.
fn several<O: Objects>(
    objects: &'static O,
    a: &EngineArgs,
    named: &[Named],
    addressing: &mut Vec<Arc<dyn crate::render::Addressing>>,
) -> Result<Sources<CompatDial<O>>, Exit> {
    let mut watches = Vec::with_capacity(named.len());
    for source in named {
        let name = source.name();
        let endpoint = resolve(objects, Some(source))
            .map_err(|e| Exit::usage(&format!("cannot find the engine `{name}`"), &e))?;
        warn_unverified(Some(name), &endpoint, Warnings::new(a.common.json));
        let at = location(&endpoint);
        if !a.common.renders.is_empty() {
            addressing.push(lister(objects, a, endpoint.clone())?);
        }
        let watch = lookout_moby::watch_at(objects, endpoint, compat_config(a))
            .map_err(|e| Exit::usage(&format!("invalid configuration of `{name}`"), &e))?;
        watches.push(NamedWatch {
            name: name.to_owned(),
            watch,
            at: Some(at),
        });
    }
    Ok(Sources::Several(watches))
}

/// `--render`'s lister of the objects at `endpoint` (the watch's labels):
/// a dial that is never dialled, only asked for its list.
fn lister<O: Objects>(
    objects: &'static O,
    a: &EngineArgs,
    endpoint: lookout_moby::Endpoint,
) -> Result<Arc<dyn crate::render::Addressing>, Exit> {
    let labels: Labels = a.labels.iter().cloned().collect();
    let dial = CompatDial::with_endpoint(objects, endpoint, labels)
        .map_err(|e| Exit::usage("invalid configuration", &e))?;
    Ok(Arc::new(dial))
}

/// Where `endpoint` is and where that came from.
fn location(endpoint: &lookout_moby::Endpoint) -> Location {
    Location {
        host: endpoint.host.to_string(),
        from: endpoint.source.to_string(),
    }
}

/// The endpoint of one source (none: as the engine's CLI finds it).
fn resolve<O: Objects>(
    objects: &'static O,
    source: Option<&Named>,
) -> Result<lookout_moby::Endpoint, lookout_moby::ConfigError> {
    let (host, context) = match source {
        Some(Named::Host { uri, .. }) => (Some(uri.as_str()), None),
        Some(Named::Context { name }) => (None, Some(name.as_str())),
        None => (None, None),
    };
    lookout_moby::Endpoint::resolve(objects.discovery(), host, context)
}

/// Says through `warnings` (on stderr, whatever `RUST_LOG` says) when the
/// engine's TLS certificate is not verified (as the docker CLI does not
/// verify it).
fn warn_unverified(source: Option<&str>, endpoint: &lookout_moby::Endpoint, warnings: Warnings) {
    let Some(why) = endpoint.unverified() else {
        return;
    };
    let of = source.map(|s| format!(" ({s})")).unwrap_or_default();
    warnings.warn(&format!(
        "the TLS certificate of {}{of} is not verified ({why}): anyone on the path can \
         pose as the engine",
        endpoint.host
    ));
}

/// The settings of an engine speaking the Docker API (Docker, Podman, Swarm).
fn compat_config(a: &EngineArgs) -> lookout_moby::Config {
    let labels: Labels = a.labels.iter().cloned().collect();
    // The host and the context are the endpoint's (see `sources`).
    lookout_moby::Config::default()
        .labels(labels)
        .watch_config(watch_config(
            &a.common,
            a.publish.publish.is_some() || !a.common.renders.is_empty(),
        ))
        .readiness(a.common.readiness)
}

/// The first snapshot is told when asked, and always to a publisher (its
/// baseline's comparison) and a render (its first file): `feed`.
fn watch_config(common: &Common, feed: bool) -> WatchConfig {
    WatchConfig::default().initial(common.initial || feed)
}
