//! What the upstream serves, learned from its discovery documents: resource ↔ kind,
//! group/version, scope, verbs. Fetched per group-version on first use and refreshed after a
//! while, so resources added to the cluster (CRDs) are found without a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};

use crate::upstream::{Upstream, UpstreamBody};

/// How long a group-version's discovery document is trusted before it is fetched again.
const DISCOVERY_TTL: Duration = Duration::from_secs(300);
/// Discovery documents are small; refuse anything absurd.
const MAX_DISCOVERY_BYTES: usize = 16 * 1024 * 1024;

pub use crate::wire::resource::ResourceInfo;

struct Entry {
    fetched: Instant,
    resources: HashMap<String, Arc<ResourceInfo>>,
}

/// Discovery cache over the upstream.
pub struct Resources {
    upstream: Arc<Upstream>,
    by_gv: Mutex<HashMap<(String, String), Entry>>,
}

impl Resources {
    pub fn new(upstream: Arc<Upstream>) -> Self {
        Resources { upstream, by_gv: Mutex::new(HashMap::new()) }
    }

    /// The resource, if the upstream serves it (a failed discovery fetch counts as "unknown":
    /// the request is then passed through, which is always safe).
    pub async fn lookup(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<ResourceInfo>> {
        let key = (group.to_string(), version.to_string());
        {
            let map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = map.get(&key).filter(|e| e.fetched.elapsed() < DISCOVERY_TTL) {
                return e.resources.get(resource).cloned();
            }
        }
        // A group-version the upstream does not serve is remembered as empty, so unknown paths
        // cost one discovery call per TTL, not one per request; transport errors are not.
        let resources = self.fetch(group, version).await?;
        let found = resources.get(resource).cloned();
        self.by_gv
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, Entry { fetched: Instant::now(), resources });
        found
    }

    /// The resource if its discovery document is already known (never fetches: for labelling
    /// metrics, where a request's path must not cause upstream calls).
    pub fn known(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        let map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(group.to_string(), version.to_string()))?.resources.get(resource).cloned()
    }

    async fn fetch(
        &self,
        group: &str,
        version: &str,
    ) -> Option<HashMap<String, Arc<ResourceInfo>>> {
        let path = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let body: UpstreamBody = Empty::new().map_err(|never| match never {}).boxed();
        let req = Request::builder()
            .method(Method::GET)
            .uri(&path)
            .header(header::ACCEPT, "application/json")
            .body(body)
            .ok()?;
        let resp = self.upstream.send(req).await.ok()?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Some(HashMap::new());
        }
        if resp.status() != StatusCode::OK {
            return None;
        }
        let bytes = http_body_util::Limited::new(resp.into_body(), MAX_DISCOVERY_BYTES)
            .collect()
            .await
            .ok()?
            .to_bytes();
        Some(parse_resource_list(group, version, &bytes))
    }
}

/// Parses an `APIResourceList`; subresources (`pods/status`) are not resources of their own.
pub fn parse_resource_list(
    group: &str,
    version: &str,
    body: &[u8],
) -> HashMap<String, Arc<ResourceInfo>> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        resources: Vec<Res>,
    }
    #[derive(serde::Deserialize)]
    struct Res {
        name: String,
        #[serde(default)]
        kind: String,
        #[serde(default)]
        namespaced: bool,
        #[serde(default)]
        verbs: Vec<String>,
    }
    let Ok(list) = serde_json::from_slice::<List>(body) else { return HashMap::new() };
    list.resources
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| {
            let info = ResourceInfo {
                group: group.to_string(),
                version: version.to_string(),
                resource: r.name.clone(),
                kind: r.kind,
                namespaced: r.namespaced,
                verbs: r.verbs,
            };
            (r.name, Arc::new(info))
        })
        .collect()
}

#[cfg(test)]
mod tests;
