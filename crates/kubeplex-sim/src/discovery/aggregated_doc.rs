//! Aggregated discovery: `GET /api` or `/apis` with `Accept:
//! application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, which client-go (and
//! so kubectl) asks for first, falling back to the legacy documents when the answer is not one.
//!
//! Built from the apiserver's code, there being no capture of it:
//! `k8s.io/apiserver/pkg/endpoints/discovery/aggregated` (handler, etag, wrapper, negotiation),
//! `endpoints.ConvertGroupVersionIntoToDiscovery` for built-in resources and the apiextensions
//! discovery controller for CRDs. The response carries, besides the body:
//! `Content-Type:` [`AGGREGATED_CONTENT_TYPE`], `ETag:` [`AggregatedDiscovery::etag`],
//! `Vary: Accept` and `Cache-Control: public` (replacing the usual `no-cache, private`), and is
//! a bodiless 304 when `If-None-Match` equals the ETag.
//!
//! Only the JSON form is served: an `Accept` whose first acceptable clause asks the aggregated
//! list as protobuf or YAML gets the legacy document from the sim (the apiserver would encode
//! the aggregated list in that format); client-go never asks those.

use serde::Serialize;

use super::{hash, served_groups, versions_of, ApiResource, Served};

/// The `Content-Type` of an aggregated discovery response.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Which root the aggregated document describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryRoot {
    /// `/api`: the core group alone (an item with an empty name).
    Api,
    /// `/apis`: every named group, in the aggregator's priority order.
    Apis,
}

/// An aggregated discovery response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregatedDiscovery {
    /// The JSON body, ending with `\n`.
    pub body: Vec<u8>,
    /// The `ETag` header value, quoted: uppercase hex SHA-512 of the list marshalled without
    /// its kind and apiVersion (the apiserver hashes the struct before the encoder sets them).
    pub etag: String,
}

impl AggregatedDiscovery {
    /// Whether an `If-None-Match` header value lets the server answer 304 Not Modified; the
    /// apiserver compares the whole header to the quoted ETag, without parsing lists or `W/`.
    pub fn not_modified(&self, if_none_match: Option<&str>) -> bool {
        if_none_match == Some(self.etag.as_str())
    }
}

/// What a discovery request's `Accept` header selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// The legacy documents (`APIVersions`, `APIGroupList`).
    Legacy,
    AggregatedJson,
    AggregatedYaml,
    AggregatedProtobuf,
}

/// Whether to answer with [`aggregated`]: the header selects the aggregated list as JSON.
pub fn wants_aggregated(accept: &str) -> bool {
    negotiate(accept) == DiscoveryFormat::AggregatedJson
}

/// The apiserver's choice for `/api` and `/apis` (`aggregated.WrappedHandler`): the first clause,
/// by quality, that names a media type of the discovery serializer and converts to
/// `apidiscovery.k8s.io/v2 APIGroupDiscoveryList`. A clause without that conversion, or with a
/// `stream` other than `watch` or any `sv`, is not acceptable there, so plain
/// `application/json` falls through to the legacy handler.
pub fn negotiate(accept: &str) -> DiscoveryFormat {
    const SUPPORTED: [(&str, &str, DiscoveryFormat); 3] = [
        ("application", "json", DiscoveryFormat::AggregatedJson),
        ("application", "yaml", DiscoveryFormat::AggregatedYaml),
        ("application", "vnd.kubernetes.protobuf", DiscoveryFormat::AggregatedProtobuf),
    ];
    for clause in parse_accept(accept) {
        for (ty, subtype, format) in SUPPORTED {
            let matches = (clause.ty == ty && (clause.subtype == subtype || clause.subtype == "*"))
                || (clause.ty == "*" && clause.subtype == "*");
            // Only JSON and protobuf have a stream serializer in the discovery codecs.
            let streams = format != DiscoveryFormat::AggregatedYaml;
            if matches && clause.converts_to_aggregated(streams) {
                return format;
            }
        }
    }
    DiscoveryFormat::Legacy
}

/// One media range of an `Accept` header, as `github.com/munnerz/goautoneg` parses it.
struct Clause<'a> {
    ty: &'a str,
    subtype: &'a str,
    q: f64,
    params: Vec<(&'a str, &'a str)>,
}

impl Clause<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        // Go collects parameters into a map: the last occurrence wins.
        self.params.iter().rev().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }

    fn converts_to_aggregated(&self, streams: bool) -> bool {
        if self.param("stream").is_some_and(|s| !s.is_empty() && (!streams || s != "watch")) {
            return false;
        }
        if self.param("sv").is_some_and(|s| !s.is_empty()) {
            return false;
        }
        self.param("g") == Some("apidiscovery.k8s.io")
            && self.param("v") == Some("v2")
            && self.param("as") == Some("APIGroupDiscoveryList")
    }
}

