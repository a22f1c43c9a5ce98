//! One kind's feed: resolve the kind (`resolve.rs`), list it (paged, or
//! streamed as a watch with `sendInitialEvents`) when no `resourceVersion`
//! is known, then watch from the newest version, with bookmarks; a watch
//! that ends is resumed from the version it reached, a `410 Gone` relists.
//! A kind that is not served (its CRD deleted, or not yet created) is
//! `Gone`: looked for again every so often, listed when it is back. Errors
//! the apiserver states (and a lost connection) end the feed: the session
//! ends and the core redials. So does a watch line longer than the limit
//! (`events.rs`); a list page longer than its limit is asked again with
//! half as many objects, down to one (`fetch.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::{DynamicObject, ObjectList};
use kube::runtime::watcher;
use lookout_core::InstanceId;
use tokio_stream::{Stream, StreamExt};

use crate::config::InitialList;
use crate::error::DialError;
use crate::events::watch;
use crate::fetch::{Answer, list};
use crate::kind::KindRef;
use crate::object::{Object, Seen, Workload, identify};
use crate::resolve::{Resolution, Rule, Served, resolve};
use crate::settings::Settings;

/// What one kind's feed tells the session.
#[derive(Debug)]
pub(crate) enum FeedEvent {
    /// The kind is served: its instance ids start with this. A list follows
    /// (or, resuming, a watch).
    Resolved(Arc<str>),
    /// The kind is not served (any more): it has no objects. The feed looks
    /// for it again every so often.
    Gone,
    /// A list begins (the first one, or a relist after `410 Gone`).
    ListBegin,
    /// One object of the list.
    Listed(Seen),
    /// The list is complete at this `resourceVersion`.
    ListDone(Arc<str>),
    /// A watch request was accepted (from the version the feed started with
    /// or reached): until the next `ListBegin`, every change is told.
    Watching,
    /// An object was added or modified.
    Applied(Seen, Arc<str>),
    /// An object was deleted.
    Deleted(InstanceId, Option<Arc<str>>, Arc<str>),
    /// The apiserver's bookmark: the feed is at this version.
    Bookmark(Arc<str>),
    /// An event or object that cannot be read was skipped (logged).
    Skipped,
    /// The watch's version was compacted away (`410 Gone`), or an event
    /// came without a version: the kind relists next.
    Expired,
}

pub(crate) type Feed = Pin<Box<dyn Stream<Item = Result<FeedEvent, DialError>> + Send>>;

/// A served kind's watch: its events, `Ok(None)` when the kind turned out
/// not to be served (a `404`), then nothing more.
type KindFeed = Pin<Box<dyn Stream<Item = Result<Option<FeedEvent>, DialError>> + Send>>;

/// How long a watch may stay silent beyond its server-side timeout before
/// it is taken for dead and resumed (kube-runtime's margin).
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// Page size of a list, as kube-runtime's watcher and client-go page.
pub(crate) const PAGE_SIZE: u32 = 500;

/// The annotation of the bookmark that ends a streamed list.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The feed of `kind` on `client`'s cluster, from `from` (a version to
/// watch from) or, when `None`, from a list.
pub(crate) fn feed(
    kind: KindRef,
    client: Client,
    settings: Arc<Settings>,
    from: Option<Arc<str>>,
) -> Feed {
    Box::pin(async_stream::stream! {
        let mut from = from;
        // Whether the kind was not served when last looked for.
        let mut absent = false;
        loop {
            let served = match resolve(&client, &kind, settings.readiness).await {
                Ok(Resolution::Served(served)) => served,
                Ok(Resolution::NotServed { nearest }) => {
                    if !absent {
                        let nearest = if nearest.is_empty() {
                            String::new()
                        } else {
                            format!(" (nearest: {})", nearest.join(", "))
                        };
                        tracing::warn!(
                            "the apiserver serves no kind `{kind}`{nearest}: no instance of it; looking for it again every {}s",
                            settings.rediscover_every.as_secs()
                        );
                        absent = true;
                        from = None;
                        yield Ok(FeedEvent::Gone);
                    }
                    tokio::time::sleep(settings.rediscover_every).await;
                    continue;
                }
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            if absent {
                tracing::warn!("the apiserver serves kind `{kind}` again: listing it");
            }
            yield Ok(FeedEvent::Resolved(Arc::clone(&served.prefix)));
            let mut watch = match served.rule {
                Rule::Builtin(_) => watch_kind::<Workload>(&client, served, &settings, from.take()),
                _ => watch_kind::<DynamicObject>(&client, served, &settings, from.take()),
            };
            loop {
                match watch.next().await {
                    Some(Ok(Some(event))) => yield Ok(event),
                    Some(Err(e)) => {
                        yield Err(e);
                        return;
                    }
                    // Not served any more: look it up again, after a
                    // while (discovery may still list a kind being deleted).
                    Some(Ok(None)) | None => break,
                }
            }
            tracing::warn!(
                "kind `{kind}` is not served any more: its instances are removed; looking for it again every {}s",
                settings.rediscover_every.as_secs()
            );
            absent = true;
            yield Ok(FeedEvent::Gone);
            tokio::time::sleep(settings.rediscover_every).await;
        }
    })
}

/// A `404 Not Found`: the kind is not served (its CRD was deleted).
fn not_served(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 404)
}

