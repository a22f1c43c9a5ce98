//! The leases of [`Client`]: a grant, and one renewal
//! (`/v3/lease/keepalive`, a stream of which the first answer is read).

use bytes::{Bytes, BytesMut};
use http_body_util::Full;
use serde_json::json;

use super::auth::USER_EMPTY;
use super::connection::Client;
use super::wire::{GatewayError, LeaseGrant};
use crate::error::EtcdError;

impl Client {
    /// Grants a lease of `ttl` seconds.
    pub async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, EtcdError> {
        self.unary("/v3/lease/grant", &json!({ "TTL": ttl.to_string() }))
            .await
    }

    /// Renews lease `id` once (`POST /v3/lease/keepalive`, a stream of which
    /// the first answer is read); its remaining TTL in seconds (0: the lease
    /// is gone).
    pub async fn lease_keepalive(&self, id: i64) -> Result<i64, EtcdError> {
        #[derive(serde::Deserialize)]
        struct KeepAlive {
            #[serde(default)]
            result: Option<LeaseGrant>,
            #[serde(default)]
            error: Option<GatewayError>,
        }
        let path = "/v3/lease/keepalive";
        let body = Bytes::from(json!({ "ID": id.to_string() }).to_string());
        let body = &body;
        self.authed(|| {
            self.failover(path, move |i| {
                let body = body.clone();
                async move {
                    let endpoint = self.endpoints()[i].to_string();
                    let read = async {
                        let mut ex = self
                            .send(i, http::Method::POST, path, Full::new(body))
                            .await?;
                        let mut all = BytesMut::new();
                        while !all.contains(&b'\n') {
                            match ex.chunk().await {
                                Some(Ok(chunk)) if all.len() < 64 * 1024 => {
                                    all.extend_from_slice(&chunk);
                                }
                                Some(Ok(_)) | None => break,
                                Some(Err(source)) => {
                                    return Err(EtcdError::Http {
                                        endpoint: endpoint.clone(),
                                        path: path.to_owned(),
                                        source: Box::new(source),
                                    });
                                }
                            }
                        }
                        Ok(all)
                    };
                    let all = self.bounded(&endpoint, path, read).await?;
                    let line = all[..].split(|b| *b == b'\n').next().unwrap_or_default();
                    let k: KeepAlive =
                        serde_json::from_slice(line).map_err(|source| EtcdError::Decode {
                            endpoint: endpoint.clone(),
                            path: path.to_owned(),
                            source,
                        })?;
                    match (k.result, k.error) {
                        (_, Some(e)) if e.message.contains(USER_EMPTY) => {
                            Err(EtcdError::AuthRequired {
                                endpoint,
                                path: path.to_owned(),
                                message: e.message,
                            })
                        }
                        (_, Some(e)) => Err(EtcdError::WatchError {
                            endpoint,
                            code: e.code,
                            message: e.message,
                        }),
                        (Some(r), None) => Ok(r.ttl),
                        (None, None) => Ok(0),
                    }
                }
            })
        })
        .await
    }
}
