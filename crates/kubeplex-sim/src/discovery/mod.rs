//! The fake apiserver's resource registry and its legacy discovery documents, byte for byte as
//! kube-apiserver 1.36 serves them to `Accept: application/json` (fixtures `discovery-api`,
//! `discovery-api-v1`, `discovery-apis`, `discovery-discovery-v1`).
//!
//! The sim serves fewer resources than a real cluster: each document lists only what the sim
//! has, and every entry it lists is the real one, byte for byte.
//!
//! | path              | document        | function               |
//! |-------------------|-----------------|------------------------|
//! | `/api`            | APIVersions     | [`api_versions`]       |
//! | `/api/v1`         | APIResourceList | [`api_resource_list`]  |
//! | `/apis`           | APIGroupList    | [`api_group_list`]     |
//! | `/apis/{g}`       | APIGroup        | [`api_group`]          |
//! | `/apis/{g}/{v}`   | APIResourceList | [`api_resource_list`]  |
//!
//! Clients first ask `/api` and `/apis` for aggregated discovery (`apidiscovery.k8s.io/v2`);
//! [`wants_aggregated`] tells from the `Accept` header which one to answer and [`aggregated`]
//! builds it (see that module for what it covers).
//!
//! Bodies end with `\n`, as the apiserver's JSON encoder writes them. A missing group or version
//! is `None`: the caller answers 404 as for any unknown path.

use std::collections::BTreeSet;

use serde::Serialize;

mod aggregated_doc;
mod builtin_table;
mod hash;
pub(crate) mod serve;

pub use aggregated_doc::{
    aggregated, negotiate, wants_aggregated, AggregatedDiscovery, DiscoveryFormat, DiscoveryRoot,
    AGGREGATED_CONTENT_TYPE,
};
pub use hash::storage_version_hash;

/// One served resource: everything discovery says about it, plus how the sim stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiResource {
    /// API group; `""` for the core (legacy) group served under `/api`.
    pub group: &'static str,
    pub version: &'static str,
    /// The plural, lower-case name used in paths (`pods`).
    pub resource: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// In the order discovery lists them (sorted for built-ins, fixed for CRDs).
    pub verbs: &'static [&'static str],
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub storage_version_hash: &'static str,
    /// Whether the type has a protobuf encoding; false for custom resources, which the
    /// apiserver serves as JSON even to clients asking protobuf first.
    pub protobuf: bool,
    /// Served by apiextensions (a CRD) rather than built in: no strategic merge patch, CRD
    /// verb order, CRD group priority.
    pub custom: bool,
    pub subresources: &'static [Subresource],
}

/// A subresource (`pods/status`), listed in `/api/v1` as its own entry `"<resource>/<name>"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    pub name: &'static str,
    /// Set only when the subresource's kind lives in another group-version (`pods/eviction`
    /// is `policy/v1 Eviction`); empty means the parent's.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub verbs: &'static [&'static str],
}

/// Every resource the sim can serve, in discovery order.
pub fn builtin() -> &'static [ApiResource] {
    builtin_table::RESOURCES
}

/// What the sim serves now: every resource of [`builtin`] but the custom resources withdrawn —
/// their CRD deleted, or their version no longer served (`Sim::delete_custom_resource_definition`,
/// `Sim::serve_custom_resource`) — and the versions a CRD does not serve (yet): widgets' `v2`
/// until `Sim::serve_custom_resource_version` adds it. A resource or version not served is in
/// no discovery document, and its paths answer `404 page not found`, as kube-apiserver 1.36
/// answers them (tests/fixtures/realcluster/custom/lifecycle.deleted.get.json,
/// lifecycle.unserved.get.json).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    /// `(group, resource)`: every version withdrawn.
    withdrawn: BTreeSet<(String, String)>,
    /// `(group, version, resource)`: one version not served.
    unserved: BTreeSet<(String, String, String)>,
}

/// Versions of the table the sim does not serve when it starts: a CRD's version that a test
/// adds later (`Sim::serve_custom_resource_version`).
const ADDED_LATER: &[(&str, &str, &str)] = &[("demo.kubeplex.io", "v2", "widgets")];

impl Served {
    /// What the sim serves when it starts: the table but [`ADDED_LATER`].
    pub fn initial() -> Served {
        let unserved =
            ADDED_LATER.iter().map(|(g, v, r)| (g.to_string(), v.to_string(), r.to_string()));
        Served { withdrawn: BTreeSet::new(), unserved: unserved.collect() }
    }

