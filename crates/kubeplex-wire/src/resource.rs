//! One resource type as the apiserver's discovery describes it: the descriptor every layer
//! (caches, serving, the fake apiserver's clients) names a resource by, and the wire encoding a
//! cache of it holds.

/// The wire encoding a cache holds its objects in; one store per (resource, encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// JSON list items (built-in kinds without `kind`/`apiVersion`, custom resources with them).
    Json,
    /// Bare protobuf messages, as list items and watch envelopes carry them.
    Protobuf,
}

impl Encoding {
    /// The name used in metrics labels and configuration (`pods:protobuf`).
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::Protobuf => "protobuf",
        }
    }

    /// The `Accept` value that asks the upstream for this encoding.
    pub fn media_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }
}

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

    /// The collection path within one namespace (`/api/v1/namespaces/NS/pods`).
    pub fn namespaced_collection_path(&self, namespace: &str) -> String {
        if self.group.is_empty() {
            format!("/api/{}/namespaces/{namespace}/{}", self.version, self.resource)
        } else {
            format!(
                "/apis/{}/{}/namespaces/{namespace}/{}",
                self.group, self.version, self.resource
            )
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
