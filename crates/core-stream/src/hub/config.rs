//! The knobs of a hub: [`HubConfig`].

/// Knobs of a [`Hub`](crate::Hub).
///
/// Set what differs from the default with the builder methods.
#[derive(Clone, Debug)]
pub struct HubConfig {
    /// See [`HubConfig::queue`].
    pub(super) queue: usize,
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
    /// Sets how many items a subscription may be behind before it lags (it
    /// then gets the difference to the present instead of the items). The
    /// items are shared: the hub keeps this many in all, not per
    /// subscription. Default 1024; at least 1.
    #[must_use]
    pub fn queue(mut self, queue: usize) -> Self {
        self.queue = queue.max(1);
        self
    }

    /// Adds the label `key=value` to every metric of the hub, besides its
    /// own (none by default): one hub per source of a
    /// [`Merge`](crate::Merge), each with `host=NAME`, keeps the series of
    /// the sources apart.
    #[must_use]
    pub fn metric_label(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metric_labels.push((key, value.into()));
        self
    }

    /// How many items a subscription may be behind before it lags.
    pub fn get_queue(&self) -> usize {
        self.queue
    }
}
