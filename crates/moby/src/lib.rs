//! The Docker Engine API layer of lookout, which the Docker, Podman and
//! Swarm providers share (as kube-client builds on kube-core's protocol
//! types, each provider is a table over this crate).
//!
//! An engine is a table: the [`Objects`] it watches (containers as a
//! [`Mapping`] describes them, or Swarm's services), their vocabulary and
//! where the engine listens ([`Discovery`]). The rest is here, once, one
//! concern per module. `protocol/` is the Docker API without I/O (as
//! kube-core is to kube-client): the request paths, the `/events` body
//! (`framing`, `wire`, `cursor`), what each event means (`feed`, `event`,
//! `objects`, `mapping`, `containers`) and the history rules. Beside it, what
//! does I/O and imports it: `location/` (where the engine is and how to
//! reach it: `host`, `ssh`, `discovery`, `endpoint`, `contexts`,
//! `connections`, `tls`), `http` (a request on a socket it owns),
//! `history_fetch` (reading the engine's history), `inspect` and `readiness`
//! (the requests a session makes besides `/events`) and `session` (what a
//! dial opens and streams); `config` and `compat_dial` hold [`Config`] and [`CompatDial`]
//! (and its dial):
//!
//! - **connecting**: each request gets a connection of its own (unix socket,
//!   TCP, TLS with rustls, or one child process of the system `ssh` for
//!   `ssh://`), driven by whoever polls it: no pool, no spawned task, so
//!   dropping the session or the probe closes its socket (kills its ssh) at
//!   once.
//! - **over ssh** ([`SshTarget`]): as the docker CLI's connection helper,
//!   `ssh "-o ConnectTimeout=30" "-o BatchMode=yes" -T [-l user] [-p port] --
//!   host docker [--host unix:///path] system dial-stdio` (Podman: `podman
//!   [--url unix:///path] system dial-stdio`), the user's ssh configuration
//!   and agent applying. Each request is one ssh process and, unless the
//!   user's ssh configuration shares one (`ControlMaster auto`,
//!   `ControlPath`, `ControlPersist`), one SSH handshake: a dial makes four
//!   in a row (`/_ping`, the history, `/events`, the list), each probe one,
//!   each inspection one; the open `/events` stream holds one ssh for as
//!   long as it streams. Give `dial_timeout` the time of four handshakes.
//!   The endpoint ([`Endpoint`]: given, else as the engine's CLI finds it,
//!   Docker's contexts included) is resolved once, when the watch is made:
//!   a redial never lands on another engine.
//! - **versioned paths** ([`ApiVersion`]): a dial first asks `GET /_ping`
//!   (on a connection of its own) and sends every later request of its
//!   session to `/v{X}/…`, `X` the `Api-Version` header of the answer
//!   ([`Config::api_version`], else `DOCKER_API_VERSION`, pins it instead):
//!   the engine's own version, as an unversioned path means, and what the
//!   socket proxies that allow only `/v1.NN/…` let through. Unversioned only
//!   while no version is known (`/_ping`, or an engine that sends none).
//! - **a session** ([`CompatDial`]): first read the engine's history (on a
//!   redial since the last event seen, on a first dial of the last 2 s)
//!   with a request that ends by itself ([`History`]); then subscribe to `/events` with server-side filters
//!   (the objects' `type`, their actions, the caller's labels when the events
//!   carry labels, and `since` the history's end when the history was kept),
//!   then list the objects (`/containers/json?all=1`, `/services`) with the
//!   caller's label filter, corrected by the history's last word on each
//!   (dockerd's list lags its `die` events); then yield the history's
//!   changes (on a redial that it continues), `ResyncBegin`,
//!   the objects, `ResyncDone`, and the events as they come (those that
//!   raced the list included: the core swallows what it already knows).
//! - **the ordering after a reconnect**: what happened while the feed could
//!   not be seen is told either as the exact transitions (the history holds
//!   the last event seen, so it continues the feed: its events come live,
//!   with the engine's times, before the snapshot) or as the snapshot's net
//!   effect (no proof: the history is dropped and the subscription asks for
//!   nothing of the past), never both; after the snapshot only what the
//!   subscription sees comes live: changes from the reconnect's own requests
//!   on.
//! - **decoding** the `/events` body line by line, so that one bad line costs
//!   one event, never the session: an undecodable line (bad JSON, missing
//!   fields, over 1 MiB) is skipped with one `warn` and yields
//!   [`Observation::Progress`](lookout_core::Observation::Progress) (with
//!   its cursor when its time was readable). The session never ends because
//!   of one, so a redial never replays it in a loop. Events of another
//!   `Type` are skipped quietly.
//! - **what an event means** is the objects' [`KnownObjects`]: a transition,
//!   nothing, or "inspect the object first" (`GET` on a connection of its
//!   own; an object gone meanwhile, or an answer that cannot be used, costs
//!   that event only; a connection failure, or no answer within 30 s, ends
//!   the session).
//! - **the cursor** ([`Cursor`]): the newest `timeNano` seen, and until
//!   when everything is told (a session's snapshot tells every event before
//!   its list answered, so it moves that time on); a redial reads the
//!   history `since` the last event seen (1 µs early, see [`Cursor`]) to
//!   prove continuity, replays only what follows the told time, and a
//!   subscription resumed from the history's end drops what the engine
//!   replays of the events told before it.
//! - **the probe**: `GET /_ping` on a connection of its own.
//! - **API 1.52 and later**: `/events` lines without the legacy `status`,
//!   `id` and `from` (`Action` and `Actor.ID` are read, the legacy fields only
//!   as a fallback), and a body of type `application/jsonl` (the body is
//!   read as lines whatever its type).
//!
//! Containers: the instance id is the container name (without the leading
//! `/`), the `uid` the container id, so a container recreated under the same
//! name is reported `Removed` then `Created`. On a subscription, an event of
//! a container that the snapshot did not list and whose `create` the session
//! has not seen is dropped (it is from before the snapshot; the resync
//! reported the container's end), so an event of an earlier incarnation
//! never stands for the current one.
//!
//! # The API
//!
//! - **Watching** an engine (what `lookout-docker`, `lookout-podman` and
//!   `lookout-swarm` are tables over; their `DockerConfig` & co. are
//!   [`Config`]): [`Config`] (private fields, builder methods),
//!   [`watch`] / [`watch_at`], the [`CompatDial`] they drive, where the
//!   engine is ([`Endpoint`], [`Origin`], [`Selected`], [`Host`],
//!   [`SshTarget`], [`ApiVersion`]), the feed's position ([`Cursor`]) and the
//!   errors ([`ConfigError`] when a watch is made, [`CompatError`] for a
//!   dial, a session or a probe).
//! - **A table for another engine speaking the Docker API**: containers as
//!   a [`Mapping`] describes them (with its [`Discovery`], [`History`] and
//!   [`HealthTable`]; `const` builders, so a table is a `static`), or
//!   objects of one's own through [`Objects`] and [`KnownObjects`] (as
//!   `lookout-swarm` does for services): each event is an [`Event`] and
//!   becomes a [`Decision`]; [`Scope`], [`ReadinessFrom`], [`labels_of`]
//!   and [`matches()`] are what such a table needs. [`KnownContainers`] is a
//!   [`Mapping`]'s [`KnownObjects`].
//! - **The `/events` decoder without I/O** ([`protocol`]): for a program
//!   that reads the body itself, and lookout's fuzz harnesses.
//! - **Where the objects are** ([`CompatDial::addresses`], decoded by
//!   [`protocol::addresses`]): a container's networks and ports, a Swarm
//!   service's ports, from one more list on a connection of its own; for a
//!   config renderer (`lookout --render`), never asked by the watch.
//!
//! # Stability
//!
//! What may grow is `#[non_exhaustive]` (match with a wildcard arm, build
//! through the constructors): [`CompatError`] and [`ConfigError`] (and
//! their variants with fields), [`Host`] (and `Host::Tcp`), [`Origin`]
//! (and its variants with fields), [`Selected`], [`Endpoint`],
//! [`SshTarget`], [`History`], [`ReadinessFrom`], [`Decision`],
//! [`protocol::Inspection`] and the addresses' types
//! ([`protocol::addresses::Addresses`], `Network`, `Port`: read, not
//! built, outside this crate). [`Config`], [`Mapping`], [`HealthTable`] and
//! [`Discovery`] have private fields and builder methods; [`Cursor`],
//! [`Event`] and [`CompatDial`] private fields and constructors.
//! [`ApiVersion`] (`MAJOR.MINOR`) and [`protocol::FeedOutput`] are
//! exhaustive by nature (see each).
//! [`Objects`] and [`KnownObjects`] are implemented by tables outside this
//! crate (they are not sealed): a method added to them comes with a
//! default.
//!
//! # Features
//!
//! - **`tls`** (default): `https://` hosts and `tcp://` hosts with
//!   `DOCKER_TLS_VERIFY` or `DOCKER_TLS` (rustls with ring, through
//!   `lookout-transport`'s `tls` feature). Without it such a host is still
//!   accepted, and each dial fails with [`CompatError::Tls`]. It adds no
//!   item to the API.
//!
//! # Public dependencies
//!
//! These crates' types appear in this crate's API, so their major version
//! is part of it:
//!
//! - **`lookout-core`** 0.1: the contract every provider implements and
//!   users consume ([`Watch`](lookout_core::Watch),
//!   [`Dial`](lookout_core::Dial), `WatchConfig`, `Labels`, `Listed`,
//!   `EventKind`, `Readiness`, `Observation`, `BoxError`).
//! - **`serde_json`** 1: the engine's JSON, in the table API only: an
//!   [`Event`]'s attributes ([`Event::new`], [`Event::attributes`]), the
//!   object [`KnownObjects::inspected`] reads, [`labels_of`] and
//!   [`protocol::Inspection::Found`]. A table decodes the engine's objects,
//!   which are JSON; `serde_json` 1 is the field's standard.
//!
//! Everything else is an implementation detail: `lookout-transport`,
//! `hyper`, `http`, `bytes`, rustls (a TLS failure is
//! [`CompatError::Tls`]'s text, an HTTP failure [`CompatError::Http`]'s
//! boxed source), `sha2`, `toml`, `memchr`, `serde`, `async-stream`,
//! `thiserror`. The watch runs on a `tokio` 1 runtime (its sockets,
//! timers and `ssh` children are tokio's) and logs through `tracing`, but
//! no type of theirs is in the API.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod addresses;
mod api;
mod compat_dial;
mod config;
mod error;
mod history_fetch;
mod http;
mod inspect;
mod location;
pub mod protocol;
mod readiness;
mod reasons;
mod session;
#[cfg(test)]
mod testing;

pub use api::ApiVersion;
pub use compat_dial::{CompatDial, watch, watch_at};
pub use config::{Config, READINESS_POLL};
pub use error::CompatError;
pub use location::discovery::Discovery;
pub use location::endpoint::{Endpoint, Origin, Selected};
pub use location::host::{ConfigError, Host, SshTarget};
pub use protocol::containers::KnownContainers;
pub use protocol::cursor::Cursor;
pub use protocol::event::Event;
pub use protocol::labels::{labels_of, matches};
pub use protocol::mapping::{HealthTable, Mapping};
pub use protocol::objects::{Decision, History, KnownObjects, Objects, ReadinessFrom, Scope};
pub use protocol::requests::filtered_path;
