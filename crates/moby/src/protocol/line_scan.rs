//! The fast path of an `/events` line's decoding: one hand scan of the
//! plain common line for everything the feed reads of it (the fields of
//! [`Wire`], and the attributes' name and exit code, `attributes_scan`'s
//! [`Facts`]), with `serde_json` (`Wire::decode`, then `attributes_scan`)
//! as the fallback for anything unusual.
//!
//! Why: in the firehose bench the line's `serde_json` pass and the second
//! scan of its attributes were some two thirds of lookout's instructions per
//! event (issue #48); a line as engines write it needs neither a visitor per
//! field nor a second pass.
//!
//! The rule that keeps it exact: [`fast`] answers only for a line that it
//! validated as `serde_json` validates it (UTF-8, the JSON grammar of every
//! value it skips, escapes included), and only when each field it reads is
//! of the plain shape it reads exactly: a string without an escape, a
//! non-negative integer within `i64`, an object for `Actor`. Anything else
//! (an escape in a key or a wanted string, a wanted field of another type,
//! a float time, nesting deeper than 64) makes it give up, and
//! [`decode`] reads the line with `serde_json`, whose answer it then is. So
//! the decoded line is the same either way; [`fast_path_agrees`] checks
//! that on any bytes (the unit tests' generated lines, and the fuzz
//! harnesses on every line they feed).

use std::borrow::Cow;

use super::attributes_scan::{Facts, scan};
use super::wire::{Loose, Wire};

/// A decoded line: its fields, and what the attributes say (`None`: they
/// are read by `serde_json` when asked; always `None` without attributes).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decoded<'a> {
    pub(crate) wire: Wire<'a>,
    pub(crate) facts: Option<Facts<'a>>,
}

/// Decodes a line (trimmed, not blank): the fast path, else `serde_json`;
/// an error of the data category means valid JSON that is not an object.
pub(crate) fn decode(line: &[u8]) -> Result<Decoded<'_>, serde_json::Error> {
    match fast(line) {
        Some(decoded) => Ok(decoded),
        None => slow(line),
    }
}

/// `serde_json`'s reading of a line, and the attributes' quick scan (which
/// may give up in turn: `attributes_scan.rs`).
fn slow(line: &[u8]) -> Result<Decoded<'_>, serde_json::Error> {
    let wire = Wire::decode(line)?;
    let facts = wire.attributes.and_then(scan);
    Ok(Decoded { wire, facts })
}

/// Whether the fast path reads `line` (trimmed as the feed trims it) as
/// `serde_json` does: `Err` describes the difference. For the fuzz
/// harnesses (`lookout-testkit`), which call it on every line they feed.
#[doc(hidden)]
pub fn fast_path_agrees(line: &[u8]) -> Result<(), String> {
    let line = line.trim_ascii();
    let Some(fast) = fast(line) else {
        return Ok(());
    };
    match slow(line) {
        Ok(slow) if slow == fast => Ok(()),
        slow => Err(format!(
            "the fast path read {fast:?}, serde_json {slow:?}, in {:?}",
            String::from_utf8_lossy(line)
        )),
    }
}

/// The fast path: `None` when the line must be read by `serde_json`.
fn fast(line: &[u8]) -> Option<Decoded<'_>> {
    // serde_json accepts invalid UTF-8 only inside a string it skips; the
    // fallback reads such a line.
    let text = std::str::from_utf8(line).ok()?;
    let mut s = Scanner { text, i: 0 };
    let mut wire = Wire::default();
    let mut facts = Facts::default();
    s.ws();
    s.object(|s, key| {
        match key {
            "Type" => wire.r#type = s.loose()?,
            "Action" => wire.action = s.loose()?,
            "status" => wire.status = s.loose()?,
            "id" => wire.id = s.loose()?,
            "timeNano" => wire.time_nano = Some(s.integer()?),
            "time" => wire.time = Some(s.integer()?),
            // A repeated `Actor` counts by its last value, whole.
            "Actor" => {
                (wire.actor_id, wire.attributes) = (Loose::Missing, None);
                s.object(|s, key| {
                    match key {
                        "ID" => wire.actor_id = s.loose()?,
                        "Attributes" => {
                            let start = s.i;
                            facts = s.attributes()?;
                            wire.attributes = Some(s.text.get(start..s.i)?);
                        }
                        _ => s.skip_value()?,
                    }
                    Some(())
                })?;
            }
            _ => s.skip_value()?,
        }
        Some(())
    })?;
    s.ws();
    if s.i != line.len() {
        return None;
    }
    let facts = wire.attributes.map(|_| facts);
    Some(Decoded { wire, facts })
}

/// The deepest nesting the fast path skips (`serde_json` skips any).
const MAX_DEPTH: u32 = 64;

/// A position in a line's text; every method answers `None` to give up.
struct Scanner<'a> {
    text: &'a str,
    i: usize,
}

