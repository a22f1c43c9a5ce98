//! [`Labels`]: an instance's key/value set, immutable, sorted by key,
//! packed and shared (the costs are on the type).

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use arcstr::ArcStr;
use triomphe::ThinArc;

/// A string of a set, shared: one pointer to its count, length and text
/// (8 bytes a label, not a `Arc<str>`'s 16).
type Str = ArcStr;

/// A sorted key list, shared by every set with the same keys: one pointer
/// to its count, length and keys.
type KeyList = ThinArc<(), Str>;

/// The labels of an instance (Docker/Podman container labels, Swarm service
/// labels, Kubernetes object labels), ordered by key.
///
/// Labels are most of what a watch holds and diffs, and most of their keys
/// and values repeat across instances (one compose project, one image, one
/// chart). So a [`Labels`] is one pointer to one allocation: a pointer to
/// its sorted keys (a list shared by every set with the same keys: the
/// containers of one compose project, the objects of one chart carry the
/// same keys) and the values in the same order, each a pointer to a shared
/// string; and the sets themselves are shared: every set is made through
/// one process-wide interner, so equal sets are the same allocation and
/// compare by pointer, and a set built again from an engine's answer (a
/// resync lists every instance again) costs hash lookups, not copies.
///
/// Costs: a set of `n` labels takes `24 + 8·n` bytes (its count, its key
/// list, its length and its values), once per distinct set, and its key
/// list `16 + 8·n` once per distinct list of keys; each distinct key or
/// value takes `16 +` its length once, however many sets hold it; the
/// interner's tables about 12 bytes per distinct set. A [`Labels`] is 8
/// bytes, none of them on the heap when empty; cloning it is one reference
/// count, comparing two equal ones one pointer comparison. Making one
/// ([`FromIterator`], [`From`], serde's `Deserialize` with the `serde`
/// feature) looks each string up, and then the set by its strings'
/// addresses, under the interner's lock, held for that alone (uncontended
/// in practice: a watch makes its sets on the task that polls it); a string
/// the last set made holds at the same place (a listing's containers of one
/// project, one after the other) is not even hashed, and making a set that
/// exists allocates nothing. The interner forgets what no set holds any
/// more when it has doubled since it last looked (an amortised sweep), so
/// its memory is bounded by the distinct strings and sets alive, not by how
/// many were ever seen.
///
/// ```
/// use lookout_core::Labels;
/// let labels: Labels = [("tier", "web"), ("app", "shop")].into_iter().collect();
/// assert_eq!(labels.get("app"), Some("shop"));
/// assert_eq!(labels.iter().collect::<Vec<_>>(), [("app", "shop"), ("tier", "web")]);
/// // The same set, made again: the same allocation.
/// let again = Labels::from([("app".to_owned(), "shop".to_owned()), ("tier".to_owned(), "web".to_owned())]);
/// assert!(labels.ptr_eq(&again));
/// ```
#[derive(Clone, Default)]
pub struct Labels(Option<Set>);

/// A non-empty set, one allocation (`triomphe`'s `ThinArc`, so that a
/// [`Labels`] and the `Arc<Labels>` an event holds stay small): its key
/// list as the header, its values in the same order as the slice.
#[derive(Clone)]
struct Set(ThinArc<KeyList, Str>);

impl Set {
    fn keys(&self) -> &[Str] {
        &self.0.header.header.slice
    }

    fn values(&self) -> &[Str] {
        &self.0.slice
    }

    fn ptr_eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0.as_ptr(), other.0.as_ptr())
    }
}

impl Labels {
    /// No labels (no allocation).
    pub const fn new() -> Self {
        Self(None)
    }

    fn keys_values(&self) -> (&[Str], &[Str]) {
        match &self.0 {
            Some(set) => (set.keys(), set.values()),
            None => (&[], &[]),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let (keys, values) = self.keys_values();
        let at = keys.binary_search_by(|k| k.as_str().cmp(key)).ok()?;
        values.get(at).map(ArcStr::as_str)
    }

    /// Whether `key` is one of them.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The labels in key order.
    pub fn iter(&self) -> Iter<'_> {
        let (keys, values) = self.keys_values();
        Iter {
            keys: keys.iter(),
            values: values.iter(),
        }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.keys_values().0.iter().map(ArcStr::as_str)
    }

    /// How many labels there are.
    pub fn len(&self) -> usize {
        self.keys_values().0.len()
    }

