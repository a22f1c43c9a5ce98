//! The gate of every test that needs an engine: [`skips`] and [`require`].
//!
//! The engines are root's and the tests kill, stop and restart the ones they
//! use, so a test touches an engine only when the run was set up for it:
//! `LOOKOUT_ENGINES=1`, which `cargo xtask ci` sets and `cargo xtask engines
//! env` exports. Otherwise (a plain `cargo test --workspace` on a developer's
//! machine, which may run a dockerd someone needs) the test says `SKIPPED`
//! and why on stderr, and passes. Under CI (`CI` set) a skip would hide a
//! failure: there the gate fails instead.

use std::io::Write as _;

use crate::{ENV_ENGINES, EngineLock, engines_enabled, lock_engine};

/// Whether a test that needs `what` (an engine's name, as `cargo xtask
/// engines up` takes it) skips: `true` when the engines were not brought up
/// for this run (`LOOKOUT_ENGINES` unset), after a `SKIPPED` line naming the
/// test, what it needs and how to run it. The line goes to the process's
/// stderr directly, past libtest's capture, so a passing run shows it.
///
/// # Panics
/// When it would skip under CI (`CI` set): there the engines must be up.
#[must_use]
pub fn skips(what: &str) -> bool {
    if engines_enabled() {
        return false;
    }
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: needs {what}, and {ENV_ENGINES} is not set although CI is: run the tests \
         through `cargo xtask ci`, which brings the engines up"
    );
    // One write of the whole line, so that parallel tests' lines do not mix.
    let line = format!(
        "SKIPPED {test}: needs {what} and {ENV_ENGINES} is not set (as root, on a machine \
         whose engines may be killed: `cargo xtask engines up {what}`, then \
         `eval \"$(cargo xtask engines env)\"`)\n"
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    true
}

/// The engine `engine` for a test: `None` when the test [`skips`]; else its
/// lock taken (exclusive for a test that stops, kills or restarts it: the
/// lock first, so such a test is never caught halfway by another's check),
/// then `up` run (it starts the engine when it is down, and checks it).
///
/// # Panics
/// When the lock cannot be taken or the engine does not come up: the message
/// names the engine and how to bring it up.
#[must_use]
pub fn require(
    engine: &str,
    exclusive: bool,
    up: fn() -> Result<(), String>,
) -> Option<EngineLock> {
    if skips(engine) {
        return None;
    }
    let lock = lock_engine(engine, exclusive).unwrap_or_else(|e| panic!("{engine}: {e}"));
    if let Err(e) = up() {
        panic!(
            "{engine} is not usable ({e}).\nRun `cargo xtask engines up {engine}` first \
             (or run the tests under `cargo xtask ci`)."
        );
    }
    Some(lock)
}
