//! A list's body (a JSON array) cut, as its pieces arrive, into parts of
//! whole entries, each itself a JSON array: a snapshot decodes a part at a
//! time and never holds the whole body (2.3 MB for 2 000 containers with
//! compose's labels), nor the decoded form of more than one part.
//!
//! It reads only the array's structure (strings, their escapes, brackets):
//! an entry's own JSON is checked where a part is decoded. A body that is
//! not an array, is cut short, or goes on after its `]` is an error, as a
//! whole-body decode would say.

/// The size from which a part is handed over, at the next entry's end.
pub(crate) const PART: usize = 64 << 10;

/// Where the cutter is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the `[`.
    Start,
    /// Inside the array (`depth` counts the brackets open, the array's own
    /// included).
    Array,
    /// After the `]`.
    End,
}

/// Cuts a JSON array's body into parts of whole entries.
#[derive(Debug)]
pub(crate) struct ListParts {
    at: At,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// `[` and the entries read since the last part, with their commas.
    part: Vec<u8>,
    /// An entry (not only whitespace) was copied into `part`.
    entries: bool,
    /// Bytes read, against `limit`.
    read: usize,
    limit: usize,
}

impl ListParts {
    /// A cutter failing past `limit` bytes of body.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            at: At::Start,
            depth: 0,
            in_string: false,
            escaped: false,
            part: Vec::new(),
            entries: false,
            read: 0,
            limit,
        }
    }

    /// Reads `chunk`, handing each part of at least [`PART`] bytes that it
    /// completes to `take`. `Err` with what is wrong (for `TooLarge`, see
    /// [`ListParts::too_large`]).
    pub(crate) fn push<E>(
        &mut self,
        chunk: &[u8],
        take: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), Cut<E>> {
        self.read = self.read.saturating_add(chunk.len());
        if self.read > self.limit {
            return Err(Cut::TooLarge(self.limit));
        }
        let mut i = 0;
        // The start of the bytes of `chunk` still to copy into the part.
        let mut from = 0;
        while i < chunk.len() {
            if self.in_string {
                if self.escaped {
                    // An escape's next byte, whatever it is.
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                // Straight to the next quote or backslash.
                let Some(n) = memchr::memchr2(b'"', b'\\', &chunk[i..]) else {
                    break;
                };
                i += n;
                if chunk[i] == b'\\' {
                    self.escaped = true;
                } else {
                    self.in_string = false;
                }
                i += 1;
                continue;
            }
            let b = chunk[i];
            match self.at {
                At::Start => {
                    if b == b'[' {
                        self.at = At::Array;
                        self.depth = 1;
                        self.part.push(b'[');
                        from = i + 1;
                    } else if !b.is_ascii_whitespace() {
                        return Err(Cut::Invalid("not a JSON array".to_owned()));
                    }
                }
                At::End => {
                    if !b.is_ascii_whitespace() {
                        return Err(Cut::Invalid(
                            "trailing characters after the list".to_owned(),
                        ));
                    }
                }
                At::Array => match b {
                    b'"' => {
                        self.in_string = true;
                        self.entries = true;
                    }
                    b'[' | b'{' => {
                        self.depth += 1;
                        self.entries = true;
                    }
                    b'}' if self.depth == 1 => {
                        return Err(Cut::Invalid("a `}` closing the list".to_owned()));
                    }
                    b']' | b'}' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            self.part.extend_from_slice(&chunk[from..i]);
                            self.at = At::End;
                            self.hand_over(take)?;
                        }
                    }
                    b',' if self.depth == 1 && self.part.len() + (i - from) >= PART => {
                        self.part.extend_from_slice(&chunk[from..i]);
                        from = i + 1;
                        self.hand_over(take)?;
                        self.part.push(b'[');
                    }
                    b if !b.is_ascii_whitespace() && b != b',' => self.entries = true,
                    _ => {}
                },
            }
            i += 1;
        }
        if self.at == At::Array {
            self.part.extend_from_slice(&chunk[from.min(chunk.len())..]);
        }
        Ok(())
    }

    /// The part read so far, closed, to `take`.
    fn hand_over<E>(
        &mut self,
        take: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), Cut<E>> {
        self.part.push(b']');
        if self.entries {
            take(&self.part).map_err(Cut::Taken)?;
        }
        self.part.clear();
        self.entries = false;
        Ok(())
    }

    /// The body ended: `Err` unless the array was closed.
    pub(crate) fn finish<E>(&self) -> Result<(), Cut<E>> {
        match self.at {
            At::End => Ok(()),
            At::Start => Err(Cut::Invalid("an empty body, not a JSON array".to_owned())),
            At::Array => Err(Cut::Invalid("the list ended before its `]`".to_owned())),
        }
    }
}

/// Why a list could not be cut into parts.
#[derive(Debug)]
pub(crate) enum Cut<E> {
    /// Over the limit (bytes).
    TooLarge(usize),
    /// Not a JSON array.
    Invalid(String),
    /// What the part's taker said.
    Taken(E),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of `body` fed in pieces of `step` bytes, as decoded arrays.
    fn parts(body: &str, step: usize) -> Result<Vec<Vec<serde_json::Value>>, String> {
        let mut cut = ListParts::new(1 << 30);
        let mut out = Vec::new();
        let mut take = |part: &[u8]| -> Result<(), String> {
            out.push(serde_json::from_slice(part).map_err(|e| e.to_string())?);
            Ok(())
        };
        for piece in body.as_bytes().chunks(step.max(1)) {
            cut.push(piece, &mut take).map_err(|e| format!("{e:?}"))?;
        }
        cut.finish::<String>().map_err(|e| format!("{e:?}"))?;
        Ok(out)
    }

    #[test]
    fn any_cut_of_a_body_gives_its_entries_in_order() {
        let body = r#" [ {"Id":"a","Names":["/a]"],"Labels":{"k":"v \"}] \\"}},
            {"Id":"b","x":[[1,2],{"y":"}"}]}, 3, "s,]" ,null ] "#;
        let whole: Vec<serde_json::Value> = serde_json::from_str(body).expect("json");
        for step in [1, 2, 3, 7, 64, 4096] {
            let got: Vec<serde_json::Value> = parts(body, step).expect("parts").concat();
            assert_eq!(got, whole, "step {step}");
        }
    }

    #[test]
    fn a_large_list_comes_in_parts_of_whole_entries() {
        let entry = format!(r#"{{"Id":"{}","Labels":{{"a":"[,]"}}}}"#, "x".repeat(1000));
        let body = format!("[{}]", vec![entry; 200].join(","));
        let got = parts(&body, 1000).expect("parts");
        assert!(got.len() >= 3, "{} parts", got.len());
        assert_eq!(got.iter().map(Vec::len).sum::<usize>(), 200);
    }

    #[test]
    fn what_is_no_array_fails() {
        assert_eq!(
            parts("[]", 1).expect("empty"),
            Vec::<Vec<serde_json::Value>>::new()
        );
        for bad in [
            "",
            "{}",
            "[1}",
            "[\"\\\"]",
            r#"{"message":"no"}"#,
            "[1,2",
            "[1] x",
            "null",
        ] {
            assert!(parts(bad, 1).is_err(), "{bad:?}");
        }
        let mut cut = ListParts::new(4);
        let mut take = |_: &[u8]| Ok::<(), ()>(());
        assert!(matches!(
            cut.push(b"[1,2,3]", &mut take),
            Err(Cut::TooLarge(4))
        ));
    }
}
