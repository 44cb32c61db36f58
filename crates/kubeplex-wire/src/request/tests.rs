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

/// metav1's query conversions read the first value of a repeated parameter, for bools as
/// for strings and ints.
#[test]
fn repeated_parameters_take_their_first_value() {
    let o = ListOptions::parse(Some("watch=x&watch=%00")).unwrap();
    assert!(o.watch);
    let o = ListOptions::parse(Some("watch=1&watch=0&limit=5&limit=x")).unwrap();
    assert!(o.watch);
    assert_eq!(o.limit, Some(5));
    let o =
        ListOptions::parse(Some("watch=false&watch=1&allowWatchBookmarks=0&allowWatchBookmarks=1"))
            .unwrap();
    assert!(!o.watch && !o.allow_watch_bookmarks);
    let o = ListOptions::parse(Some("resourceVersion=&resourceVersion=5")).unwrap();
    assert_eq!(o.resource_version, None);
    // A pair with a malformed escape is dropped, not read literally.
    let o = ListOptions::parse(Some("labelSelector=%zz&labelSelector=app%3Dweb")).unwrap();
    assert_eq!(o.label_selector.as_deref(), Some("app=web"));
}

#[test]
fn malformed_numbers_are_strconv_errors_in_field_order() {
    let msg = |q: &str| ListOptions::parse(Some(q)).unwrap_err();
    let e = msg("limit=x");
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "strconv.ParseInt: parsing \"x\": invalid syntax")
    );
    let e = msg("limit=99999999999999999999");
    assert_eq!(e.message, "strconv.ParseInt: parsing \"99999999999999999999\": value out of range");
    assert_eq!(msg("limit=").message, "strconv.ParseInt: parsing \"\": invalid syntax");
    assert_eq!(msg("limit=%00").message, "strconv.ParseInt: parsing \"\\x00\": invalid syntax");
    // timeoutSeconds is converted before limit, whatever the query's order.
    assert_eq!(
        msg("limit=a&timeoutSeconds=b").message,
        "strconv.ParseInt: parsing \"b\": invalid syntax"
    );
    // The conversion's 400 (numbers, then selector syntax) comes before the validation's 422.
    assert_eq!(msg("resourceVersionMatch=Bogus&limit=x").code, 400);
    assert_eq!(msg("resourceVersionMatch=Bogus&labelSelector=a%20in").code, 400);
    assert_eq!(msg("resourceVersionMatch=Bogus").code, 422);
}

#[test]
fn a_named_get_reads_only_its_resource_version() {
    let o = ListOptions::parse_get(Some("watch=1&limit=x&resourceVersion=7&resourceVersion=8"))
        .unwrap();
    assert_eq!(o, ListOptions { resource_version: Some("7".into()), ..ListOptions::default() });
    assert!(ListOptions::parse_get(Some("export=0")).is_ok());
    let e = ListOptions::parse_get(Some("export=")).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "the export parameter, deprecated since v1.14, is no longer supported")
    );
}
