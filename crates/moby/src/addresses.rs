//! [`CompatDial::addresses`]: the engine's list read once more, for where
//! each object can be reached ([`protocol::addresses`]), on a connection of
//! its own. Asked by a config renderer after a burst of changes (as
//! docker-gen lists on each), never by the watch: a run that does not ask
//! makes no such request.

use std::collections::BTreeMap;

use crate::api::Api;
use crate::compat_dial::CompatDial;
use crate::error::CompatError;
use crate::http;
use crate::inspect::INSPECT_TIMEOUT;
use crate::protocol::addresses::{Addresses, decode};
use crate::protocol::objects::Objects;
use crate::protocol::requests::{MAX_LIST, list_path};

impl<O: Objects> CompatDial<O> {
    /// Where each object the dial watches (its labels filter applied) can be
    /// reached now, by instance id: one `GET` of the objects' list, within
    /// 30 s. `Err` when the engine cannot be reached or answers no list.
    pub async fn addresses(&self) -> Result<BTreeMap<String, Addresses>, CompatError> {
        let path = list_path(self.objects.list_path(false), &self.scope.labels, None);
        let name = http::strip_query(&path).to_owned();
        let api = Api::new(self.endpoint.host.clone(), self.endpoint.tls.clone())
            .hint(self.endpoint.hint)
            .versioned(self.api_version);
        let read = async {
            let exchange = http::get(&api, &path).await?.ok(&name).await?;
            let body = exchange.body(&name, MAX_LIST).await?;
            decode(&body).map_err(|reason| CompatError::List {
                path: name.clone(),
                reason,
            })
        };
        tokio::time::timeout(INSPECT_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| {
                Err(CompatError::Timeout {
                    path: name.clone(),
                    after: INSPECT_TIMEOUT,
                })
            })
    }
}
