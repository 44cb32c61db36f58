//! Discovery documents for the served kinds (legacy and aggregated).

use http::{header, HeaderMap, Response};

use crate::discovery::{self, DiscoveryRoot};
use crate::respond::{self, Body, JSON};
use crate::server::SimState;
use crate::wire::status::Status;

/// Answers `/api`, `/api/v1`, `/apis`, `/apis/{g}`, `/apis/{g}/{v}`.
pub fn respond(
    state: &SimState,
    path: &crate::wire::request::ApiPath,
    req: &HeaderMap,
) -> Response<Body> {
    use crate::wire::request::ApiPath;
    let served = state.served();
    let served = &*served;
    let accept = req.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let root = match path {
        ApiPath::LegacyVersions => Some(DiscoveryRoot::Api),
        ApiPath::Groups => Some(DiscoveryRoot::Apis),
        _ => None,
    };
    if let Some(root) = root.filter(|_| discovery::wants_aggregated(accept)) {
        let doc = discovery::aggregated(served, root);
        let if_none_match = req.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok());
        let builder = Response::builder()
            .header(header::CONTENT_TYPE, discovery::AGGREGATED_CONTENT_TYPE)
            .header(header::CACHE_CONTROL, "public")
            .header(header::VARY, "Accept")
            .header(header::ETAG, doc.etag.as_str());
        let resp = if doc.not_modified(if_none_match) {
            builder.status(304).body(respond::full(Vec::new()))
        } else {
            builder.status(200).body(respond::full(doc.body))
        };
        return resp.unwrap_or_else(|_| respond::error(&Status::internal("discovery"), false));
    }
    let body = match path {
        ApiPath::LegacyVersions => Some(discovery::api_versions(served, &state.addr.to_string())),
        ApiPath::LegacyResources => discovery::api_resource_list(served, "", "v1"),
        ApiPath::Groups => Some(discovery::api_group_list(served)),
        ApiPath::Group(g) => discovery::api_group(served, g),
        ApiPath::GroupResources(g, v) => discovery::api_resource_list(served, g, v),
        _ => None,
    };
    match (body, path) {
        (Some(b), _) => respond::body(200, JSON, b, req),
        // A group or group-version no handler serves (never installed, or its CRDs deleted).
        (None, ApiPath::Group(_) | ApiPath::GroupResources(..)) => respond::page_not_found(),
        (None, _) => respond::error(&Status::path_not_found(), false),
    }
}
