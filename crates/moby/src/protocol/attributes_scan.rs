//! The few attributes every event is read for (`name`, and a `die`'s exit
//! code), found by one quick scan of the attributes' JSON text instead of a
//! `serde_json` pass each.
//!
//! The text is a value `serde_json` already accepted (the event line was
//! decoded), so the scan needs no validation of its own: it walks the
//! object's keys at its top level, skipping each value by its brackets and
//! quotes, and reads the three string values it looks for as they are in
//! the text. Whatever it does not read exactly as `serde_json` would (a key
//! or a wanted value with an escape, anything unexpected) makes it give up
//! ([`scan`] answers `None`), and the caller reads the text with
//! `serde_json` instead (`wire::attribute_name`, `wire::attribute_exit_code`):
//! the answers are the same either way. In the firehose bench the second
//! `serde_json` pass over the attributes, for the name alone, cost some 15 %
//! of an event's instructions.

/// What [`scan`] read: each field as a lookup in the decoded object reads
/// it (the last of a repeated key; `None` when missing or not a string).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts<'a> {
    /// `name`
    pub(crate) name: Option<&'a str>,
    /// Docker's `exitCode`
    pub(crate) exit_code: Option<&'a str>,
    /// Podman's `containerExitCode`
    pub(crate) container_exit_code: Option<&'a str>,
}

impl Facts<'_> {
    /// The exit code as `wire::attribute_exit_code` reads it: Docker's,
    /// else Podman's, as an integer.
    pub(crate) fn exit_code(&self) -> Option<i32> {
        self.exit_code
            .or(self.container_exit_code)?
            .trim()
            .parse()
            .ok()
    }
}

/// Scans attributes' JSON text (which `serde_json` accepted); `None` when
/// the text must be read by `serde_json` instead (see the module's docs).
/// What is no object has none of the fields.
pub(crate) fn scan(text: &str) -> Option<Facts<'_>> {
    let b = text.as_bytes();
    let mut facts = Facts::default();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return Some(facts);
    }
    i += 1;
    loop {
        i = ws(b, i);
        match *b.get(i)? {
            b'}' => return Some(facts),
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let (key, next) = plain_string(text, i)?;
        i = ws(b, next);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        let slot = match key {
            "name" => Some(&mut facts.name),
            "exitCode" => Some(&mut facts.exit_code),
            "containerExitCode" => Some(&mut facts.container_exit_code),
            _ => None,
        };
        match (slot, b.get(i)) {
            (Some(slot), Some(b'"')) => {
                let (value, next) = plain_string(text, i)?;
                *slot = Some(value);
                i = next;
            }
            (Some(slot), _) => {
                *slot = None;
                i = skip_value(b, i)?;
            }
            (None, _) => i = skip_value(b, i)?,
        }
    }
}

/// The first byte at or after `i` that is no JSON whitespace.
fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The string starting at `i` (its `"`) and the index after it; `None`
/// when it has an escape (only `serde_json` reads it exactly).
fn plain_string(text: &str, i: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    let start = i + 1;
    let end = start + memchr::memchr2(b'"', b'\\', b.get(start..)?)?;
    // A `\` first: an escape.
    (b[end] == b'"').then(|| (&text[start..end], end + 1))
}

/// The index after the string starting at `i` (its `"`), escapes and all.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut at = i + 1;
    loop {
        at += memchr::memchr2(b'"', b'\\', b.get(at..)?)?;
        if b[at] == b'"' {
            return Some(at + 1);
        }
        // `\` and the byte it escapes.
        at += 2;
    }
}

/// The index after the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = i;
            loop {
                match *b.get(at)? {
                    b'"' => {
                        at = skip_string(b, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        // A number, `true`, `false`, `null`: up to what ends it.
        _ => {
            let mut at = i;
            while !matches!(
                b.get(at),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                at += 1;
            }
            Some(at)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::wire::{attribute_exit_code, attribute_name};
    use serde_json::value::RawValue;

    /// The scan reads what the `serde_json` readers read, or gives up.
    fn same(json: &str) -> Option<Facts<'_>> {
        let raw: Box<RawValue> = serde_json::from_str(json).expect("json");
        let facts = scan(json);
        if let Some(facts) = facts {
            assert_eq!(
                facts.name,
                attribute_name(raw.get()).as_deref(),
                "the name of {json}"
            );
            assert_eq!(
                facts.exit_code(),
                attribute_exit_code(raw.get()),
                "the exit code of {json}"
            );
        }
        facts
    }

    #[test]
    fn it_reads_what_serde_json_reads() {
        let docker = r#"{"com.docker.compose.project":"bench","exitCode":"137","image":"nginx:1.27","maintainer":"NGINX \"Docker\" Maintainers","name":"/fh-1","tier":"frontend"}"#;
        assert_eq!(
            same(docker),
            Some(Facts {
                name: Some("/fh-1"),
                exit_code: Some("137"),
                container_exit_code: None,
            })
        );
        for json in [
            r#"{"name":"a","name":"b"}"#,
            r#"{"name":"a","name":7}"#,
            r#"{"name":7,"name":"a"}"#,
            r#" { "x" : [1, {"name":"no", "y":"]}"}], "name" : "web" , "n": null, "t": true, "f": -1.5e3 } "#,
            r#"{"o":{"a":{"b":[[],{}]}},"exitCode":" 3 ","containerExitCode":"0"}"#,
            r#"{"containerExitCode":"7","exitCode":3}"#,
            r#"{"exitCode":"x"}"#,
            "{}",
            r#"{"a":"\\","name":"w"}"#,
            r#"[1,{"name":"x"}]"#,
            "null",
            r#""name""#,
            "7",
        ] {
            assert!(same(json).is_some(), "scanned {json}");
        }
        // An escape in a key or a wanted value: read by serde_json.
        for json in [
            r#"{"na\u006de":"x"}"#,
            r#"{"name":"\/web"}"#,
            r#"{"exitCode":"\u0031"}"#,
        ] {
            assert_eq!(same(json), None, "gave up on {json}");
        }
    }
}
