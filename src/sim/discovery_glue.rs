//! Discovery documents for the served kinds.

use serde_json::{json, Value};

use super::server::SimState;

pub fn api_versions(state: &SimState) -> Option<Vec<u8>> {
    let v = json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": state.addr.to_string()}]});
    serde_json::to_vec(&v).ok()
}

pub fn resource_list(state: &SimState, group: &str, version: &str) -> Option<Vec<u8>> {
    let mut kinds: Vec<_> =
        state.registry.all().filter(|k| k.group == group && k.version == version).collect();
    if kinds.is_empty() {
        return None;
    }
    kinds.sort_by(|a, b| a.resource.cmp(&b.resource));
    let mut resources = Vec::new();
    for k in kinds {
        resources.push(json!({"name": k.resource, "singularName": k.kind.to_lowercase(),
            "namespaced": k.namespaced, "kind": k.kind, "verbs": k.verbs}));
        for s in &k.subresources {
            resources.push(json!({"name": format!("{}/{s}", k.resource), "singularName": "",
                "namespaced": k.namespaced, "kind": k.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    let v = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources});
    serde_json::to_vec(&v).ok()
}

fn group_value(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

fn groups(state: &SimState) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for k in state.registry.all().filter(|k| !k.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == k.group) {
            Some((_, vs)) if !vs.contains(&k.version) => vs.push(k.version.clone()),
            Some(_) => {}
            None => out.push((k.group.clone(), vec![k.version.clone()])),
        }
    }
    out.sort();
    out
}

pub fn group_list(state: &SimState) -> Option<Vec<u8>> {
    let gs: Vec<Value> = groups(state).iter().map(|(g, vs)| group_value(g, vs)).collect();
    serde_json::to_vec(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})).ok()
}

pub fn group(state: &SimState, group: &str) -> Option<Vec<u8>> {
    let (g, vs) = groups(state).into_iter().find(|(g, _)| g == group)?;
    let mut v = group_value(&g, &vs);
    if let Some(o) = v.as_object_mut() {
        o.insert("kind".into(), json!("APIGroup"));
        o.insert("apiVersion".into(), json!("v1"));
    }
    serde_json::to_vec(&v).ok()
}