    pub fn withdraw(&mut self, group: &str, resource: &str) {
        self.withdrawn.insert((group.to_string(), resource.to_string()));
    }

    pub fn restore(&mut self, group: &str, resource: &str) {
        self.withdrawn.remove(&(group.to_string(), resource.to_string()));
    }

    /// Marks one version of a resource served or not.
    pub fn serve_version(&mut self, group: &str, version: &str, resource: &str, served: bool) {
        let key = (group.to_string(), version.to_string(), resource.to_string());
        match served {
            true => self.unserved.remove(&key),
            false => self.unserved.insert(key),
        };
    }

    /// Whether the resource is served at any version.
    pub fn serves_resource(&self, group: &str, resource: &str) -> bool {
        !self.withdrawn.iter().any(|(g, r)| g == group && r == resource)
    }

    pub fn serves(&self, group: &str, version: &str, resource: &str) -> bool {
        self.serves_resource(group, resource)
            && !self.unserved.iter().any(|(g, v, r)| g == group && v == version && r == resource)
    }

    /// Whether any resource of `group`/`version` is served (else no handler serves its
    /// paths: `404 page not found`).
    pub fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.resources().any(|r| r.group == group && r.version == version)
    }

    fn resources(&self) -> impl Iterator<Item = &'static ApiResource> + '_ {
        builtin().iter().filter(|r| self.serves(r.group, r.version, r.resource))
    }
}

/// The served resource at `/{api|apis/group}/{version}/{resource}`, if any.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static ApiResource> {
    builtin().iter().find(|r| r.group == group && r.version == version && r.resource == resource)
}

/// `GET /api`: the core group's versions, and the address clients reach the server at
/// (`host:port`), which the apiserver reports for every client network (`0.0.0.0/0`).
pub fn api_versions(served: &Served, server_address: &str) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ApiVersions<'a> {
        kind: &'a str,
        versions: Vec<&'a str>,
        #[serde(rename = "serverAddressByClientCIDRs")]
        server_address_by_client_cidrs: [ServerAddress<'a>; 1],
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ServerAddress<'a> {
        #[serde(rename = "clientCIDR")]
        client_cidr: &'a str,
        server_address: &'a str,
    }
    encode(&ApiVersions {
        kind: "APIVersions",
        versions: versions_of(served, ""),
        server_address_by_client_cidrs: [ServerAddress {
            client_cidr: "0.0.0.0/0",
            server_address,
        }],
    })
}

/// `GET /api/v1` (group `""`) or `GET /apis/{group}/{version}`. The core list carries no
/// `apiVersion`, unlike the others: the legacy handler leaves it unset.
pub fn api_resource_list(served: &Served, group: &str, version: &str) -> Option<Vec<u8>> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ApiResourceList<'a> {
        kind: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        api_version: &'a str,
        group_version: String,
        resources: Vec<ApiResourceJson<'a>>,
    }
    let resources: Vec<&ApiResource> =
        served.resources().filter(|r| r.group == group && r.version == version).collect();
    if resources.is_empty() {
        return None;
    }
    let mut entries = Vec::new();
    for r in resources {
        entries.push(ApiResourceJson::resource(r));
        entries.extend(r.subresources.iter().map(|s| ApiResourceJson::subresource(r, s)));
    }
    Some(encode(&ApiResourceList {
        kind: "APIResourceList",
        api_version: if group.is_empty() { "" } else { "v1" },
        group_version: group_version(group, version),
        resources: entries,
    }))
}

/// `GET /apis`: the groups served under `/apis`, in the aggregator's priority order.
pub fn api_group_list(served: &Served) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ApiGroupList<'a> {
        kind: &'a str,
        api_version: &'a str,
        groups: Vec<ApiGroupJson<'a>>,
    }
    let groups =
        served_groups(served).into_iter().map(|g| ApiGroupJson::new(served, "", "", g)).collect();
    encode(&ApiGroupList { kind: "APIGroupList", api_version: "v1", groups })
}

/// `GET /apis/{group}`. The core group is not served here (it lives at `/api`).
pub fn api_group(served: &Served, group: &str) -> Option<Vec<u8>> {
    if group.is_empty() || versions_of(served, group).is_empty() {
        return None;
    }
    Some(encode(&ApiGroupJson::new(served, "APIGroup", "v1", group)))
}

