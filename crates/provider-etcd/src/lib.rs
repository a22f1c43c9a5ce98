//! The etcd provider of lookout: instance state that publishers wrote under
//! an etcd prefix ([`model`]), read back as one resilient, leak-free stream
//! of instance events.
//!
//! ```no_run
//! use lookout_etcd::EtcdConfig;
//! use tokio_stream::StreamExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lookout_etcd::ConfigError> {
//! let config = EtcdConfig::new("http://127.0.0.1:2379,http://127.0.0.1:22379")?;
//! // Synchronous: nothing is contacted until the stream is polled. A cluster
//! // that cannot be reached is a `Disconnected` status, retried forever.
//! let mut events = lookout_etcd::watch(config)?.events();
//! while let Some(e) = events.next().await {
//!     println!("{} {} ({})", e.id, e.kind, e.origin);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! With each source's publisher, [`watch_with_publishers`]:
//!
//! ```no_run
//! use lookout_core::Item;
//! use lookout_etcd::{EtcdConfig, EtcdItem};
//! use tokio_stream::StreamExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lookout_etcd::ConfigError> {
//! let mut items = lookout_etcd::watch_with_publishers(EtcdConfig::new("127.0.0.1:2379")?)?;
//! while let Some(item) = items.next().await {
//!     match item {
//!         EtcdItem::Item(Item::Event(e)) => println!("{} {} ({})", e.id, e.kind, e.origin),
//!         EtcdItem::Item(Item::Status(s)) => println!("etcd: {s:?}"),
//!         // `disconnected`: its publisher is gone; its instances stay as they were.
//!         EtcdItem::Publisher(p) => println!("{}: {}", p.source, p.state),
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Mapping
//!
//! | etcd | lookout |
//! |---|---|
//! | a key `PREFIX/i/SOURCE/INSTANCE` (see [`model`]) | an instance, id `SOURCE/INSTANCE` (the command line prints `SOURCE` as the event's `host`) |
//! | its [`Record`](model::Record)'s `state`: `running` / `stopped` | a change `Started` / `Stopped` (the core adds `Created` for an unknown instance and swallows what changes nothing) |
//! | `state: removed` (a tombstone), or the key deleted | `Removed` |
//! | `uid`, `labels` | [`Listed::uid`](lookout_core::Listed::uid) (a new uid under the same id is `Removed` then `Created`), the labels |
//! | `ready` | with [`EtcdConfig::readiness`], [`Readiness::Told`](lookout_core::Readiness::Told) (`Ready`/`Unready` while running) |
//! | why ([`RecordReason`](model::RecordReason): `outcome`, `exit_code`, `signal`, `oom`, `restarting`, `failed`, `message`) | the [`Reason`](lookout_core::Reason) of a `stopped` record's `Stopped` (or, listed, of its instance); of a running record, with [`EtcdConfig::readiness`], its failure (`Failing` when the message is new; none: it does not fail) |
//! | `state: running` with `event.kind: stopping` | `Stopping` with the record's reason (after a `Started` when the instance was not known to run; a snapshot, which cannot say a stop under way, is followed by each one's `Stopping`, at the record's time) |
//! | `event.at` | the event's time (live events; local time when it is no RFC 3339) |
//! | `event.origin: resync` | reported with [`Origin::Resync`](lookout_core::Origin::Resync): a run of such records is told as a snapshot of every instance, which the core diffs (its `at` is then the local time) |
//! | a key `PREFIX/s/SOURCE` there, or not (deleted: its lease expired) | with [`watch_with_publishers`], that source's [`PublisherStatus`]: [`Connected`](PublisherState::Connected), or [`Disconnected`](PublisherState::Disconnected) with its instances kept as they were |
//! | the prefix read at revision R | the first snapshot (and each source's publisher status); the watch starts at R + 1 |
//! | the etcd revision of the newest event or progress notification seen | the cursor a redial resumes from |
//!
//! # Guarantees
//!
//! Everything [`lookout_core::Watch`] guarantees (see its
//! [`# Guarantees`](lookout_core::Watch#guarantees)), and:
//!
//! - **A redial resumes; it does not relist.** The watch is opened again
//!   from the revision after the cursor, on the first member that answers
//!   (the last one that did, then the next of [`EtcdConfig::get_endpoints`]):
//!   what changed meanwhile comes as etcd replays it, in order, exactly once,
//!   [`Origin::Live`](lookout_core::Origin::Live), before `Connected`: the
//!   session says [`Observation::Resumed`](lookout_core::Observation::Resumed)
//!   once the watch has told what the prefix showed just before it was
//!   opened (its newest put, and as many keys: the deletions too), or at a
//!   progress notification.
//! - **Compaction relists.** When etcd compacted the resume revision away
//!   (the watch is canceled with `compact_revision`), the prefix is listed
//!   again at one revision, inside the session, and the core's diff reports
//!   what changed meanwhile, once, as `resync`.
//! - **A member that fails is left**: a connection refused, a request
//!   unanswered within [`EtcdConfig::request_timeout`] or a 5xx answer moves
//!   to the next endpoint; a lost watch connection ends the session, and the
//!   redial fails over the same way.
//! - **A silent watch is noticed**: after the core's
//!   [`probe_after`](lookout_core::WatchConfig::probe_after) of silence, the
//!   probe asks, on connections of its own, the `GET /health` of the
//!   member the watch is on (a frozen member does not answer; one without
//!   a leader says so), then
//!   one range read of the watched range: its newest put and how many keys
//!   it holds, at the store's revision. A watch that has not told them
//!   within half of
//!   [`probe_timeout`](lookout_core::WatchConfig::probe_timeout) (the put,
//!   and as many keys — the session counts the list's keys, then each
//!   creation and deletion the watch tells — or a progress notification
//!   at that revision) is behind, taken for dead (a connection that died
//!   without a sign), and the session is replaced: a deletion it did not
//!   tell (a tombstone's lease expiring) is noticed as a put is. (A key
//!   created and deleted again, both untold, leaves the count as it was:
//!   noticed at the next change.) The watch also asks for etcd's progress
//!   notifications: one whose revision moved past what the watch had told
//!   moves the cursor and is a sign of life; one that did not is none (a
//!   member cut off from its cluster's leader goes on notifying at its
//!   stale revision while the majority moves on), so an idle prefix on an
//!   idle store is probed every `probe_after`, and a cut-off member is
//!   left at its first probe, whatever the members' notification interval
//!   (its `/health` says it has no leader; its range reads, linearizable,
//!   need one). (etcd's gateway cannot take a progress request on an open
//!   watch: over HTTP/1.1 Go's server holds the answer until the request's
//!   body ends.)
//! - **Publishers**: the watch covers the whole prefix, the publishers'
//!   status keys with the instances (so they resume, relist and are probed
//!   alike); with [`watch_with_publishers`], each source's
//!   [`PublisherStatus`] comes in revision order among the instance events
//!   (see [`WithPublishers`]); with [`watch_and_publishers`], the watch
//!   (to share) and a [`Publishers`] handle on the same statuses. A source
//!   is known once its status key is read, or once a list finds its
//!   records (then, without a key, it is disconnected). A source filter skips the other sources'
//!   keys as they come (the range is the prefix).
//! - **No periodic relist** ([`EtcdConfig::default_watch`]): the watch is
//!   exact, and says when it cannot resume.
//! - **An unreadable record does not end the session**: it is logged and
//!   skipped (its revision still moves the cursor).
//! - **Memory is O(instances)**: every instance under the watched range is
//!   kept (id, uid, labels, state), across sessions, so that a publisher's
//!   resync can be told as a snapshot; and each source's publisher status.
//!   A list reads 10 000 keys per page (etcd counts the rest of the range
//!   for each page: fewer pages, less of its time), some 7 MiB of JSON held
//!   while a page is decoded.
//! - **Authentication**: with [`EtcdConfig::credentials`], every request
//!   carries the token etcd gave for them (the watch's too); a token etcd
//!   refuses as invalid (expired) is renewed once and the request sent
//!   again. Without credentials, an etcd with auth enabled refuses the
//!   dial: a `Disconnected` whose error is [`EtcdError::AuthRequired`]
//!   (retried as any other, in case auth is disabled again).
//! - **TLS**: `https://` endpoints are verified against the CA of
//!   [`EtcdConfig::tls`] ([`Tls::from_files`]: a CA file, and a client
//!   certificate and key for etcd's `--client-cert-auth`). A member whose
//!   certificate the CA does not verify is a dial error ([`EtcdError::Tls`],
//!   naming rustls's reason), as is an `https://` endpoint without a CA
//!   ([`EtcdError::NoCa`]): a `Disconnected`, retried as any other.
//! - **Dropping the stream closes every connection**: each request is one
//!   HTTP/1.1 connection driven by the stream itself (`lookout-transport`).
//!   This crate spawns nothing and needs no `protoc` (see ARCHITECTURE.md
//!   for why not `etcd-client`).
//!
//! [`Client`] is the JSON-gateway client itself (range, put, delete, txn,
//! compaction, lease grant and keepalive, health): what the publisher
//! (`lookout --publish etcd://…`) shares. Its answers are [`RangeResponse`]
//! (of [`KeyValue`]s), [`Header`], [`LeaseGrant`] and [`Newest`];
//! [`Client::txn`] speaks the gateway's JSON, with [`b64`], [`unb64`] and
//! [`prefix_range_end`] to write and read it.
//!
//! # Features
//!
//! This crate has no Cargo features: everything above is always built
//! (TLS with rustls and *ring*, through `lookout-transport`).
//!
//! # Public dependencies
//!
//! Types or traits of these crates appear in this crate's API, so their
//! semver-incompatible releases are breaking changes of this crate too:
//!
//! - [`lookout-core`](lookout_core) 0.1: the contract ([`Watch`],
//!   [`WatchConfig`], the items, [`Labels`] in
//!   [`model::Record`]).
//! - `tokio-stream` 0.1: [`WithPublishers`] and [`PublisherChanges`] are
//!   its `Stream`s (as lookout-core's watch is).
//! - `serde` 1: [`model::Record`] and its parts are `Serialize` and
//!   `Deserialize` (the format publishers write).
//! - `serde_json` 1: [`Client::txn`] takes and answers the gateway's JSON
//!   (`serde_json::Value`); [`EtcdError::Decode`] and
//!   [`model::Record::from_json`] give its `Error`.
//!
//! The HTTP and TLS crates underneath (`lookout-transport`, hyper, http,
//! rustls) are not: their errors come boxed (`EtcdError::Http`'s,
//! `EtcdError::Tls`'s, `ConfigError::Tls`'s `source`), and [`Tls`] is
//! made from PEM files.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod config;
mod error;
mod mapping;
pub mod model;
mod publishers;
mod seen;
mod session;
mod settings;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lookout_core::{Dial, DialFuture, ProbeFuture};
use tracing::Instrument as _;

