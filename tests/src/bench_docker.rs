//! What the benches against the real dockerd share (`docker_latency` and
//! `serve`): driving container lifecycles through bollard, cleaning up, and
//! percentiles.
#![allow(
    clippy::missing_panics_doc,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]

use std::collections::HashMap;
use std::time::Duration;

use crate::engines;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};

/// Bound of one engine API call.
pub const CALL: Duration = Duration::from_secs(60);
/// The label of every container of a run.
pub const LABEL: &str = "lookout.bench";

/// Runs one engine API call, bounded by [`CALL`]; panics on an error.
pub async fn call<T, E: std::fmt::Display>(
    what: &str,
    fut: impl Future<Output = Result<T, E>>,
) -> T {
    tokio::time::timeout(CALL, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {CALL:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Create, start, stop (t=0), remove `name`.
pub async fn lifecycle(docker: &Docker, image: &str, tag: &str, name: &str) {
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        cmd: Some(vec!["sleep".to_owned(), "3600".to_owned()]),
        labels: Some(HashMap::from([
            (LABEL.to_owned(), tag.to_owned()),
            ("lookout.cleanup".to_owned(), tag.to_owned()),
        ])),
        host_config: Some(HostConfig {
            network_mode: Some("none".to_owned()),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let create = CreateContainerOptionsBuilder::new().name(name).build();
    call(
        &format!("create {name}"),
        docker.create_container(Some(create), body),
    )
    .await;
    call(&format!("start {name}"), docker.start_container(name, None)).await;
    let stop = StopContainerOptionsBuilder::new().t(0).build();
    call(
        &format!("stop {name}"),
        docker.stop_container(name, Some(stop)),
    )
    .await;
    let rm = RemoveContainerOptionsBuilder::new().build();
    call(
        &format!("rm {name}"),
        docker.remove_container(name, Some(rm)),
    )
    .await;
}

/// Removes every container of the run on drop (`docker rm -f`).
#[derive(Debug)]
pub struct Cleanup(pub String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label=lookout.cleanup={}", self.0);
        if let Ok(ids) = engines::docker(&["ps", "-aq", "--filter", &filter]) {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let _ = engines::docker(&[["rm", "-f"].as_slice(), &ids].concat());
            }
        }
    }
}

/// p-th percentile (nearest rank) of sorted `v`.
pub fn pct(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}