/// The watch of the served kind `served`, from `from` (a version to watch
/// from) or, when `None`, from a list.
// One `stream!` body: the list, the watch and the version they share.
#[allow(clippy::too_many_lines)]
fn watch_kind<K: Object>(
    client: &Client,
    served: Served,
    settings: &Settings,
    from: Option<Arc<str>>,
) -> KindFeed {
    let api: Api<K> = match &settings.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &served.resource),
        None => Api::all_with(client.clone(), &served.resource),
    };
    let mut lp = ListParams::default().limit(PAGE_SIZE);
    let mut wp = WatchParams::default().timeout(settings.watch_timeout);
    if let Some(selector) = &settings.label_selector {
        lp = lp.labels(selector);
        wp = wp.labels(selector);
    }
    let idle = Duration::from_secs(u64::from(settings.watch_timeout)) + IDLE_MARGIN;
    let max_line = settings.max_line;
    let url: Arc<str> = api.resource_url().into();
    let client = client.clone();
    let strategy = settings.initial_list;
    let readiness = settings.readiness;
    let what: Arc<str> = if matches!(served.rule, Rule::Builtin(_)) {
        served.resource.plural.as_str().into()
    } else {
        format!("{}.{}", served.resource.plural, served.resource.group).into()
    };
    let fail = {
        let what = Arc::clone(&what);
        move |source| DialError::Watch {
            kind: what.to_string(),
            source,
        }
    };
    let too_long = {
        let what = Arc::clone(&what);
        move || DialError::LineTooLong {
            kind: what.to_string(),
            limit: max_line,
        }
    };
    let max_page = settings.max_page();
    Box::pin(async_stream::stream! {
        let mut version = from;
        loop {
            // A watch stream, and whether it streams the list first.
            let (stream, streaming) = match version.clone() {
                Some(v) => match watch::<K>(&client, &url, &wp, &v, max_line).await {
                    Ok(s) => (s, false),
                    Err(kube::Error::Api(status)) if status.code == 410 => {
                        tracing::debug!(kind = %what, from = %v, "watch expired (410 Gone): relisting");
                        version = None;
                        yield Ok(Some(FeedEvent::Expired));
                        continue;
                    }
                    Err(e) if not_served(&e) => {
                        yield Ok(None);
                        return;
                    }
                    Err(e) => {
                        yield Err(fail(watcher::Error::WatchStartFailed(e)));
                        return;
                    }
                },
                None if strategy == InitialList::Streaming => {
                    yield Ok(Some(FeedEvent::ListBegin));
                    tracing::debug!(kind = %what, "streaming list begins");
                    match watch::<K>(&client, &url, &wp.clone().initial_events(), "", max_line).await {
                        Ok(s) => (s, true),
                        Err(e) if not_served(&e) => {
                            yield Ok(None);
                            return;
                        }
                        Err(e) => {
                            yield Err(fail(watcher::Error::WatchStartFailed(e)));
                            return;
                        }
                    }
                }
                None => {
                    let to = Listing { client: &client, url: &url, max_page };
                    let mut pages = paged_list::<K>(&served, &what, &to, &lp, readiness);
                    while let Some(event) = pages.next().await {
                        let stop = !matches!(event, Ok(Some(_)));
                        if let Ok(Some(FeedEvent::ListDone(v))) = &event {
                            version = Some(Arc::clone(v));
                        }
                        yield event;
                        if stop {
                            return;
                        }
                    }
                    continue;
                }
            };
            if !streaming {
                yield Ok(Some(FeedEvent::Watching));
            }
            let mut stream = stream;
            let mut listing = streaming;
            loop {
                let event = match tokio::time::timeout(idle, stream.next()).await {
                    Ok(Some(event)) => event,
                    // The server ended the watch (its timeout), or it was
                    // silent too long: watch again from where it stands.
                    Ok(None) | Err(_) if !listing => break,
                    // A streamed list that ends before its end bookmark:
                    // list again.
                    Ok(None) | Err(_) => {
                        tracing::debug!(kind = %what, "streamed list ended early: listing again");
                        version = None;
                        break;
                    }
                };
                match step(&served, event, readiness, &mut listing, &mut version) {
                    Next::Go(Some(event)) => {
                        // A streamed list ends on the watch that goes on.
                        let listed = matches!(event, FeedEvent::ListDone(_));
                        yield Ok(Some(event));
                        if listed {
                            yield Ok(Some(FeedEvent::Watching));
                        }
                    }
                    Next::Go(None) => {}
                    Next::Rewatch(event) => {
                        if let Some(event) = event {
                            yield Ok(Some(event));
                        }
                        break;
                    }
                    Next::Gone => {
                        yield Ok(None);
                        return;
                    }
                    Next::Fail(e) => {
                        yield Err(fail(e));
                        return;
                    }
                    Next::TooLong => {
                        yield Err(too_long());
                        return;
                    }
                }
            }
        }
    })
}

