//! The constructors and setters of the `#[non_exhaustive]` data of the
//! model: [`InstanceEvent`], [`Listed`], [`Change`] and
//! [`Observation::Polled`]. A field added later gets a default here, so a
//! provider's code keeps compiling.

use std::sync::Arc;
use std::time::SystemTime;

use super::{
    Change, EventKind, InstanceEvent, InstanceId, Labels, Listed, Observation, Origin, Readiness,
    Reason,
};

/// The setters every record of an instance has: its incarnation and its
/// readiness.
macro_rules! uid_and_readiness {
    ($($generic:ident)?; $ty:ty) => {
        impl$(<$generic>)? $ty {
            /// Sets [`uid`](Self#structfield.uid) (`None`: unknown).
            #[must_use]
            pub fn uid(mut self, uid: Option<Arc<str>>) -> Self {
                self.uid = uid;
                self
            }

            /// Sets [`readiness`](Self#structfield.readiness) (`None`: not
            /// watched, or not told).
            #[must_use]
            pub fn readiness(mut self, readiness: Option<Readiness>) -> Self {
                self.readiness = readiness;
                self
            }

            /// Sets [`reason`](Self#structfield.reason) (`None`: the engine
            /// said nothing of why).
            #[must_use]
            pub fn reason(mut self, reason: Option<Arc<Reason>>) -> Self {
                self.reason = reason;
                self
            }
        }
    };
}

uid_and_readiness!(; InstanceEvent);
uid_and_readiness!(; Listed);
uid_and_readiness!(C; Change<C>);

impl InstanceEvent {
    /// The event `kind` of instance `id` at `at`, learnt as `origin`; no
    /// labels, uid or readiness (see the setters).
    pub fn new(id: InstanceId, kind: EventKind, at: SystemTime, origin: Origin) -> Self {
        Self {
            id,
            kind,
            at,
            origin,
            labels: Arc::new(Labels::new()),
            uid: None,
            readiness: None,
            reason: None,
        }
    }

    /// Sets [`labels`](Self#structfield.labels).
    #[must_use]
    pub fn labels(mut self, labels: Arc<Labels>) -> Self {
        self.labels = labels;
        self
    }
}

impl Listed {
    /// Instance `id` as listed, running or not; no uid, labels or readiness
    /// (see the setters).
    pub fn new(id: InstanceId, running: bool) -> Self {
        Self {
            id,
            running,
            uid: None,
            labels: Labels::new(),
            readiness: None,
            reason: None,
        }
    }

    /// Sets [`labels`](Self#structfield.labels).
    #[must_use]
    pub fn labels(mut self, labels: Labels) -> Self {
        self.labels = labels;
        self
    }
}

impl<C> Change<C> {
    /// The change `kind` of instance `id`, at the engine's time `at`; no
    /// uid, labels, cursor or readiness (see the setters).
    pub fn new(id: InstanceId, kind: EventKind, at: SystemTime) -> Self {
        Self {
            id,
            kind,
            uid: None,
            labels: None,
            at,
            cursor: None,
            readiness: None,
            reason: None,
        }
    }

    /// Sets [`labels`](Self#structfield.labels) (`None`: keep the known ones).
    #[must_use]
    pub fn labels(mut self, labels: Option<Arc<Labels>>) -> Self {
        self.labels = labels;
        self
    }

    /// Sets [`cursor`](Self#structfield.cursor) (`None`: the engine gave none).
    #[must_use]
    pub fn cursor(mut self, cursor: Option<C>) -> Self {
        self.cursor = cursor;
        self
    }
}

impl<C> Observation<C> {
    /// [`Observation::Polled`]: the readiness of instance `id` (incarnation
    /// `uid`, when known) as the session polled it.
    pub fn polled(id: InstanceId, uid: Option<Arc<str>>, readiness: Readiness) -> Self {
        Self::Polled {
            id,
            uid,
            readiness,
            reason: None,
        }
    }

    /// For [`Observation::Polled`]: why the instance fails now, in the
    /// engine's words (`None`: it does not); other observations are
    /// returned as they are.
    #[must_use]
    pub fn failing(mut self, failure: Option<Arc<Reason>>) -> Self {
        if let Self::Polled { reason, .. } = &mut self {
            *reason = failure;
        }
        self
    }
}
