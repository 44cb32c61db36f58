//! The resource types the fake apiserver serves, keyed by (group, resource) — the storage, one
//! per resource — and by (group, version, resource): a custom resource may be served at more
//! than one version, each a view of the same stored objects (see [`Registry::at`]).

use std::collections::HashMap;
use std::sync::Arc;

use super::discovery;

/// Everything the sim's handlers need to know about one served resource type.
#[derive(Debug, Clone)]
pub struct Kind {
    /// `group/resource` (`/configmaps` for the core group): the store's key, the same for every
    /// version of the resource.
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
    /// The first version of each resource in the table: where its objects are stored.
    by_resource: HashMap<(String, String), Arc<Kind>>,
    by_version: HashMap<(String, String, String), Arc<Kind>>,
    by_kind: HashMap<(String, String), Arc<Kind>>,
}

impl Registry {
    /// The served set: what the discovery documents advertise.
    pub fn builtin() -> Registry {
        let mut reg = Registry::default();
        for r in discovery::builtin() {
            let api_version = if r.group.is_empty() {
                r.version.to_string()
            } else {
                format!("{}/{}", r.group, r.version)
            };
            let kind = Arc::new(Kind {
                key: format!("{}/{}", r.group, r.resource),
                group: r.group.into(),
                version: r.version.into(),
                resource: r.resource.into(),
                kind: r.kind.into(),
                namespaced: r.namespaced,
                api_version,
                protobuf: r.protobuf,
                custom: r.custom,
                // Registry strategies that set metadata.generation: pods (1.36),
                // endpointslices, deployments and replicasets, and every custom resource.
                generation: r.custom
                    || matches!(
                        r.resource,
                        "pods" | "endpointslices" | "deployments" | "replicasets"
                    ),
                verbs: r.verbs.iter().map(|v| v.to_string()).collect(),
                // Discovery lists `deployments/scale` (an autoscaling/v1 Scale); the sim does
                // not convert to Scale objects, so that path is a 404 rather than the
                // Deployment itself.
                subresources: r
                    .subresources
                    .iter()
                    .filter(|s| s.name != "scale")
                    .map(|s| s.name.to_string())
                    .collect(),
            });
            reg.by_kind.insert((kind.api_version.clone(), kind.kind.clone()), kind.clone());
            let version = (kind.group.clone(), kind.version.clone(), kind.resource.clone());
            reg.by_version.insert(version, kind.clone());
            reg.by_resource.entry((kind.group.clone(), kind.resource.clone())).or_insert(kind);
        }
        reg
    }

    /// The resource's storage kind (its first version).
    pub fn get(&self, group: &str, resource: &str) -> Option<&Arc<Kind>> {
        self.by_resource.get(&(group.to_string(), resource.to_string()))
    }

    /// The resource as `version` serves it: the same stored objects, each read with that
    /// version's `apiVersion` (a CRD's conversion strategy `None`: the apiserver rewrites
    /// `apiVersion` and nothing else; `object::json_as`).
    pub fn at(&self, group: &str, version: &str, resource: &str) -> Option<&Arc<Kind>> {
        self.by_version.get(&(group.to_string(), version.to_string(), resource.to_string()))
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&Arc<Kind>> {
        self.by_kind.get(&(api_version.to_string(), kind.to_string()))
    }

    /// Every resource's storage kind.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Kind>> {
        self.by_resource.values()
    }
}