fn parse_accept(header: &str) -> Vec<Clause<'_>> {
    let mut clauses = Vec::new();
    for part in header.split(',') {
        let mut pieces = part.split(';');
        let media_range = pieces.next().unwrap_or_default();
        let mut range = media_range.split('/');
        let ty = range.next().unwrap_or_default().trim_matches(' ');
        let subtype = match (range.next(), range.next()) {
            (None, _) if ty == "*" => "*",
            (Some(sub), None) => sub.trim_matches(' '),
            _ => continue,
        };
        let mut clause = Clause { ty, subtype, q: 1.0, params: Vec::new() };
        for param in pieces {
            let Some((key, value)) = param.split_once('=') else { continue };
            let key = key.trim_matches(' ');
            if key == "q" {
                // strconv.ParseFloat's failure leaves 0, and `q` is parsed as float32 there.
                clause.q = f64::from(value.parse::<f32>().unwrap_or(0.0));
            } else {
                clause.params.push((key, value.trim_matches(' ')));
            }
        }
        clauses.push(clause);
    }
    // goautoneg sorts with this (non-strict) ordering through sort.Sort, which is an insertion
    // sort for the handful of clauses a header has; reproduce it step for step.
    let less = |a: &Clause, b: &Clause| {
        a.q > b.q || (a.ty != "*" && b.ty == "*") || (a.subtype != "*" && b.subtype == "*")
    };
    for i in 1..clauses.len() {
        let mut j = i;
        while j > 0 && less(&clauses[j], &clauses[j - 1]) {
            clauses.swap(j, j - 1);
            j -= 1;
        }
    }
    clauses
}

/// The aggregated discovery document for `/api` or `/apis`.
pub fn aggregated(served: &Served, root: DiscoveryRoot) -> AggregatedDiscovery {
    let items: Vec<GroupJson> = match root {
        DiscoveryRoot::Api => vec![group_json(served, "")],
        DiscoveryRoot::Apis => {
            served_groups(served).into_iter().map(|g| group_json(served, g)).collect()
        }
    };
    let items = serde_json::to_string(&items).unwrap_or_default();
    let hashed = format!(r#"{{"metadata":{{}},"items":{items}}}"#);
    let body = format!(
        r#"{{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{{}},"items":{items}}}"#
    );
    let mut body = body.into_bytes();
    body.push(b'\n');
    AggregatedDiscovery { body, etag: format!("\"{}\"", hash::etag(hashed.as_bytes())) }
}

fn group_json(served: &Served, group: &'static str) -> GroupJson {
    let versions = versions_of(served, group)
        .into_iter()
        .map(|version| {
            let mut resources: Vec<&ApiResource> =
                served.resources().filter(|r| r.group == group && r.version == version).collect();
            // The CRD controller sorts its resources by name; built-ins keep installer order,
            // which is sorted already.
            resources.sort_by_key(|r| r.resource);
            VersionJson {
                version,
                resources: resources.into_iter().map(resource_json).collect(),
                freshness: "Current",
            }
        })
        .collect();
    GroupJson { metadata: MetadataJson { name: group }, versions }
}

fn resource_json(r: &ApiResource) -> ResourceJson {
    // Built-in resources take group and version from their APIResource entry, which leaves
    // them empty when the kind is in the listed group-version; CRDs spell them out.
    let (group, version) = if r.custom { (r.group, r.version) } else { ("", "") };
    ResourceJson {
        resource: r.resource,
        response_kind: KindJson { group, version, kind: r.kind },
        scope: if r.namespaced { "Namespaced" } else { "Cluster" },
        singular_resource: r.singular,
        verbs: r.verbs,
        short_names: r.short_names,
        categories: r.categories,
        subresources: r
            .subresources
            .iter()
            .map(|s| {
                // A CRD's subresources (status, scale) spell out the CRD's group and version too
                // (the real apiserver's, tests/fixtures/realcluster/custom/
                // discovery-aggregated-cilium.io.json).
                let (group, version) = match (r.custom, s.group) {
                    (true, "") => (r.group, r.version),
                    _ => (s.group, s.version),
                };
                SubresourceJson {
                    subresource: s.name,
                    response_kind: KindJson { group, version, kind: s.kind },
                    verbs: s.verbs,
                }
            })
            .collect(),
    }
}

/// `apidiscoveryv2.APIGroupDiscovery`; its TypeMeta is empty and omitted.
#[derive(Serialize)]
struct GroupJson {
    metadata: MetadataJson,
    versions: Vec<VersionJson>,
}

/// ObjectMeta with only a name; `creationTimestamp` is `omitzero` since 1.33. The core group's
/// empty name leaves `{}`.
#[derive(Serialize)]
struct MetadataJson {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'static str,
}

#[derive(Serialize)]
struct VersionJson {
    version: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    resources: Vec<ResourceJson>,
    freshness: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceJson {
    resource: &'static str,
    response_kind: KindJson,
    scope: &'static str,
    singular_resource: &'static str,
    verbs: &'static [&'static str],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    short_names: &'static [&'static str],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    categories: &'static [&'static str],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    subresources: Vec<SubresourceJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubresourceJson {
    subresource: &'static str,
    response_kind: KindJson,
    verbs: &'static [&'static str],
}

/// `metav1.GroupVersionKind`: no omitempty, empty group and version are written out.
#[derive(Serialize)]
struct KindJson {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
}
