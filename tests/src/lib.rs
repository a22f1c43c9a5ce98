//! Shared helpers of the end-to-end tests: engine control (the same code
//! `cargo xtask engines` runs) and test utilities.

pub use lookout_engines as engines;
pub mod bench_docker;
pub mod bench_etcd;
pub mod browser;
pub mod k8s_access;
pub mod k8s_cost;
pub mod k8s_kinds;
pub mod k8s_util;
pub mod relay;
