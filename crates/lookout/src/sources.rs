//! What a run watches, its [`Sources`], as an engine family's module built
//! them: one engine, or several named ones (`--host NAME=URI`, `--context
//! NAME`, repeatable and mixable), a watch each, whose items the run tells
//! with their source's name; each with where its engine is ([`Location`])
//! when that is known at start.

use lookout_core::Watch;

/// Where an engine is (its address) and where that came from (`context
/// NAME`, `DOCKER_HOST`, `default`, `--endpoints`…): resolved once, at
/// start, and said with every `connected` status on stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The address (`unix:///var/run/docker.sock`, `ssh://…`, etcd's
    /// `--endpoints`).
    pub host: String,
    /// Where it came from.
    pub from: String,
}

/// The watches of a run.
// One per run, moved once: the size of a watch inline costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Sources<D: lookout_core::Dial> {
    /// One engine: a run without several (nothing says a host).
    One {
        watch: Watch<D>,
        at: Option<Location>,
    },
    /// Several, each named (`NAME/instance`, JSON `host`): one stream on
    /// stdout, a hub each when served.
    Several(Vec<NamedWatch<D>>),
}

/// One of several sources.
pub struct NamedWatch<D: lookout_core::Dial> {
    pub name: String,
    pub watch: Watch<D>,
    pub at: Option<Location>,
}

/// A source of a run as its lines name it: its name, and where its engine
/// is when known at start.
#[derive(Clone, Debug)]
pub struct Label {
    pub name: String,
    pub at: Option<Location>,
}
