//! The fuzz harnesses: what `fuzz/` runs under libFuzzer (`cargo xtask
//! fuzz`) and this crate's `fuzz_corpus` tests replay on stable.
//!
//! - [`events`]: the Docker-API `/events` decoder, for Docker's and Podman's
//!   containers and Swarm's services;
//! - [`k8s`]: a whole Kubernetes watch against an apiserver in memory;
//! - [`driver`]: the stable driver (seed replay, random inputs).

pub mod driver;
pub mod events;
pub mod k8s;
