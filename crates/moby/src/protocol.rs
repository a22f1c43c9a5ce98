//! The `/events` decoder without I/O: what every session of a
//! [`CompatDial`](crate::CompatDial) runs on the bytes it reads, for a
//! program that reads the body itself (and for lookout's fuzz harnesses,
//! which feed it arbitrary bytes).
//!
//! A [`Feed`] takes the body in chunks of any size and yields a
//! [`FeedOutput`] per line: an observation, or a request to inspect the
//! event's object first, whose answer ([`Inspection`]) goes back through
//! [`Feed::inspected`] (again after [`reinspect_after`], at most
//! [`MAX_INSPECTIONS`] reads per event). A line longer than [`MAX_LINE`]
//! is skipped. Nothing here opens a socket, sleeps or spawns.
//!
//! Inside the crate this module is the Docker API's protocol as a whole
//! (as kube-core is to kube-client): what the requests ask (`requests`), the
//! `/events` body (`framing`, `line_scan`, `wire`, `attributes_scan`, `cursor`), what each event means
//! (`feed`, `event`, `objects`, `labels`, `mapping`, `containers`), what an
//! inspection answered (`inspection`) and the history rules (`history`).
//! The files that do I/O (`session.rs`, `history_fetch.rs`, `inspect.rs`,
//! `readiness.rs`) import these, never the reverse, and every rule is
//! unit-tested on bytes. Only the items above are public here; the tables'
//! types ([`Objects`](crate::Objects), [`Event`](crate::Event),
//! [`Cursor`](crate::Cursor), …) are at the crate's root.
//!
//! Beside the feed, [`addresses`] reads where each object of a list can be
//! reached (networks, ports), for [`CompatDial::addresses`](crate::CompatDial::addresses).

pub mod addresses;
pub(crate) mod attributes_scan;
pub(crate) mod containers;
pub(crate) mod cursor;
pub(crate) mod event;
pub(crate) mod feed;
pub(crate) mod framing;
pub(crate) mod history;
pub(crate) mod inspection;
pub(crate) mod labels;
pub(crate) mod line_scan;
pub(crate) mod list_parts;
pub(crate) mod mapping;
pub(crate) mod objects;
pub(crate) mod replays;
pub(crate) mod requests;
pub(crate) mod wire;

pub use feed::{Feed, FeedOutput, MAX_INSPECTIONS, reinspect_after};
pub use framing::MAX_LINE;
pub use inspection::Inspection;
#[doc(hidden)]
pub use line_scan::fast_path_agrees;