// What a user of this crate alone names (lookout-core is a public
// dependency: these are its types, re-exported).
pub use client::{
    Client, Credentials, EtcdEndpoint, Header, KeyValue, LeaseGrant, Newest, RangeResponse, Tls,
    b64, prefix_range_end, unb64,
};
pub use config::EtcdConfig;
pub use error::{ConfigError, EtcdError};
pub use lookout_core::{self, EventKind, InstanceEvent, Item, Labels, Status, Watch, WatchConfig};
pub use publishers::{
    EtcdItem, PublisherChanges, PublisherState, PublisherStatus, Publishers, WithPublishers,
};

/// The [`Dial`] of an etcd prefix: see the [crate docs](crate).
#[derive(Debug)]
pub struct EtcdDial {
    client: Client,
    settings: Arc<settings::Settings>,
    state: Arc<session::DialState>,
}

impl EtcdDial {
    /// Checks `config` (prefix, sources, endpoints); contacts nothing.
    pub fn new(config: &EtcdConfig) -> Result<Self, ConfigError> {
        let prefix = model::check_prefix(config.get_prefix())?.to_owned();
        for s in config.get_sources() {
            model::check_source(s)?;
        }
        let mut sources = config.get_sources().to_vec();
        sources.sort_unstable();
        sources.dedup();
        Ok(Self {
            client: Client::new(
                config.get_endpoints().to_vec(),
                config.get_request_timeout(),
            )?
            .with_credentials(config.get_credentials().cloned())
            .with_tls(config.get_tls().cloned()),
            settings: Arc::new(settings::Settings {
                prefix,
                sources,
                readiness: config.get_readiness(),
                catch_up: config.get_watch_config().get_probe_timeout() / 2,
                create_timeout: config.get_request_timeout(),
            }),
            state: Arc::default(),
        })
    }
}

