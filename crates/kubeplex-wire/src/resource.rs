//! One resource type as the apiserver's discovery describes it: the descriptor every layer
//! (caches, serving, the fake apiserver's clients) names a resource by.

/// One resource type as discovery describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The cluster-wide collection path (`/api/v1/pods`).
    pub fn collection_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}/{}", self.version, self.resource)
        } else {
            format!("/apis/{}/{}/{}", self.group, self.version, self.resource)
        }
    }

    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Built-in types have protobuf and typed (TypeMeta-less) list items; custom resources and
    /// aggregated APIs are treated as JSON-only and unstructured. Discovery does not say which
    /// is which, so the groups kube-apiserver itself serves are listed (CRDs can live under
    /// `*.k8s.io` too: Gateway API, volume snapshots).
    pub fn is_builtin(&self) -> bool {
        crate::groups::is_builtin(&self.group)
    }

    /// Label for metrics: `resource` or `resource.group`.
    pub fn label(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}
