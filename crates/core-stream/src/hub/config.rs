//! The knobs of a hub: [`HubConfig`].

/// Knobs of a [`Hub`](crate::Hub).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HubConfig {
    /// How many items a subscription may be behind before it lags (it then
    /// gets the difference to the present instead of the items). The items
    /// are shared: the hub keeps this many in all, not per subscription.
    /// Default 1024; at least 1.
    pub queue: usize,
    /// Labels every metric of this hub carries besides its own (none by
    /// default): one hub per source of a [`Merge`](crate::Merge), each
    /// with `host=NAME`, keeps the series of the sources apart.
    pub(super) metric_labels: Vec<(&'static str, String)>,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            queue: 1024,
            metric_labels: Vec::new(),
        }
    }
}

impl HubConfig {
    /// Sets [`queue`](Self::queue).
    #[must_use]
    pub fn queue(mut self, queue: usize) -> Self {
        self.queue = queue.max(1);
        self
    }

    /// Adds the label `key=value` to every metric of the hub (see
    /// [`metric_labels`](Self#structfield.metric_labels)).
    #[must_use]
    pub fn metric_label(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metric_labels.push((key, value.into()));
        self
    }
}
