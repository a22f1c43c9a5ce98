//! The stable driver of the fuzz harnesses (the `fuzz_corpus` tests of this
//! crate run it): replays the seed corpus in `fuzz/corpus/TARGET/`, and, when
//! `LOOKOUT_FUZZ_SECONDS` is set, feeds the harness random inputs and
//! mutations of the seeds for that long (what `cargo xtask fuzz` falls back
//! to when there is no nightly toolchain for cargo-fuzz). No coverage
//! guidance: it finds far less than libFuzzer.
//!
//! A failing input is written to `target/fuzz-stable/TARGET/` before the
//! panic goes on, to replay with `cargo fuzz run TARGET FILE` or this test.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::rng::SplitMix64;

/// The seed corpus of `target`, sorted by name.
pub fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seed in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, data)
        })
        .collect()
}

/// Runs `harness` on every seed of `target`.
pub fn replay(target: &str, harness: impl Fn(&[u8])) {
    let seeds = seeds(target);
    for (path, data) in &seeds {
        check(target, data, &harness, &format!("seed {}", path.display()));
    }
    eprintln!("{target}: {} seeds passed", seeds.len());
}

/// With `LOOKOUT_FUZZ_SECONDS=N`: random inputs and mutated seeds for N
/// seconds (`LOOKOUT_FUZZ_SEED` fixes the generator). Without: nothing.
pub fn explore(target: &str, harness: impl Fn(&[u8])) {
    let Some(secs) = std::env::var("LOOKOUT_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        eprintln!("{target}: LOOKOUT_FUZZ_SECONDS unset: no random inputs");
        return;
    };
    let seed = std::env::var("LOOKOUT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        });
    eprintln!("{target}: random inputs for {secs} s (LOOKOUT_FUZZ_SEED={seed})");
    let seeds: Vec<Vec<u8>> = seeds(target).into_iter().map(|(_, d)| d).collect();
    let mut rng = SplitMix64::new(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut runs = 0u64;
    while Instant::now() < deadline {
        let input = mutate(&seeds, &mut rng);
        check(target, &input, &harness, "a random input");
        runs += 1;
    }
    eprintln!("{target}: {runs} random inputs passed in {secs} s");
}

/// Runs one input; on a panic, saves it and panics on.
fn check(target: &str, data: &[u8], harness: &impl Fn(&[u8]), what: &str) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| harness(data)));
    if let Err(panic) = result {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/fuzz-stable")
            .join(target);
        let _ = std::fs::create_dir_all(&dir);
        let file = dir.join(format!("crash-{:016x}", fnv(data)));
        let _ = std::fs::write(&file, data);
        eprintln!("{target}: {what} failed; input saved to {}", file.display());
        std::panic::resume_unwind(panic);
    }
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Random bytes, or a seed with a few random edits (byte flips, inserted
/// bytes and JSON tokens, cuts, pieces of another seed).
// Random numbers cut down to bytes: truncation is the point.
#[allow(clippy::cast_possible_truncation)]
fn mutate(seeds: &[Vec<u8>], rng: &mut SplitMix64) -> Vec<u8> {
    const TOKENS: &[&[u8]] = &[
        b"\n",
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"",
        b":",
        b",",
        b"null",
        b"\\u0000",
        b"\xff",
        b"\xc3",
        b"\"Type\":",
        b"\"Action\":",
        b"\"type\":",
        b"\"object\":",
        b"1e999",
        b"-1",
        b"\r\n",
    ];
    if seeds.is_empty() || rng.below(8) == 0 {
        let len = rng.below(512);
        return (0..len).map(|_| rng.next_u64() as u8).collect();
    }
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(8) {
        let at = rng.below(data.len() + 1);
        match rng.below(6) {
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] = rng.next_u64() as u8;
            }
            1 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
            2 => data.truncate(at),
            3 if at < data.len() => {
                let end = (at + rng.below(64)).min(data.len());
                data.drain(at..end);
            }
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                let to = (from + rng.below(256)).min(other.len());
                data.splice(at..at, other[from..to].iter().copied());
            }
            _ if !data.is_empty() => {
                // The header: flags, chunk seed, repeats.
                let i = rng.below(data.len().min(3));
                data[i] = rng.next_u64() as u8;
            }
            _ => {}
        }
    }
    data
}
