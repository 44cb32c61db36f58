//! Reads named as the apiserver's `RequestInfoFactory` names them.

use super::*;
use crate::wire::request::{parse_path, ApiPath};

/// The path, options and watch flag of a GET of `uri`, as `serve` classifies it.
fn read(uri: &str) -> ResourceAttributes {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let ApiPath::Resource(rp) = parse_path(path) else { panic!("not a resource: {uri}") };
    let options = if rp.name.is_some() {
        ListOptions::parse_get(Some(query)).ok()
    } else {
        ListOptions::parse(Some(query)).ok()
    };
    let watch = rp.name.is_none() && options.as_ref().is_some_and(|o| o.watch);
    read_attributes(&rp, options.as_ref(), watch)
}

#[test]
fn reads_are_named_as_the_apiservers_request_info_names_them() {
    let a = read("/api/v1/namespaces/a/pods/x?watch=1");
    assert_eq!((a.verb.as_str(), a.name.as_str(), a.namespace.as_str()), ("get", "x", "a"));

    let a = read(
        "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dnode-0&labelSelector=app%3Dweb",
    );
    assert_eq!(a.verb, "watch");
    assert_eq!(a.field_selector.as_deref(), Some("spec.nodeName=node-0"));
    assert_eq!(a.label_selector.as_deref(), Some("app=web"));
    assert_eq!(a.name, "");

    // A list narrowed to one name is a read of that name.
    let a = read("/apis/apps/v1/namespaces/a/deployments?fieldSelector=metadata.name%3Dweb");
    assert_eq!((a.verb.as_str(), a.group.as_str(), a.name.as_str()), ("list", "apps", "web"));
    // ... unless the name could not be a path segment.
    assert_eq!(read("/api/v1/configmaps?fieldSelector=metadata.name%3D..").name, "");
}
