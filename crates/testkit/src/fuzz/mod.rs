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

/// The largest chunk a harness feeds at once.
pub const MAX_CHUNK: usize = 64 << 10;

/// The most bytes one input expands to (the body repeated).
pub const MAX_BODY: usize = 4 << 20;

/// The bytes before the body.
pub const HEADER: usize = 3;

/// What every harness reads the same way from its input: byte 0 its flags
/// (bits 4-5 the chunk sizes; the others each harness's own), byte 1 the
/// seed of the chunk sizes, byte 2 the repeats of the body (`b` from `0xF8`
/// on: `2^(b - 0xEB)` times, at most [`MAX_BODY`] bytes in all; below:
/// once); the rest is the body.
#[derive(Debug)]
pub struct Input<'a> {
    /// Byte 0.
    pub flags: u8,
    /// The chunk sizes' seed (byte 1 and the input's length).
    pub seed: u64,
    /// The largest chunk: 16, 1, 4096 or [`MAX_CHUNK`] bytes (bits 4-5).
    pub max_chunk: usize,
    /// The body.
    pub body: &'a [u8],
    /// How many times the body is fed.
    pub repeats: usize,
}

impl<'a> Input<'a> {
    /// Reads `data`'s header.
    pub fn new(data: &'a [u8]) -> Self {
        let header = |i: usize| data.get(i).copied().unwrap_or(0);
        let (flags, seed, repeat) = (header(0), header(1), header(2));
        let body = data.get(HEADER..).unwrap_or(&[]);
        // Mostly once: libFuzzer rewards longer loops, and a corpus of
        // megabyte inputs runs at a few inputs a second.
        let wanted = repeat
            .checked_sub(0xEB)
            .filter(|s| *s >= 13)
            .map_or(1, |shift| 1 << shift);
        let repeats = if body.is_empty() {
            1
        } else {
            wanted.min(MAX_BODY / body.len()).max(1)
        };
        Self {
            flags,
            seed: u64::from(seed) ^ (u64::try_from(data.len()).unwrap_or(0) << 8),
            max_chunk: match (flags >> 4) & 0x03 {
                0 => 16,
                1 => 1,
                2 => 4096,
                _ => MAX_CHUNK,
            },
            body,
            repeats,
        }
    }
}
