//! The probe's client: the live session's, held in a slot that the
//! session's lease empties when it is dropped ([`ProbeSlot`], [`ProbeLease`]).

use std::sync::{Arc, Mutex, PoisonError};

use kube::Client;

/// The client of the live session, if any, for the probe.
#[derive(Default)]
pub(crate) struct ProbeSlot(Mutex<Option<(u64, Client)>>);

impl std::fmt::Debug for ProbeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("ProbeSlot")
            .field("session", &slot.as_ref().map(|(dial, _)| *dial))
            .finish()
    }
}

impl ProbeSlot {
    pub(crate) fn current(&self) -> Option<Client> {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().map(|(_, client)| client.clone())
    }
}

/// A session's claim on the probe slot: empties it when the session (or its
/// dial) is dropped, so no client outlives its session.
#[derive(Debug)]
pub(crate) struct ProbeLease {
    pub(crate) slot: Arc<ProbeSlot>,
    pub(crate) dial: u64,
}

impl ProbeLease {
    pub(crate) fn fill(&self, client: Client) {
        let mut slot = self.slot.0.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some((self.dial, client));
    }
}

impl Drop for ProbeLease {
    fn drop(&mut self) {
        let mut slot = self.slot.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_some_and(|(dial, _)| *dial == self.dial) {
            *slot = None;
        }
    }
}
