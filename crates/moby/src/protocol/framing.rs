//! Line framing of an `/events` body: its bound, [`MAX_LINE`], on the
//! core's [`LineSplitter`](lookout_core::LineSplitter) (which [`Feed`]
//! runs: a line that grows past the bound is reported once and skipped to
//! its `\n`; the feed skips that event), and the start of a line for a log.
//!
//! [`Feed`]: super::Feed

/// The longest event line accepted; a longer one is skipped as undecodable.
pub const MAX_LINE: usize = 1 << 20;

/// The start of a text, for a log message.
pub(crate) fn preview(text: &[u8]) -> String {
    const MAX: usize = 200;
    let shown = String::from_utf8_lossy(&text[..text.len().min(MAX)]);
    if text.len() > MAX {
        format!("{shown}…")
    } else {
        shown.into_owned()
    }
}
