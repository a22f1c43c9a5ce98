//! `?label=K=V`: the label filter of `/events` and `/instances`.

use lookout_core::Labels;

/// `?label=K=V`…: all must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelFilter(pub(super) Vec<(String, String)>);

impl LabelFilter {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|have| have == v))
    }

    /// No pair: every instance.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same filter, its pairs sorted and once each.
    #[must_use]
    pub fn canonical(mut self) -> Self {
        self.0.sort();
        self.0.dedup();
        self
    }

    #[cfg(test)]
    pub fn of(pairs: &[(&str, &str)]) -> Self {
        Self(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }
}