/// Where a kind lists: its client, its resource's path, the most bytes a
/// page is read to.
struct Listing<'a> {
    client: &'a Client,
    url: &'a str,
    max_page: usize,
}

/// One paged list of the kind `served` (`what`, for messages): `ListBegin`,
/// `Listed`…, `ListDone`, or an error, or `None` when the kind is not served.
/// A continue token that expired (`410 Gone`) starts it over. A page longer
/// than `to.max_page` is asked again with half as many objects (and the
/// list goes on at that size), down to one: one object longer than that
/// ends the session.
fn paged_list<'a, K: Object>(
    served: &'a Served,
    what: &'a str,
    to: &'a Listing<'a>,
    lp: &'a ListParams,
    readiness: bool,
) -> Pin<Box<dyn Stream<Item = Result<Option<FeedEvent>, DialError>> + Send + 'a>> {
    let fail = move |source| DialError::Watch {
        kind: what.to_owned(),
        source,
    };
    Box::pin(async_stream::stream! {
        yield Ok(Some(FeedEvent::ListBegin));
        tracing::debug!(kind = %what, "list begins");
        let mut page = lp.clone();
        let mut retried = false;
        let listed_at = loop {
            let list: ObjectList<K> = match list(to.client, to.url, &page, to.max_page).await {
                Ok(Answer::Read(list)) => list,
                Ok(Answer::TooLarge) => match page.limit {
                    Some(n) if n > 1 => {
                        page.limit = Some(n / 2);
                        tracing::debug!(kind = %what, limit = to.max_page, objects = n / 2, "list page over its limit: asking again for fewer objects");
                        continue;
                    }
                    _ => {
                        yield Err(DialError::PageTooLarge {
                            kind: what.to_owned(),
                            limit: to.max_page,
                        });
                        return;
                    }
                },
                // No answer: the request died with its connection (most
                // often a pooled one the peer had closed, right after a
                // network failure). A GET is safe to send again: once, at
                // once, on a new connection; a second failure ends the
                // session.
                Err(e @ (kube::Error::Service(_) | kube::Error::HyperError(_))) if !retried => {
                    tracing::debug!(kind = %what, error = %e, "list page got no answer: sending it again once");
                    retried = true;
                    continue;
                }
                Err(kube::Error::Api(status)) if status.code == 410 => {
                    tracing::debug!(kind = %what, "list continuation expired (410 Gone): listing again");
                    page = lp.clone();
                    yield Ok(Some(FeedEvent::ListBegin));
                    continue;
                }
                Err(e) if not_served(&e) => {
                    yield Ok(None);
                    return;
                }
                Err(e) => {
                    yield Err(fail(watcher::Error::InitialListFailed(e)));
                    return;
                }
            };
            retried = false;
            let (items, meta) = (list.items, list.metadata);
            for obj in items {
                match obj.seen(served, readiness) {
                    Some(l) => yield Ok(Some(FeedEvent::Listed(l))),
                    None => yield Ok(Some(FeedEvent::Skipped)),
                }
            }
            match meta.continue_.filter(|c| !c.is_empty()) {
                Some(token) => page.continue_token = Some(token),
                None => break meta.resource_version.filter(|v| !v.is_empty()),
            }
        };
        match listed_at {
            Some(v) => yield Ok(Some(FeedEvent::ListDone(Arc::from(v)))),
            None => yield Err(fail(watcher::Error::NoResourceVersion)),
        }
    })
}

/// What the feed does after one watch event.
enum Next {
    /// Tell this (if anything) and read on.
    Go(Option<FeedEvent>),
    /// Tell this (if anything) and watch again from `version` (a list when
    /// it is `None`).
    Rewatch(Option<FeedEvent>),
    /// The kind is not served any more.
    Gone,
    /// End the feed with this error.
    Fail(watcher::Error),
    /// End the feed: a line longer than the limit.
    TooLong,
}

