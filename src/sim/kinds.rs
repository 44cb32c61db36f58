//! The resource types the fake apiserver serves, keyed by (group, resource).

use std::collections::HashMap;
use std::sync::Arc;

/// Everything the sim's handlers need to know about one served resource type.
#[derive(Debug, Clone)]
pub struct Kind {
    /// `group/resource` (`/configmaps` for the core group): the store's key.
    pub key: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
    /// `v1` or `group/version`, as objects carry it.
    pub api_version: String,
    /// Built-in types have a protobuf encoding; custom resources are JSON-only.
    pub protobuf: bool,
    /// Custom resources are stored unstructured: the apiserver writes their JSON with sorted
    /// keys (Go maps), not in struct order.
    pub custom: bool,
    /// Whether the registry strategy sets `metadata.generation` (pods in 1.36, custom
    /// resources, endpointslices) — configmaps, secrets and the like have none.
    pub generation: bool,
    pub verbs: Vec<String>,
    /// Subresources the sim serves on this resource (e.g. `status`).
    pub subresources: Vec<String>,
}

impl Kind {
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// All served kinds.
#[derive(Debug, Default)]
pub struct Registry {
    by_resource: HashMap<(String, String), Arc<Kind>>,
    by_kind: HashMap<(String, String), Arc<Kind>>,
}

impl Registry {
    /// The built-in set: what the discovery documents advertise.
    pub fn builtin() -> Registry {
        const RW: &[&str] =
            &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
        // (group, version, resource, kind, namespaced, protobuf, generation, subresources)
        type Row = (
            &'static str,
            &'static str,
            &'static str,
            &'static str,
            bool,
            bool,
            bool,
            &'static [&'static str],
        );
        let table: &[Row] = &[
            ("", "v1", "pods", "Pod", true, true, true, &["status"]),
            ("", "v1", "configmaps", "ConfigMap", true, true, false, &[]),
            ("", "v1", "secrets", "Secret", true, true, false, &[]),
            ("", "v1", "services", "Service", true, true, false, &["status"]),
            ("", "v1", "namespaces", "Namespace", false, true, false, &["status"]),
            ("", "v1", "nodes", "Node", false, true, false, &["status"]),
            ("", "v1", "events", "Event", true, true, false, &[]),
            ("", "v1", "endpoints", "Endpoints", true, true, false, &[]),
            ("", "v1", "serviceaccounts", "ServiceAccount", true, true, false, &[]),
            ("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, true, true, &[]),
            ("demo.kubeplex.io", "v1", "widgets", "Widget", true, false, true, &["status"]),
        ];
        let mut reg = Registry::default();
        for &(group, version, resource, kind, namespaced, protobuf, generation, subs) in table {
            let api_version =
                if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
            let verbs: Vec<String> = RW
                .iter()
                .filter(|v| !(resource == "namespaces" && **v == "deletecollection"))
                .map(|v| v.to_string())
                .collect();
            let kind = Arc::new(Kind {
                key: format!("{group}/{resource}"),
                group: group.into(),
                version: version.into(),
                resource: resource.into(),
                kind: kind.into(),
                namespaced,
                api_version,
                protobuf,
                custom: !protobuf,
                generation,
                verbs,
                subresources: subs.iter().map(|s| s.to_string()).collect(),
            });
            reg.by_kind.insert((kind.api_version.clone(), kind.kind.clone()), kind.clone());
            reg.by_resource.insert((kind.group.clone(), kind.resource.clone()), kind);
        }
        reg
    }

    pub fn get(&self, group: &str, resource: &str) -> Option<&Arc<Kind>> {
        self.by_resource.get(&(group.to_string(), resource.to_string()))
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&Arc<Kind>> {
        self.by_kind.get(&(api_version.to_string(), kind.to_string()))
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<Kind>> {
        self.by_resource.values()
    }
}
