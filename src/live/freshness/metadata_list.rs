//! A consistent metadata list (`PartialObjectMetadataList`) as the proofs read it, and what one
//! of a cache's scope showed ([`Listed`]): the upstream's RV and each object's, against which a
//! cache's state is checked.

use crate::cache::CachedObject;

/// A `PartialObjectMetadataList`, as far as the proofs read it. The apiserver writes the items
/// of an empty one as `null` (a nil Go slice).
#[derive(serde::Deserialize)]
pub(super) struct MetadataList {
    pub(super) metadata: Meta,
    #[serde(default)]
    pub(super) items: Option<Vec<MetadataItem>>,
}

impl MetadataList {
    pub(super) fn parse(body: &[u8]) -> Option<MetadataList> {
        serde_json::from_slice(body).ok()
    }
}

#[derive(serde::Deserialize)]
pub(super) struct MetadataItem {
    pub(super) metadata: Meta,
}

#[derive(serde::Deserialize)]
pub(super) struct Meta {
    #[serde(default)]
    pub(super) namespace: String,
    #[serde(default)]
    pub(super) name: String,
    #[serde(rename = "resourceVersion", default)]
    pub(super) resource_version: String,
}

/// What a consistent metadata list of a cache's scope — or of one namespace of it — showed:
/// the upstream's RV, and every object's (by `namespace/name` key).
pub(super) struct Listed {
    pub(super) rv: u64,
    /// The namespace listed, `None` for the cache's whole scope.
    pub(super) namespace: Option<String>,
    pub(super) objects: std::collections::HashMap<String, u64>,
}

impl Listed {
    /// Whether it shows the state a read of `namespace` (`None`: of every one) needs.
    pub(super) fn covers(&self, namespace: Option<&str>) -> bool {
        self.namespace.is_none() || self.namespace.as_deref() == namespace
    }

    /// Whether `snap` holds the listed state or a newer one, in what was listed: every listed
    /// object at its listed RV or later, and nothing else but objects newer than the list
    /// (created after it).
    pub(super) fn held_by(&self, snap: &crate::cache::Snapshot) -> bool {
        let items = snap.items();
        let listed_here =
            |o: &CachedObject| self.namespace.as_ref().is_none_or(|ns| *ns == o.namespace());
        self.objects
            .iter()
            .all(|(key, rv)| items.get(key.as_str()).is_some_and(|o| o.resource_version >= *rv))
            && items.iter().filter(|(_, o)| listed_here(o)).all(|(key, o)| {
                self.objects.contains_key(key.as_str()) || o.resource_version > self.rv
            })
    }
}