impl Dial for EtcdDial {
    type Cursor = i64;

    fn dial(&mut self, resume: Option<&i64>) -> DialFuture<i64> {
        let client = self.client.clone();
        let settings = Arc::clone(&self.settings);
        let state = Arc::clone(&self.state);
        let resume = resume.copied();
        let span = tracing::debug_span!("dial", provider = "etcd", ?resume);
        Box::pin(
            async move {
                session::open(client, settings, state, resume)
                    .await
                    .map_err(Into::into)
            }
            .instrument(span),
        )
    }

    /// `GET /health` of the member the watch is on, then the newest put
    /// under the watched range and how many keys it holds: a watch that
    /// has not told them within half the probe timeout is behind, taken
    /// for dead.
    fn probe(&mut self) -> Option<ProbeFuture> {
        let client = self.client.clone();
        let settings = Arc::clone(&self.settings);
        let state = Arc::clone(&self.state);
        let member = state.watching.load(Ordering::Relaxed);
        let endpoint = &client.endpoints()[member % client.endpoints().len()];
        let span = tracing::debug_span!("conn", provider = "etcd", %endpoint, request = "probe");
        Some(Box::pin(
            async move {
                client.health_of(member).await?;
                let (key, end) = settings.range();
                let store = client.newest_modification(&key, &end).await?;
                if tokio::time::timeout(settings.catch_up, state.seen.caught_up(store))
                    .await
                    .is_err()
                {
                    let (seen, keys) = state.seen.told();
                    return Err(EtcdError::Behind {
                        newest: store.put,
                        keys: store.keys,
                        at: store.revision,
                        seen,
                        told_keys: keys,
                        waited: settings.catch_up,
                    }
                    .into());
                }
                Ok(())
            }
            .instrument(span),
        ))
    }
}

