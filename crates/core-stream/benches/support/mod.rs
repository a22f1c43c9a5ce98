//! What the core benches share.

#![allow(dead_code, clippy::cast_possible_truncation)]

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use lookout_core::{
    BoxError, Change, Dial, DialFuture, EventKind, Health, InstanceId, Listed, Observation,
    Readiness,
};
use tokio_stream::StreamExt;

/// A stream over an iterator that is always ready, like
/// `futures::stream::iter` (`tokio_stream::iter` yields to the runtime every 32
/// items, which would measure the scheduler instead of the combinator).
pub struct Ready<I>(pub I);

impl<I: Iterator + Unpin> tokio_stream::Stream for Ready<I> {
    type Item = I::Item;
    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<I::Item>> {
        Poll::Ready(self.0.next())
    }
}

/// A snapshot of `instances` stopped instances, and `changes` live changes
/// among them, each a real transition (every instance starts, then stops…).
pub type Obs = Result<Observation<u64>, BoxError>;

pub fn items(instances: usize, changes: usize) -> (Vec<Obs>, Vec<Obs>) {
    items_of(instances, changes, false)
}

/// The same with readiness watched: each instance goes round `started`
/// (health `starting`), `ready` (`healthy`), `unready` (`unhealthy`),
/// `stopped`, every change a real transition (one event each), as a
/// Docker container with a healthcheck would.
pub fn items_with_readiness(instances: usize, changes: usize) -> (Vec<Obs>, Vec<Obs>) {
    items_of(instances, changes, true)
}

fn items_of(instances: usize, changes: usize, readiness: bool) -> (Vec<Obs>, Vec<Obs>) {
    let ids: Vec<InstanceId> = (0..instances).map(|i| format!("inst-{i}").into()).collect();
    let mut snapshot = vec![Ok(Observation::ResyncBegin)];
    snapshot.extend(ids.iter().map(|id| {
        Ok(Observation::Listed(
            Listed::new(id.clone(), false).labels(lookout_core::Labels::default()),
        ))
    }));
    snapshot.push(Ok(Observation::ResyncDone));
    let at = SystemTime::now();
    let live = (0..changes)
        .map(|n| {
            let round = n / instances;
            let (kind, readiness) = if readiness {
                let (kind, health) = match round % 4 {
                    0 => (EventKind::Started, Health::Starting),
                    1 => (EventKind::Ready, Health::Healthy),
                    2 => (EventKind::Unready, Health::Unhealthy),
                    _ => (EventKind::Stopped, Health::Unhealthy),
                };
                (kind, Some(Readiness::container(health, false)))
            } else if round.is_multiple_of(2) {
                (EventKind::Started, None)
            } else {
                (EventKind::Stopped, None)
            };
            Ok(Observation::Change(
                Change::new(ids[n % instances].clone(), kind, at)
                    .cursor(Some(n as u64))
                    .readiness(readiness),
            ))
        })
        .collect();
    (snapshot, live)
}

/// Hands out one pre-built session, then nothing.
pub struct Synthetic(pub Option<Vec<Obs>>);

impl Dial for Synthetic {
    type Cursor = u64;
    fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
        let items = self.0.take();
        Box::pin(async move {
            match items {
                Some(items) => Ok(
                    Box::pin(Ready(items.into_iter()).chain(tokio_stream::pending()))
                        as lookout_core::Session<u64>,
                ),
                None => std::future::pending().await,
            }
        })
    }
}

/// A watch that lists nothing and then says nothing (a quiet source of a
/// merge).
pub fn quiet() -> lookout_core::Watch<Synthetic> {
    lookout_core::Watch::new(
        Synthetic(Some(vec![
            Ok(Observation::ResyncBegin),
            Ok(Observation::ResyncDone),
        ])),
        lookout_core::WatchConfig::default(),
    )
}