    /// Whether there is no label.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Whether both are the very same set (then they are equal; equal sets
    /// made through [`FromIterator`]/[`From`] are the same set).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => a.ptr_eq(b),
            _ => false,
        }
    }

    /// The labels as a map.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// Heap bytes of this set's own allocation (its count, key list
    /// pointer, length and values; the key list and strings are shared),
    /// for a memory report.
    pub fn set_bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |s| {
            2 * size_of::<usize>() + size_of::<KeyList>() + size_of_val(s.values())
        })
    }
}

impl PartialEq for Labels {
    fn eq(&self, other: &Self) -> bool {
        // Interned: equal sets are one allocation (then this is all it takes).
        self.ptr_eq(other) || self.keys_values() == other.keys_values()
    }
}

impl Eq for Labels {}

impl Hash for Labels {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let (keys, values) = self.keys_values();
        keys.hash(state);
        values.hash(state);
    }
}

impl PartialOrd for Labels {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Labels {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.iter().cmp(other.iter())
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The labels in key order: `(key, value)`.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    keys: std::slice::Iter<'a, Str>,
    values: std::slice::Iter<'a, Str>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        Some((self.keys.next()?.as_str(), self.values.next()?.as_str()))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.keys.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some((
            self.keys.next_back()?.as_str(),
            self.values.next_back()?.as_str(),
        ))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// The set of these pairs, sorted by key; of a key given twice, the last
/// value (as a map's `insert` keeps it).
impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut interner = INTERNER.lock().unwrap_or_else(PoisonError::into_inner);
        // The interner's own buffer: making a set that exists allocates
        // nothing.
        let mut set = std::mem::take(&mut interner.scratch);
        // The set made last, whose strings the next set most likely repeats
        // at the same places: the engine gives keys sorted (Go sorts a map's
        // keys), and lists the containers of one project or service one
        // after the other. A string found there is not hashed.
        let last = interner.last.take();
        let (last_keys, last_values) = last
            .as_ref()
            .map_or((&[][..], &[][..]), |l| (l.keys(), l.values()));
        for (i, (k, v)) in pairs.into_iter().enumerate() {
            let (k, v) = (k.as_ref(), v.as_ref());
            let at_i =
                |list: &[Str], s: &str| list.get(i).filter(|have| have.as_str() == s).cloned();
            let v = at_i(last_values, v).unwrap_or_else(|| interner.string(v));
            // Keys come sorted: a key after the last one is appended.
            let place = match set.last() {
                Some((have, _)) if have.as_str() >= k => {
                    set.binary_search_by(|(have, _)| have.as_str().cmp(k))
                }
                _ => Err(set.len()),
            };
            match place {
                Ok(at) => set[at].1 = v,
                Err(at) => {
                    let k = at_i(last_keys, k).unwrap_or_else(|| interner.string(k));
                    set.insert(at, (k, v));
                }
            }
        }
        let labels = interner.set(&set);
        set.clear();
        interner.scratch = set;
        interner.last = labels.0.clone().or(last);
        labels
    }
}

impl<const N: usize> From<[(String, String); N]> for Labels {
    fn from(pairs: [(String, String); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.iter().collect()
    }
}

impl From<&Labels> for BTreeMap<String, String> {
    fn from(labels: &Labels) -> Self {
        labels.to_map()
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// From a map of strings (as engines send labels), straight into the set:
/// a string the input holds unescaped is not copied before it is interned.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Labels {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use std::borrow::Cow;

        /// A string, borrowed from the input when it can be.
        struct Str<'a>(Cow<'a, str>);

        impl<'de> serde::Deserialize<'de> for Str<'de> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = Str<'de>;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Str<'de>, E> {
                        Ok(Str(Cow::Borrowed(v)))
                    }
                    fn visit_str<E>(self, v: &str) -> Result<Str<'de>, E> {
                        Ok(Str(Cow::Owned(v.to_owned())))
                    }
                    fn visit_string<E>(self, v: String) -> Result<Str<'de>, E> {
                        Ok(Str(Cow::Owned(v)))
                    }
                }
                d.deserialize_str(V)
            }
        }

        struct Map;
        impl<'de> serde::de::Visitor<'de> for Map {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Labels, A::Error> {
                let mut pairs: Vec<(Str<'de>, Str<'de>)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).min(256));
                while let Some(pair) = map.next_entry::<Str<'de>, Str<'de>>()? {
                    pairs.push(pair);
                }
                Ok(pairs.iter().map(|(k, v)| (&*k.0, &*v.0)).collect())
            }
        }
        deserializer.deserialize_map(Map)
    }
}

/// The address of an interned string: its text's, which is one allocation
/// while the string lives (the empty string is a static of `arcstr`'s, one
/// address too).
fn address(s: &Str) -> usize {
    s.as_ptr() as usize
}