/// The watch of `config`'s prefix: synchronous, contacts nothing until polled.
pub fn watch(config: EtcdConfig) -> Result<Watch<EtcdDial>, ConfigError> {
    let dial = EtcdDial::new(&config)?;
    Ok(Watch::new(dial, config.into_watch_config()))
}

/// The watch of `config`'s prefix with its publishers' statuses, in one
/// stream ([`WithPublishers`]): synchronous, contacts nothing until polled.
pub fn watch_with_publishers(config: EtcdConfig) -> Result<WithPublishers, ConfigError> {
    let dial = EtcdDial::new(&config)?;
    let board = Arc::clone(&dial.state.board);
    Ok(WithPublishers::new(
        Watch::new(dial, config.into_watch_config()),
        board,
    ))
}

/// The watch of `config`'s prefix and a handle on its publishers' statuses
/// ([`Publishers`]), read as the watch is polled: for a program that shares
/// the watch ([`Watch::share`]) and serves the statuses beside it.
/// Synchronous, contacts nothing until polled.
pub fn watch_and_publishers(
    config: EtcdConfig,
) -> Result<(Watch<EtcdDial>, Publishers), ConfigError> {
    let dial = EtcdDial::new(&config)?;
    let publishers = Publishers::new(Arc::clone(&dial.state.board));
    Ok((Watch::new(dial, config.into_watch_config()), publishers))
}
