//! What the fuzz targets share: an allocator that counts the bytes allocated
//! through Rust's global allocator (libFuzzer's own C++ allocations are not
//! counted), so that a target can check what the decoder keeps between two
//! chunks and what one input costs at its peak.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` as it is; only counters change.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as it is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as it is.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as it is.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as it is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

/// Bytes allocated now.
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Resets the peak to what is allocated now; returns that.
pub fn reset_peak() -> usize {
    let now = live();
    PEAK.store(now, Ordering::Relaxed);
    now
}

/// The most bytes allocated at once since [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// The most one input of the event decoders may have allocated at once:
/// what stays between chunks, plus one line of at most 1 MiB and a chunk
/// decoded (JSON values take several times the text: 64 MiB of room). It
/// does not grow with the body.
pub const PEAK_LIMIT: usize = 96 << 20;

/// Runs an event decoder harness on `data`, checking after every chunk that
/// what stays allocated is within `retained_limit(data.len())`, and at the
/// end that the peak is within [`PEAK_LIMIT`].
pub fn check_memory(
    data: &[u8],
    retained_limit: fn(usize) -> usize,
    harness: fn(&[u8], &mut dyn FnMut()),
) {
    let base = reset_peak();
    let limit = retained_limit(data.len());
    let mut worst = 0;
    harness(data, &mut || {
        let held = live().saturating_sub(base);
        worst = worst.max(held);
        assert!(
            held <= limit,
            "{held} bytes held between two chunks (limit {limit} for a {}-byte input)",
            data.len()
        );
    });
    let peak = peak().saturating_sub(base);
    assert!(
        peak <= PEAK_LIMIT,
        "{peak} bytes allocated at once (limit {PEAK_LIMIT}); {worst} held between chunks"
    );
    if std::env::var_os("LOOKOUT_FUZZ_MEMORY").is_some() {
        eprintln!("memory: peak {peak} bytes, held between chunks {worst} bytes (limit {limit})");
    }
}
