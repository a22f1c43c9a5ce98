//! Where the engine is and how to reach it: a host string
//! ([`Host`](crate::Host), `host`; `ssh://` in `ssh`), a table's
//! [`Discovery`](crate::Discovery), the [`Endpoint`](crate::Endpoint) a
//! watch resolves once as the engine's CLI does (`endpoint`), from Docker's
//! contexts (`contexts`) or Podman's connections (`connections`), and the
//! TLS it speaks (`tls`). Nothing here sends a request: `http.rs` connects
//! to what these say. The public items are re-exported at the crate's root.

pub(crate) mod connections;
pub(crate) mod contexts;
pub(crate) mod discovery;
pub(crate) mod endpoint;
pub(crate) mod host;
pub(crate) mod ssh;
#[cfg(feature = "tls")]
pub(crate) mod tls;