/// The groups under `/apis` the sim serves, ordered as the apiserver orders them.
fn served_groups(served: &Served) -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for r in served.resources() {
        if !r.group.is_empty() && !groups.contains(&r.group) {
            groups.push(r.group);
        }
    }
    let rank =
        |g: &str| builtin_table::GROUP_ORDER.iter().position(|o| *o == g).unwrap_or(usize::MAX);
    groups.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    groups
}

/// The versions a group serves, preferred first: by Kubernetes' version priority, as the CRD
/// discovery controller sorts them (`sortGroupDiscoveryByKubeAwareVersion`; the preferred
/// version is the first). The sim's built-in groups serve one version each.
fn versions_of(served: &Served, group: &str) -> Vec<&'static str> {
    let mut versions: Vec<&'static str> = Vec::new();
    for r in served.resources().filter(|r| r.group == group) {
        if !versions.contains(&r.version) {
            versions.push(r.version);
        }
    }
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    versions
}

/// `k8s.io/apimachinery/pkg/version.CompareKubeAwareVersionStrings`' order as a key: GA above
/// beta above alpha, then the higher major, then the higher minor; a version of another shape
/// lowest (the real one sorts those by name, after these).
fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else { return (0, 0, 0) };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let Ok(major) = rest[..digits].parse::<u32>() else { return (0, 0, 0) };
    let tail = &rest[digits..];
    let (level, minor) = match (tail.strip_prefix("beta"), tail.strip_prefix("alpha")) {
        _ if tail.is_empty() => return (3, major, 0),
        (Some(minor), _) => (2, minor),
        (_, Some(minor)) => (1, minor),
        _ => return (0, 0, 0),
    };
    minor.parse().map_or((0, 0, 0), |minor| (level, major, minor))
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// `metav1.APIResource`, fields in Go declaration order with its `omitempty`s.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiResourceJson<'a> {
    name: String,
    singular_name: &'a str,
    namespaced: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    version: &'a str,
    kind: &'a str,
    verbs: &'a [&'a str],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    short_names: &'a [&'a str],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    categories: &'a [&'a str],
    #[serde(skip_serializing_if = "str::is_empty")]
    storage_version_hash: &'a str,
}

impl<'a> ApiResourceJson<'a> {
    fn resource(r: &'a ApiResource) -> Self {
        ApiResourceJson {
            name: r.resource.to_owned(),
            singular_name: r.singular,
            namespaced: r.namespaced,
            group: "",
            version: "",
            kind: r.kind,
            verbs: r.verbs,
            short_names: r.short_names,
            categories: r.categories,
            storage_version_hash: r.storage_version_hash,
        }
    }

    /// Subresources have no singular name, short names, categories or storage hash.
    fn subresource(r: &'a ApiResource, s: &'a Subresource) -> Self {
        ApiResourceJson {
            name: format!("{}/{}", r.resource, s.name),
            singular_name: "",
            namespaced: r.namespaced,
            group: s.group,
            version: s.version,
            kind: s.kind,
            verbs: s.verbs,
            short_names: &[],
            categories: &[],
            storage_version_hash: "",
        }
    }
}

/// `metav1.APIGroup`; inside an APIGroupList its kind and apiVersion are empty and omitted.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiGroupJson<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    kind: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    api_version: &'a str,
    name: &'a str,
    versions: Vec<GroupVersionJson>,
    preferred_version: GroupVersionJson,
}

impl<'a> ApiGroupJson<'a> {
    fn new(served: &Served, kind: &'a str, api_version: &'a str, group: &'a str) -> Self {
        let versions: Vec<GroupVersionJson> = versions_of(served, group)
            .into_iter()
            .map(|v| GroupVersionJson { group_version: group_version(group, v), version: v })
            .collect();
        // Go's PreferredVersion is a plain struct: zero-valued when a group has no version.
        let preferred_version = versions
            .first()
            .cloned()
            .unwrap_or(GroupVersionJson { group_version: String::new(), version: "" });
        ApiGroupJson { kind, api_version, name: group, versions, preferred_version }
    }
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct GroupVersionJson {
    group_version: String,
    version: &'static str,
}

/// Compact JSON plus the newline the apiserver's encoder appends. Serializing these plain
/// structs cannot fail; an empty body would be the visible symptom if it ever did.
fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec(value).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests;