/// One watch event: what to tell, and how the feed goes on. `readiness`:
/// objects carry their readiness; `listing`: the watch is streaming the
/// list; `version`: where the feed stands.
fn step<K: Object>(
    served: &Served,
    event: kube::Result<WatchEvent<K>>,
    readiness: bool,
    listing: &mut bool,
    version: &mut Option<Arc<str>>,
) -> Next {
    match event {
        Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
            let Some(v) = object_version(&served.prefix, &obj) else {
                *version = None;
                return Next::Rewatch(Some(FeedEvent::Expired));
            };
            Next::Go(Some(match obj.seen(served, readiness) {
                Some(l) if *listing => FeedEvent::Listed(l),
                Some(l) => {
                    *version = Some(Arc::clone(&v));
                    FeedEvent::Applied(l, v)
                }
                None => FeedEvent::Skipped,
            }))
        }
        Ok(WatchEvent::Deleted(obj)) => {
            let Some(v) = object_version(&served.prefix, &obj) else {
                *version = None;
                return Next::Rewatch(Some(FeedEvent::Expired));
            };
            Next::Go(Some(match identify(&served.prefix, obj.meta()) {
                // A streamed list sends none (Kubernetes says so).
                Some(_) if *listing => FeedEvent::Skipped,
                Some((id, uid)) => {
                    *version = Some(Arc::clone(&v));
                    FeedEvent::Deleted(id, uid, v)
                }
                None => FeedEvent::Skipped,
            }))
        }
        Ok(WatchEvent::Bookmark(mark)) => {
            let v: Arc<str> = Arc::from(mark.metadata.resource_version);
            if v.is_empty() {
                Next::Go(Some(FeedEvent::Skipped))
            } else if *listing {
                if mark.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                    *listing = false;
                    *version = Some(Arc::clone(&v));
                    Next::Go(Some(FeedEvent::ListDone(v)))
                } else {
                    Next::Go(None)
                }
            } else {
                *version = Some(Arc::clone(&v));
                Next::Go(Some(FeedEvent::Bookmark(v)))
            }
        }
        // The version was compacted away: relist.
        Ok(WatchEvent::Error(status)) if status.code == 410 => {
            tracing::debug!(kind = %served.prefix, reason = %status.message, "watch expired (410 Gone): relisting");
            *version = None;
            Next::Rewatch(Some(FeedEvent::Expired))
        }
        // An `ERROR` frame whose object is no apiserver Status (no code):
        // the watch goes on.
        Ok(WatchEvent::Error(status)) if status.code == 0 => {
            tracing::warn!(kind = %served.prefix, "undecodable watch error frame skipped (not a Status)");
            Next::Go(Some(FeedEvent::Skipped))
        }
        // The kind is not served any more (its CRD was deleted).
        Ok(WatchEvent::Error(status)) if status.code == 404 => Next::Gone,
        Ok(WatchEvent::Error(status)) => Next::Fail(watcher::Error::WatchError(status)),
        // One event that does not decode: the watch goes on. (kube reads a
        // line that is no event but some JSON object as a Status; one with
        // no code is such a line.)
        Err(kube::Error::SerdeError(e)) => {
            tracing::warn!(kind = %served.prefix, error = %e, "undecodable watch event skipped");
            Next::Go(Some(FeedEvent::Skipped))
        }
        Err(kube::Error::Api(status)) if status.code == 0 => {
            tracing::warn!(kind = %served.prefix, "undecodable watch event skipped (not an event)");
            Next::Go(Some(FeedEvent::Skipped))
        }
        // A line longer than the limit: the session ends (its rest was
        // skipped, not read into memory).
        Err(kube::Error::LinesCodecMaxLineLengthExceeded) => Next::TooLong,
        // A line that is not UTF-8: kube's line reader ends that watch
        // request; watch again from the version reached (a streamed list
        // starts over).
        Err(kube::Error::ReadEvents(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            tracing::warn!(kind = %served.prefix, error = %e, "undecodable watch line: watching again from the last resourceVersion");
            if *listing {
                *version = None;
            }
            Next::Rewatch(Some(FeedEvent::Skipped))
        }
        Err(e) => Next::Fail(watcher::Error::WatchFailed(e)),
    }
}

/// The object's `resourceVersion`; `None` (logged) when it has none: the
/// feed cannot resume after it and relists.
fn object_version<K: Object>(kind: &str, obj: &K) -> Option<Arc<str>> {
    match obj.meta().resource_version.as_deref() {
        Some(v) if !v.is_empty() => Some(Arc::from(v)),
        _ => {
            tracing::warn!(%kind, name = ?obj.meta().name, "watch event without a resourceVersion: relisting");
            None
        }
    }
}