impl<'a> Scanner<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.i).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.i += 1)
    }

    /// Skips JSON whitespace (only these four, as `serde_json`).
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            self.i += 1;
        }
    }

    /// An object at the position: each member's key (without an escape)
    /// handed to `member` with the position at its value, which `member`
    /// reads past.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.plain_str()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A field read as a string ([`Loose`]); only a plain string is read
    /// here.
    fn loose(&mut self) -> Option<Loose<'a>> {
        Some(Loose::Str(Cow::Borrowed(self.plain_str()?)))
    }

    /// A non-negative integer within `i64`, without a fraction or an
    /// exponent (what `serde_json` hands a visitor as a `u64` that fits).
    fn integer(&mut self) -> Option<i64> {
        let b = self.bytes();
        let start = self.i;
        let mut n: i64 = 0;
        while let Some(d @ b'0'..=b'9') = b.get(self.i).copied() {
            n = n.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        let leading_zero = digits > 1 && b[start] == b'0';
        if digits == 0 || leading_zero || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(n)
    }

    /// The attributes' value: an object scanned for [`Facts`] (a wanted
    /// key of a value that is no plain string: given up), or any other
    /// value, which has none.
    fn attributes(&mut self) -> Option<Facts<'a>> {
        let mut facts = Facts::default();
        if self.peek()? != b'{' {
            self.skip_value()?;
            return Some(facts);
        }
        self.object(|s, key| {
            let slot = match key {
                "name" => &mut facts.name,
                "exitCode" => &mut facts.exit_code,
                "containerExitCode" => &mut facts.container_exit_code,
                _ => return s.skip_value(),
            };
            *slot = Some(s.plain_str()?);
            Some(())
        })?;
        Some(facts)
    }

    /// A string without an escape or a control character, at its `"`.
    fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let len = string_stop(self.bytes().get(start..)?)?;
        if self.bytes()[start + len] != b'"' {
            return None;
        }
        self.i = start + len + 1;
        self.text.get(start..start + len)
    }

    /// Skips a string at its `"`, its escapes validated as `serde_json`
    /// validates a string it skips (a `\u` needs four hex digits, and
    /// need not name a valid code point).
    fn skip_str(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            self.i += string_stop(self.bytes().get(self.i..)?)?;
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => self.i += 1,
                // A control character.
                _ => return None,
            }
            match self.peek()? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                b'u' => {
                    let hex = self.bytes().get(self.i + 1..self.i + 5)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.i += 5;
                }
                _ => return None,
            }
        }
    }

    /// Skips a number, its grammar validated as `serde_json` validates a
    /// number it skips.
    fn skip_number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.some_digits()?;
        }
        // What follows (a digit after a leading `0` too) is the caller's
        // to accept or not.
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.bytes().get(self.i..end)? == word).then(|| self.i = end)
    }

    /// Skips any value at the position (whitespace before it skipped),
    /// validated as `serde_json` validates what it skips; the nesting is
    /// tracked in a bit stack (`1`: an object), at most [`MAX_DEPTH`] deep.
    fn skip_value(&mut self) -> Option<()> {
        let mut frames: u64 = 0;
        let mut depth = 0u32;
        loop {
            // At a value.
            self.ws();
            match self.peek()? {
                b'"' => self.skip_str()?,
                b'-' | b'0'..=b'9' => self.skip_number()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                open @ (b'{' | b'[') => {
                    if depth == MAX_DEPTH {
                        return None;
                    }
                    self.i += 1;
                    frames = frames << 1 | u64::from(open == b'{');
                    depth += 1;
                    self.ws();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.peek()? != close {
                        if open == b'{' {
                            self.key()?;
                        }
                        continue;
                    }
                    // Empty: closed below.
                }
                _ => return None,
            }
            // After a value: the frames it closes, then a comma and the
            // next value (and its key, in an object).
            loop {
                if depth == 0 {
                    return Some(());
                }
                self.ws();
                let in_object = frames & 1 == 1;
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        if in_object {
                            self.ws();
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if in_object => {}
                    b']' if !in_object => {}
                    _ => return None,
                }
                self.i += 1;
                frames >>= 1;
                depth -= 1;
            }
        }
    }

    /// A key of an object being skipped (any string) and its `:`.
    fn key(&mut self) -> Option<()> {
        self.skip_str()?;
        self.ws();
        self.eat(b':')
    }
}

/// Where a string's plain text stops: the index of the first `"`, `\\` or
/// control character (which `serde_json` refuses unescaped) in `bytes`.
///
/// Eight bytes at a time, as one `u64` (no `unsafe`, no branch per byte):
/// a line is mostly strings' text, and this costs some half the
/// instructions of a `memchr` for the quote and the backslash and another
/// pass for the controls (callgrind, the firehose bench). Each mask flags
/// a byte's high bit: `zero(v)` where a byte of `v` is 0, `below` where a
/// byte is under `0x20`. A mask may also flag bytes above its first true
/// hit (a borrow runs on up the word), never below it, so its lowest bit,
/// and the lowest of the three, is exact.
fn string_stop(bytes: &[u8]) -> Option<usize> {
    const LO: u64 = u64::from_le_bytes([0x01; 8]);
    const HI: u64 = u64::from_le_bytes([0x80; 8]);
    let stops = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        let x = u64::from_le_bytes(le);
        let quote = zero(x ^ (LO * u64::from(b'"')));
        let backslash = zero(x ^ (LO * u64::from(b'\\')));
        let below = x.wrapping_sub(LO * 0x20) & !x & HI;
        let hits = quote | backslash | below;
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = words.remainder();
    tail.iter().position(|&b| stops(b)).map(|i| at + i)
}

#[cfg(test)]
mod tests;
