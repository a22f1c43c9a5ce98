//! The Docker API's protocol without I/O (as kube-core is to kube-client):
//! what the requests ask (`requests`), the `/events` body (`framing`,
//! `wire`, `cursor`), what each event means (`feed`, `event`, `objects`,
//! `labels`, `mapping`, `containers`), what an inspection answered
//! (`inspection`) and the history rules (`history`). Nothing here opens a
//! socket, sleeps or spawns: the files that do I/O (`lib.rs`'s session,
//! `history.rs`, `inspect.rs`, `readiness.rs`) import these, never the
//! reverse, and every rule is unit-tested on bytes.

pub(crate) mod containers;
pub(crate) mod cursor;
pub(crate) mod event;
pub(crate) mod feed;
pub(crate) mod framing;
pub(crate) mod history;
pub(crate) mod inspection;
pub(crate) mod labels;
pub(crate) mod mapping;
pub(crate) mod objects;
pub(crate) mod requests;
pub(crate) mod wire;
