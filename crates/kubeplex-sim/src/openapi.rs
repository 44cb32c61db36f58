//! OpenAPI v3 documents, as far as clients need them to talk to the sim.
//!
//! kubectl reads `/openapi/v3` before `create` and `apply`: it validates manifests on the
//! server (`fieldValidation=Strict`) when the group-version's document shows a PATCH operation
//! for the kind that takes the `fieldValidation` query parameter, and otherwise insists on
//! downloading schemas for client-side validation. The sim publishes that part of the real
//! documents — every resource's paths with their GVK extension and parameters — and no
//! schemas; kubectl then builds strategic merge patches from its compiled-in types, as it does
//! for any resource without a published schema.

use serde_json::{json, Map, Value};

use super::kinds::Kind;
use super::server::SimState;

/// The group-version path of a kind in `/openapi/v3` (`api/v1`, `apis/{g}/{v}`).
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Stable per-document hash, so clients may cache by it as they do with the apiserver's.
fn hash(doc: &[u8]) -> String {
    // FNV-1a is enough for a cache key; the apiserver uses a SHA-512 prefix.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in doc {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `GET /openapi/v3`: the index of group-version documents.
pub fn index(state: &SimState) -> Vec<u8> {
    let mut gvs: Vec<(String, String)> =
        state.kinds().map(|k| (k.group.clone(), k.version.clone())).collect();
    gvs.sort();
    gvs.dedup();
    let mut paths = Map::new();
    for (g, v) in gvs {
        let p = gv_path(&g, &v);
        let doc = document(state, &g, &v).unwrap_or_default();
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&doc))}),
        );
    }
    serde_json::to_vec(&json!({"paths": paths})).unwrap_or_default()
}

fn query_param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(kind: &Kind, action: &str, params: &[&str]) -> Value {
    json!({
        "operationId": format!("{action}{}", kind.kind),
        "parameters": params.iter().map(|p| query_param(p)).collect::<Vec<_>>(),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
    })
}

/// `GET /openapi/v3/{api/v1 | apis/g/v}`: paths of every served resource.
pub fn document(state: &SimState, group: &str, version: &str) -> Option<Vec<u8>> {
    let mut kinds: Vec<_> =
        state.kinds().filter(|k| k.group == group && k.version == version).collect();
    if kinds.is_empty() {
        return None;
    }
    kinds.sort_by(|a, b| a.resource.cmp(&b.resource));
    let write_params = ["dryRun", "fieldManager", "fieldValidation", "force"];
    let mut paths = Map::new();
    let prefix = format!("/{}", gv_path(group, version));
    for k in kinds {
        let collection = if k.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", k.resource)
        } else {
            format!("{prefix}/{}", k.resource)
        };
        paths.insert(
            collection.clone(),
            json!({
                "get": operation(k, "list", &["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch", "watch"]),
                "post": operation(k, "post", &write_params),
                "parameters": [query_param("pretty")],
            }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(k, "get", &[]),
                "put": operation(k, "put", &write_params),
                "patch": operation(k, "patch", &write_params),
                "delete": operation(k, "delete", &["dryRun", "gracePeriodSeconds"]),
                // kubectl's query-parameter check looks here as well as on the operation.
                "parameters": write_params.iter().map(|p| query_param(p)).collect::<Vec<_>>(),
            }),
        );
    }
    let doc = json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.36.2"},
        "paths": paths,
        "components": {"schemas": {}},
    });
    serde_json::to_vec(&doc).ok()
}

/// Routes `/openapi/v3[/...]`.
pub fn handle(state: &SimState, path: &str) -> Option<Vec<u8>> {
    let rest = path.strip_prefix("/openapi/v3")?;
    if rest.is_empty() || rest == "/" {
        return Some(index(state));
    }
    let rest = rest.trim_start_matches('/');
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["api", v] => document(state, "", v),
        ["apis", g, v] => document(state, g, v),
        _ => None,
    }
}