/// The hash of a list of interned strings: of their addresses.
fn addresses_hash<'a>(hasher: &Hasher_, strings: impl Iterator<Item = &'a Str>) -> u64 {
    let mut h = hasher.build_hasher();
    for s in strings {
        h.write_usize(address(s));
    }
    h.finish()
}

/// Whether `have` holds exactly the strings `want` yields (interned: by
/// address).
fn same<'a>(have: &[Str], want: impl ExactSizeIterator<Item = &'a Str>) -> bool {
    have.len() == want.len() && have.iter().zip(want).all(|(a, b)| ArcStr::ptr_eq(a, b))
}

/// The process's labels interner (see [`Labels`]).
static INTERNER: Mutex<Interner> = Mutex::new(Interner::new());

/// The interner's hasher: foldhash, as the tracker's (labels are set by
/// the engine's own users), randomly seeded once per process.
type Hasher_ = foldhash::fast::RandomState;

/// The least the interner holds before it looks for what no set holds.
const MIN_SWEEP: usize = 1024;

/// Interned strings, key lists and sets, swept when they have doubled since
/// the last sweep.
struct Interner {
    /// Made at the first use (a seed is no constant).
    hasher: Option<Hasher_>,
    strings: Option<HashSet<Str, Hasher_>>,
    key_lists: hashbrown::HashTable<KeyList>,
    sets: hashbrown::HashTable<Set>,
    /// What was left after the last sweep (at least [`MIN_SWEEP`]).
    live: usize,
    /// The pairs of the set being made (empty between two).
    scratch: Vec<(Str, Str)>,
    /// The last set made (see `FromIterator`): it keeps its strings from a
    /// sweep, one set's worth.
    last: Option<Set>,
}

impl Interner {
    const fn new() -> Self {
        Self {
            hasher: None,
            strings: None,
            key_lists: hashbrown::HashTable::new(),
            sets: hashbrown::HashTable::new(),
            live: MIN_SWEEP,
            scratch: Vec::new(),
            last: None,
        }
    }

    fn hasher(&mut self) -> Hasher_ {
        self.hasher.get_or_insert_with(Hasher_::default).clone()
    }

    fn string(&mut self, s: &str) -> Str {
        let hasher = self.hasher();
        let strings = self
            .strings
            .get_or_insert_with(|| HashSet::with_hasher(hasher));
        if let Some(have) = strings.get(s) {
            return have.clone();
        }
        let new = Str::from(s);
        strings.insert(new.clone());
        new
    }

    /// The set of these pairs (sorted by key, each string the interner's).
    fn set(&mut self, pairs: &[(Str, Str)]) -> Labels {
        if pairs.is_empty() {
            return Labels::new();
        }
        // Every string is the interner's, so a string is its address: a set
        // is hashed and compared by its strings' addresses, not their text.
        let hasher = self.hasher();
        let (keys, values) = (|| pairs.iter().map(|p| &p.0), || pairs.iter().map(|p| &p.1));
        let hash = addresses_hash(&hasher, keys().chain(values()));
        if let Some(have) = self.sets.find(hash, |s| {
            same(s.keys(), keys()) && same(s.values(), values())
        }) {
            return Labels(Some(have.clone()));
        }
        let keys_hash = addresses_hash(&hasher, keys());
        let keys = if let Some(list) = self.key_lists.find(keys_hash, |l| same(&l.slice, keys())) {
            list.clone()
        } else {
            let list = KeyList::from_header_and_iter((), keys().cloned());
            self.key_lists.insert_unique(keys_hash, list.clone(), |l| {
                addresses_hash(&hasher, l.slice.iter())
            });
            list
        };
        let set = Set(ThinArc::from_header_and_iter(keys, values().cloned()));
        let slices_hash = |s: &Set| addresses_hash(&hasher, s.keys().iter().chain(s.values()));
        self.sets.insert_unique(hash, set.clone(), slices_hash);
        self.maybe_sweep();
        Labels(Some(set))
    }

    fn held(&self) -> usize {
        self.strings.as_ref().map_or(0, HashSet::len) + self.key_lists.len() + self.sets.len()
    }

