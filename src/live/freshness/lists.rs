//! The consistent lists the proofs send, metadata only: the `limit=1` list whose RV is the
//! upstream's current one (sent by the clock, `Freshness::current_rv`), and the list of a
//! cache's scope, or of one namespace of it ([`Listed`]); and the GET request they and the
//! probe's watch are.

use std::sync::Arc;
use std::time::Duration;

use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};

use super::clock;
use super::metadata_list::{Listed, MetadataList};
use super::Freshness;
use crate::cache::CachedObject;
use crate::upstream::UpstreamBody;

/// How long the `limit=1` list may take before it counts as failed (the readers waiting on it
/// pass through; a later read sends a new one).
const RV_LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an overloaded answer to a proof list says the upstream is overloaded.
const OVERLOAD_MEMORY: Duration = Duration::from_secs(5);
/// Largest body of the `limit=1` list (one PartialObjectMetadata item).
const MAX_RV_LIST: usize = 16 << 20;
/// Metadata only, JSON: the probe needs RVs, not objects.
const ACCEPT_METADATA: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
pub(super) const ACCEPT_METADATA_WATCH: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

impl Freshness {
    /// A consistent list of the cache's scope, or of `namespace` in it, metadata only. `None`
    /// when it failed.
    pub(super) async fn fetch_metadata_list(&self, namespace: Option<String>) -> Option<Listed> {
        let cache = self.cache.upgrade()?;
        self.calls.proof_list.inc();
        // Narrower than the cache only where the cache holds every namespace of its resource.
        let namespace =
            namespace.filter(|_| cache.info().namespaced && cache.scope().namespace().is_none());
        let collection = match &namespace {
            Some(ns) => cache.info().namespaced_collection_path(ns),
            None => cache.collection_path(),
        };
        let selectors = cache.selector_query();
        let path = match selectors.strip_prefix('&') {
            Some(q) => format!("{collection}?{q}"),
            None => collection,
        };
        drop(cache);
        let list = self.metadata_list_of(&path).await?;
        let items = list.items.unwrap_or_default();
        let mut objects = std::collections::HashMap::with_capacity(items.len());
        for item in items {
            let m = item.metadata;
            let rv = m.resource_version.parse().ok()?;
            objects.insert(CachedObject::key_for(&m.namespace, &m.name), rv);
        }
        Some(Listed { rv: list.metadata.resource_version.parse().ok()?, namespace, objects })
    }

    /// This cache's consistent `limit=1` list, to be sent by the clock.
    pub(super) fn fetch(self: &Arc<Self>) -> clock::Fetch {
        let this = self.clone();
        Box::new(move || Box::pin(async move { this.fetch_current_rv().await }))
    }

    async fn fetch_current_rv(&self) -> Option<u64> {
        let cache = self.cache.upgrade()?;
        self.calls.proof_list.inc();
        let path = format!("{}?limit=1", cache.collection_path());
        drop(cache);
        let list = self.metadata_list_of(&path).await?;
        list.metadata.resource_version.parse().ok()
    }

    /// A consistent list of `path`, metadata only (`PartialObjectMetadataList`), within
    /// [`RV_LIST_TIMEOUT`]: a hung upstream must not hold the turn of every later proof.
    /// `None` when it failed.
    async fn metadata_list_of(&self, path: &str) -> Option<MetadataList> {
        let req = request(path, ACCEPT_METADATA)?;
        let fetch = async {
            let resp = self.upstream.send(req).await.ok()?;
            if resp.status() != StatusCode::OK {
                tracing::debug!(status = %resp.status(), path, "a proof's list refused");
                if matches!(resp.status().as_u16(), 429 | 503 | 504) {
                    self.overloaded();
                }
                return None;
            }
            http_body_util::Limited::new(resp.into_body(), MAX_RV_LIST).collect().await.ok()
        };
        let Ok(body) = tokio::time::timeout(RV_LIST_TIMEOUT, fetch).await else {
            self.overloaded();
            return None;
        };
        MetadataList::parse(&body?.to_bytes())
    }

    /// The upstream answered a proof list 429, 503 or 504, or not in time: overloaded — for
    /// every cache's proofs ([`Clock::overloaded`]).
    fn overloaded(&self) {
        self.clock.overloaded();
    }

    /// Whether the upstream was overloaded a moment ago ([`OVERLOAD_MEMORY`]), whichever
    /// cache's proof met it.
    pub(super) fn overloaded_recently(&self) -> bool {
        self.clock.overloaded_within(OVERLOAD_MEMORY)
    }
}

pub(super) fn request(path: &str, accept: &'static str) -> Option<Request<UpstreamBody>> {
    Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(header::ACCEPT, accept)
        .header(header::USER_AGENT, concat!("kubeplex/", env!("CARGO_PKG_VERSION")))
        .body(Empty::new().map_err(|never| match never {}).boxed())
        .ok()
}
