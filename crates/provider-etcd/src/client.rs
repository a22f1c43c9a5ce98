//! lookout's own etcd v3 client over the JSON gateway, [`Client`]: what the
//! watch's sessions and its probe use, and what the publisher
//! (`lookout --publish etcd://…`) shares. Nothing in it knows lookout's
//! keys: the provider beside it does (`model`, `mapping`, `session`).
//!
//! [`connection`]: the client itself, one request to a member on a
//! connection of its own, failover and the token; [`kv`], [`lease`] and
//! [`watch`]: its calls (the watch's NDJSON lines split by
//! `lookout_core::LineSplitter`); [`wire`]: the gateway's JSON; [`auth`], [`endpoint`], [`tls`]: what it is made with
//! (credentials, members, a CA).

pub(crate) mod auth;
pub(crate) mod connection;
pub(crate) mod endpoint;
pub(crate) mod kv;
mod lease;
pub(crate) mod tls;
pub(crate) mod watch;
pub(crate) mod wire;

pub use auth::Credentials;
pub use connection::Client;
pub use endpoint::EtcdEndpoint;
pub use kv::Newest;
pub use tls::Tls;
pub use wire::{Header, KeyValue, LeaseGrant, RangeResponse, b64, prefix_range_end, unb64};
