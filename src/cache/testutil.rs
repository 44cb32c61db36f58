//! Objects for tests, built through the same constructors as the upstream's.

use std::sync::Arc;

use bytes::Bytes;

use super::object::CachedObject;

/// A configmap JSON list item (cluster-scoped "namespaces" objects when `ns` is empty).
pub fn cm(ns: &str, name: &str, rv: u64, labels: &[(&str, &str)]) -> Arc<CachedObject> {
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    let ns_member = if ns.is_empty() { String::new() } else { format!(r#","namespace":{ns:?}"#) };
    let body = format!(
        r#"{{"metadata":{{"name":{name:?}{ns_member},"resourceVersion":"{rv}","labels":{{{}}}}},"data":{{"k":"v{rv}"}}}}"#,
        labels.join(",")
    );
    let resource = if ns.is_empty() { "namespaces" } else { "configmaps" };
    Arc::new(CachedObject::from_json_item("", resource, Bytes::from(body)).unwrap())
}

/// A pod JSON list item on `node`.
pub fn pod(ns: &str, name: &str, rv: u64, node: &str) -> Arc<CachedObject> {
    labeled_pod(ns, name, rv, node, &[])
}

/// A pod JSON list item on `node`, with labels.
pub fn labeled_pod(
    ns: &str,
    name: &str,
    rv: u64,
    node: &str,
    labels: &[(&str, &str)],
) -> Arc<CachedObject> {
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    let body = format!(
        r#"{{"metadata":{{"name":{name:?},"namespace":{ns:?},"resourceVersion":"{rv}","labels":{{{}}}}},"spec":{{"nodeName":{node:?}}},"status":{{"phase":"Running"}}}}"#,
        labels.join(",")
    );
    Arc::new(CachedObject::from_json_item("", "pods", Bytes::from(body)).unwrap())
}

/// The keys of objects, in order.
pub fn keys<'a>(objects: impl IntoIterator<Item = &'a Arc<CachedObject>>) -> Vec<String> {
    objects.into_iter().map(|o| o.key.to_string()).collect()
}

/// The core group's configmaps, as discovery describes them.
pub fn configmaps_info() -> Arc<crate::wire::resource::ResourceInfo> {
    Arc::new(crate::wire::resource::ResourceInfo {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        kind: "ConfigMap".into(),
        namespaced: true,
        verbs: ["get", "list", "watch"].map(String::from).to_vec(),
    })
}