    /// Forgets the sets, key lists and strings only the interner holds,
    /// once it holds twice what the last sweep left.
    fn maybe_sweep(&mut self) {
        if self.held() <= 2 * self.live {
            return;
        }
        self.sets.retain(|s| ThinArc::strong_count(&s.0) > 1);
        // After the sets: what a forgotten set held is now the interner's alone.
        self.key_lists.retain(|l| ThinArc::strong_count(l) > 1);
        if let Some(strings) = &mut self.strings {
            // A static string (`None`: the empty one) costs nothing kept.
            strings.retain(|s| ArcStr::strong_count(s).is_none_or(|n| n > 1));
        }
        self.live = self.held().max(MIN_SWEEP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().copied().collect()
    }

    #[test]
    fn sorted_by_key_the_last_value_of_a_key_given_twice() {
        let l = set(&[("b", "2"), ("a", "1"), ("b", "3"), ("", "e")]);
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            [("", "e"), ("a", "1"), ("b", "3")]
        );
        assert_eq!(l.len(), 3);
        assert_eq!(l.get("b"), Some("3"));
        assert_eq!(l.get("c"), None);
        assert!(l.contains_key(""));
        assert_eq!(l.keys().rev().collect::<Vec<_>>(), ["b", "a", ""]);
        let map = l.to_map();
        assert_eq!(Labels::from(map.clone()), l);
        assert_eq!(BTreeMap::from(&l), map);
        assert_eq!(format!("{l:?}"), r#"{"": "e", "a": "1", "b": "3"}"#);
    }

    #[test]
    fn equal_sets_are_one_allocation_and_strings_are_shared() {
        let a = set(&[("app", "shop"), ("tier", "web")]);
        let b = set(&[("tier", "web"), ("app", "shop")]);
        assert!(a.ptr_eq(&b));
        assert_eq!(a, b);
        let c = set(&[("app", "shop"), ("tier", "db")]);
        assert_ne!(a, c);
        // One key list, and `shop` the same string in both sets.
        let (sa, sc) = (a.0.as_ref().expect("a set"), c.0.as_ref().expect("a set"));
        assert!(std::ptr::eq(sa.keys(), sc.keys()));
        assert!(ArcStr::ptr_eq(&sa.values()[0], &sc.values()[0]));
        assert!(Labels::new().ptr_eq(&set(&[])));
        assert_eq!(Labels::new().set_bytes(), 0);
        assert_eq!(a.set_bytes(), 24 + 2 * 8);
        assert!(a < c || c < a);
    }

    #[test]
    fn a_set_like_the_last_one_shares_its_strings_in_any_order() {
        // Made one after the other, as a listing makes them: the second
        // takes the first one's strings where they repeat, whatever the
        // order or a key given twice.
        let a = set(&[
            ("lookout.t.a", "1"),
            ("lookout.t.b", "2"),
            ("lookout.t.c", "3"),
        ]);
        let b = set(&[
            ("lookout.t.a", "1"),
            ("lookout.t.b", "9"),
            ("lookout.t.c", "3"),
        ]);
        let again = set(&[
            ("lookout.t.c", "3"),
            ("lookout.t.b", "0"),
            ("lookout.t.a", "1"),
            ("lookout.t.b", "9"),
        ]);
        assert!(b.ptr_eq(&again), "{b:?} {again:?}");
        assert!(!a.ptr_eq(&b));
        assert_eq!(b.get("lookout.t.b"), Some("9"));
        let (sa, sb) = (a.0.as_ref().expect("a set"), b.0.as_ref().expect("a set"));
        assert!(std::ptr::eq(sa.keys(), sb.keys()));
        assert!(ArcStr::ptr_eq(&sa.values()[0], &sb.values()[0]));
        assert!(ArcStr::ptr_eq(&sa.values()[2], &sb.values()[2]));
        // A value equal to another key's is the same string, not confused
        // with it: the set differs.
        let c = set(&[
            ("lookout.t.a", "3"),
            ("lookout.t.b", "9"),
            ("lookout.t.c", "1"),
        ]);
        assert_ne!(c, b);
        assert_eq!(c.get("lookout.t.a"), Some("3"));
    }

    #[test]
    fn the_interner_forgets_what_no_set_holds() {
        // Sets only this test makes, dropped at once: the interner may hold
        // them until its next sweep, never more than twice what lives.
        let kept: Vec<Labels> = (0..100)
            .map(|i| set(&[("lookout.test.kept", &format!("k{i}"))]))
            .collect();
        for i in 0..20 * MIN_SWEEP {
            drop(set(&[("lookout.test.gone", &format!("g{i}"))]));
        }
        let interner = INTERNER.lock().unwrap_or_else(PoisonError::into_inner);
        let held = interner.held();
        assert!(
            held <= 2 * interner.live && interner.live < 8 * MIN_SWEEP,
            "holds {held}, live {}",
            interner.live
        );
        let strings = interner.strings.as_ref().expect("strings");
        assert!(strings.contains("k99"), "a string a live set holds stays");
        drop(interner);
        assert_eq!(kept[99].get("lookout.test.kept"), Some("k99"));
    }
}
