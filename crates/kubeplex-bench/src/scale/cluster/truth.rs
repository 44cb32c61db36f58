//! What the apiserver holds at the end of a run, as the watchers should hold it: listed once,
//! in pages, by the admin.

use std::collections::{BTreeMap, HashMap};

use anyhow::bail;
use http::{Method, StatusCode};
use serde_json::Value;

use crate::target::Target;

/// What the apiserver holds now, as the watchers should: for each scope, `namespace/name` →
/// resourceVersion.
pub struct Truth {
    pods_by_node: HashMap<String, BTreeMap<String, u64>>,
    nodes: BTreeMap<String, u64>,
    /// The cluster-wide scopes, by collection and selectors.
    whole: HashMap<String, BTreeMap<String, u64>>,
}

impl Truth {
    /// Lists the pods and nodes once, and each of `scopes` (paths with their selectors).
    pub async fn read(admin: &Target, scopes: &[String]) -> anyhow::Result<Truth> {
        let mut pods_by_node: HashMap<String, BTreeMap<String, u64>> = HashMap::new();
        for p in list(admin, "/api/v1/pods").await? {
            let node = p.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
            pods_by_node.entry(node.to_string()).or_default().insert(key(&p), rv(&p));
        }
        let nodes = list(admin, "/api/v1/nodes").await?.iter().map(|n| (key(n), rv(n))).collect();
        let mut whole = HashMap::new();
        for s in scopes {
            let items = list(admin, s).await?.iter().map(|o| (key(o), rv(o))).collect();
            whole.insert(s.clone(), items);
        }
        Ok(Truth { pods_by_node, nodes, whole })
    }

    pub fn node_pods(&self, node: &str) -> BTreeMap<String, u64> {
        self.pods_by_node.get(node).cloned().unwrap_or_default()
    }

    pub fn node(&self, node: &str) -> BTreeMap<String, u64> {
        let key = format!("/{node}");
        self.nodes.get(&key).map(|rv| [(key, *rv)].into()).unwrap_or_default()
    }

    pub fn whole(&self, scope: &str) -> Option<&BTreeMap<String, u64>> {
        self.whole.get(scope)
    }
}

/// Every object `path` lists, in pages as client-go's pager reads them (a whole list of 150,000
/// pods at once is more than the apiserver answers in time on a busy machine).
/// How many times a page the apiserver answered 429 or 5xx, or whose answer broke off, is asked
/// again (waits 1 s, doubling).
const PAGE_ATTEMPTS: usize = 5;

async fn list(admin: &Target, path: &str) -> anyhow::Result<Vec<Value>> {
    const PAGE: usize = 5_000;
    const MAX_PAGES: usize = 1_000;
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut items = Vec::new();
    let mut next = format!("{path}{sep}limit={PAGE}");
    for _ in 0..MAX_PAGES {
        // An apiserver still busy with the run answers 429 or 5xx (a page's 504 after 60 s),
        // or resets the stream ("unexpected internal error encountered", after 45 min of
        // 1,000 Cilium agents' watches directly): asked again, a few times, as a client would.
        let mut wait = std::time::Duration::from_secs(1);
        let mut attempts = 0;
        let (status, body) = loop {
            let got = admin.fetch(Method::GET, &next, &[], None).await;
            let again = match &got {
                Ok((status, _)) => {
                    *status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
                }
                Err(_) => true,
            };
            if !again || attempts == PAGE_ATTEMPTS {
                break got?;
            }
            match &got {
                Ok((status, _)) => tracing::warn!(%status, "the apiserver's objects: asking again"),
                Err(e) => tracing::warn!(error = %e, "the apiserver's objects: asking again"),
            }
            attempts += 1;
            tokio::time::sleep(wait).await;
            wait *= 2;
        };
        if !status.is_success() {
            bail!("GET {next}: {status}");
        }
        let mut v: Value = serde_json::from_slice(&body)?;
        if let Some(Value::Array(page)) = v.get_mut("items").map(Value::take) {
            items.extend(page);
        }
        match v.pointer("/metadata/continue").and_then(Value::as_str).filter(|c| !c.is_empty()) {
            Some(token) => {
                let token: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
                next = format!("{path}{sep}limit={PAGE}&continue={token}");
            }
            None => return Ok(items),
        }
    }
    bail!("GET {path}: more than {MAX_PAGES} pages")
}

fn key(o: &Value) -> String {
    let m = &o["metadata"];
    format!("{}/{}", m["namespace"].as_str().unwrap_or(""), m["name"].as_str().unwrap_or(""))
}

fn rv(o: &Value) -> u64 {
    o.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
