use super::*;

fn rp(path: &str) -> ResourcePath {
    match parse_path(path) {
        ApiPath::Resource(r) => r,
        other => panic!("{path}: {other:?}"),
    }
}

#[test]
fn paths_route_like_the_apiserver() {
    assert_eq!(parse_path("/api"), ApiPath::LegacyVersions);
    assert_eq!(parse_path("/api/v1/"), ApiPath::LegacyResources);
    assert_eq!(
        parse_path("/apis/discovery.k8s.io/v1"),
        ApiPath::GroupResources("discovery.k8s.io".into(), "v1".into())
    );
    let r = rp("/api/v1/namespaces/fx/configmaps/cm-a");
    assert_eq!(
        (r.namespace.as_deref(), r.resource.as_str(), r.name.as_deref()),
        (Some("fx"), "configmaps", Some("cm-a"))
    );
    let r = rp("/api/v1/namespaces/fx");
    assert_eq!(
        (r.namespace, r.resource.as_str(), r.name.as_deref()),
        (None, "namespaces", Some("fx"))
    );
    let r = rp("/api/v1/namespaces/fx/status");
    assert_eq!((r.resource.as_str(), r.subresource.as_deref()), ("namespaces", Some("status")));
    let r = rp("/api/v1/pods");
    assert_eq!((r.namespace, r.name), (None, None));
    let r = rp("/api/v1/namespaces/fx/pods/p/log");
    assert_eq!(r.subresource.as_deref(), Some("log"));
    assert_eq!(parse_path("/api/v1/namespaces/fx/pods/p/log/extra"), ApiPath::Other);
    assert_eq!(parse_path("/version"), ApiPath::Other);
    assert_eq!(parse_path("//api"), ApiPath::Other);
}

#[test]
fn options_parse_and_validate() {
    let o = ListOptions::parse(Some("watch=1&resourceVersion=5&allowWatchBookmarks=true")).unwrap();
    assert!(o.watch && o.allow_watch_bookmarks);
    assert_eq!(o.resource_version.as_deref(), Some("5"));
    let e = ListOptions::parse(Some("resourceVersionMatch=Exact")).unwrap_err();
    assert_eq!(e.code, 422);
    let e = ListOptions::parse(Some("resourceVersionMatch=Exact&resourceVersion=0")).unwrap_err();
    assert!(
        e.message.contains("resourceVersionMatch \\\"exact\\\"") || e.message.contains("\"exact\"")
    );
    let e = ListOptions::parse(Some("resourceVersionMatch=Bogus&resourceVersion=1")).unwrap_err();
    assert_eq!(
        e.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \
         \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""
    );
    let e = ListOptions::parse(Some("sendInitialEvents=true")).unwrap_err();
    assert_eq!(e.details.unwrap().causes[0].field, "sendInitialEvents");
    let e = ListOptions::parse(Some("limit=x")).unwrap_err();
    assert_eq!(e.code, 400);
    let o = ListOptions::parse(Some(
        "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
    ))
    .unwrap();
    assert_eq!(o.resource_version_match, Some(RvMatch::NotOlderThan));
    assert_eq!(o.send_initial_events, Some(true));
}
