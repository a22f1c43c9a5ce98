//! The packed layout of what the tracker keeps per instance: the id as the
//! index's key ([`Key`]: inline when short) and the incarnation's uid
//! ([`Uid`]: a container id packed into 32 bytes).
//!
//! Why this layout: a resync looks up every listed instance, and at 100k
//! instances what a lookup costs is not hashing but memory: a hash map's
//! entry at a random place, and then each pointer the diff follows to a heap
//! block of its own (the id's text, the uid's, the labels'), are cache
//! misses. So the instances are kept in the order the engine lists them (see
//! `Tracker`), and the common cases are stored inline: a short id (a
//! container name), a container id's 64 hex digits (as 32 bytes), and empty
//! labels (one shared `Arc`).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::model::InstanceId;

/// Ids up to this many bytes are stored inline in the key.
const INLINE: usize = 22;

/// An instance id as the map's key: inline when short, else the id itself.
/// Hashed and compared as its bytes, so the map is searched with
/// `id.as_str().as_bytes()`.
#[derive(Clone)]
pub(super) enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(InstanceId),
}

const _: () = assert!(size_of::<Key>() == 24);

impl Key {
    pub(super) fn new(id: &InstanceId) -> Self {
        let s = id.as_str().as_bytes();
        match u8::try_from(s.len()) {
            Ok(len) if s.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..s.len()].copy_from_slice(s);
                Self::Inline { len, bytes }
            }
            _ => Self::Shared(id.clone()),
        }
    }

    #[inline]
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Shared(id) => id.as_str().as_bytes(),
        }
    }

    /// The id, for an event about an instance no observation names
    /// (one that vanished from a snapshot).
    pub(super) fn id(&self) -> InstanceId {
        match self {
            // The bytes are a whole `str`'s, so this borrows them as they are.
            Self::Inline { .. } => InstanceId::from(&*String::from_utf8_lossy(self.as_bytes())),
            Self::Shared(id) => id.clone(),
        }
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&String::from_utf8_lossy(self.as_bytes()), f)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `[u8]` hashes, which `Borrow<[u8]>` requires.
        self.as_bytes().hash(state);
    }
}

impl Borrow<[u8]> for Key {
    // Inlined into the map's probe, which compares keys through it.
    #[inline]
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// The engine's identity of an incarnation ([`Listed::uid`](crate::Listed::uid)): a Docker or
/// Podman container id (64 lowercase hex digits) packed into 32 bytes, any
/// other uid as it came. Canonical (a uid that packs is always packed), so
/// two are equal exactly when their texts are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Uid {
    None,
    Hex64([u8; 32]),
    Text(Arc<str>),
}

impl Uid {
    #[inline]
    pub(super) fn new(uid: Option<Arc<str>>) -> Self {
        match uid {
            None => Self::None,
            Some(text) => pack_hex64(text.as_bytes()).map_or(Self::Text(text), Self::Hex64),
        }
    }

    #[inline]
    pub(super) fn is_some(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// The uid as the engine wrote it (a packed container id is unpacked:
    /// only events that report a transition need it).
    /// Whether `seen` names another incarnation than this one (both known,
    /// and different), compared in place.
    #[inline]
    pub(super) fn is_other(&self, seen: Option<&str>) -> bool {
        match (self, seen) {
            (Self::None, _) | (_, None) => false,
            (Self::Text(text), Some(seen)) => **text != *seen,
            (Self::Hex64(bytes), Some(seen)) => pack_hex64(seen.as_bytes()) != Some(*bytes),
        }
    }

    #[inline]
    pub(super) fn text(&self) -> Option<Arc<str>> {
        match self {
            Self::None => None,
            Self::Hex64(bytes) => Some(unpack_hex64(bytes)),
            Self::Text(text) => Some(Arc::clone(text)),
        }
    }
}

/// A packed container id as its 64 hex digits.
fn unpack_hex64(bytes: &[u8; 32]) -> Arc<str> {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(64);
    for b in bytes {
        let _ = write!(text, "{b:02x}");
    }
    text.into()
}

/// 64 lowercase hex digits as 32 bytes; `None` for anything else.
/// Branch-free, digit by digit and then pair by pair: the compiler vectorizes
/// the first loop (3x as fast as one loop over the pairs).
pub(super) fn pack_hex64(text: &[u8]) -> Option<[u8; 32]> {
    // A digit's value: `0`-`9` are 0x30-0x39, `a`-`f` 0x61-0x66 (bit 6 set).
    fn value(c: u8) -> u8 {
        (c & 0xf) + 9 * (c >> 6)
    }
    fn is_digit(c: u8) -> bool {
        (c.wrapping_sub(b'0') < 10) | (c.wrapping_sub(b'a') < 6)
    }
    let text: &[u8; 64] = text.try_into().ok()?;
    let mut values = [0; 64];
    let mut ok = true;
    for (v, &c) in values.iter_mut().zip(text) {
        ok &= is_digit(c);
        *v = value(c);
    }
    if !ok {
        return None;
    }
    let mut out = [0; 32];
    for (o, pair) in out.iter_mut().zip(values.chunks_exact(2)) {
        *o = (pair[0] << 4) | pair[1];
    }
    Some(out)
}
