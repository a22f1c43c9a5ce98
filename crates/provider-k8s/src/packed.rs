//! Labels as the session keeps them between snapshots: one allocation of
//! length-prefixed keys and values (a two-label object's take some 60 bytes,
//! where a `BTreeMap` leaf alone takes over 500). The core keeps each
//! instance's labels as its own `Arc`; the session needs its copy only to
//! rebuild a snapshot of every kind after one kind relists, so it keeps it
//! small rather than shared.

use lookout_core::Labels;

/// Labels, packed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Packed(Box<[u8]>);

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.unpack()).finish()
    }
}

impl Packed {
    pub(crate) fn pack(labels: &Labels) -> Self {
        let len = labels.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
        let mut bytes = Vec::with_capacity(len);
        for (k, v) in labels {
            for s in [k, v] {
                // A label is far shorter than 4 GiB; saturate rather than panic.
                let n = u32::try_from(s.len()).unwrap_or(u32::MAX);
                bytes.extend_from_slice(&n.to_le_bytes());
                bytes.extend_from_slice(&s.as_bytes()[..n as usize]);
            }
        }
        Self(bytes.into_boxed_slice())
    }

    pub(crate) fn unpack(&self) -> Labels {
        let mut out = Labels::new();
        let mut rest: &[u8] = &self.0;
        let mut take = || -> Option<String> {
            let (n, tail) = rest.split_first_chunk::<4>()?;
            let n = u32::from_le_bytes(*n) as usize;
            let (s, tail) = tail.split_at_checked(n)?;
            rest = tail;
            // Packed from `String`s, cut at a length it wrote: UTF-8 unless
            // a label was cut at 4 GiB, which a label never reaches.
            Some(String::from_utf8_lossy(s).into_owned())
        };
        while let (Some(k), Some(v)) = (take(), take()) {
            out.insert(k, v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks() {
        for labels in [
            Labels::new(),
            Labels::from([("app".to_owned(), "web".to_owned())]),
            Labels::from([
                ("a".to_owned(), String::new()),
                ("example.com/tier".to_owned(), "front\0end é".to_owned()),
                (String::new(), "x".to_owned()),
            ]),
        ] {
            let p = Packed::pack(&labels);
            assert_eq!(p.unpack(), labels);
            assert_eq!(p, Packed::pack(&labels));
        }
        let one = Packed::pack(&Labels::from([("app".to_owned(), "web".to_owned())]));
        assert_eq!(one.0.len(), 14);
    }
}
