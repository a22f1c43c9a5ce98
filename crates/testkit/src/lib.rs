//! Test support of lookout, in one crate that is never published (the
//! library crates carry no test doubles and no test-only features):
//!
//! - [`fake_engine`]: a fake Docker engine on a unix socket (a fixed script,
//!   or live containers with dockerd's `since`/`until` replay, cuts and
//!   restarts) for the decoder tests, the firehose bench and the soak;
//! - [`fuzz`]: the fuzz harnesses (the `/events` decoder; a Kubernetes watch
//!   against an apiserver in memory) and their stable driver;
//! - [`rng`]: the one seeded generator they all use;
//! - [`tcp_relay`]: a TCP relay to cut a client's connections to a server
//!   (an etcd member), for the etcd cluster tests and the `etcd_fleet` bench.
//!
//! It may spawn (a test server's accept loop); the library crates may not.

// Test support fails the test that uses it by panicking, as assertions do.
#![allow(clippy::missing_panics_doc)]

pub mod fake_engine;
pub mod fuzz;
pub mod rng;
pub mod tcp_relay;
