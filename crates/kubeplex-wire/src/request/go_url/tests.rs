use super::*;

#[test]
fn paths_decode_like_url_parse_request_uri() {
    assert_eq!(
        unescape_path("/api/v1/namespaces/default/pods").as_deref(),
        Some("/api/v1/namespaces/default/pods")
    );
    assert_eq!(
        unescape_path("/api/v1/namespaces/d%65fault/pods").as_deref(),
        Some("/api/v1/namespaces/default/pods")
    );
    // A `%2F` is a slash once decoded: the apiserver splits the decoded path.
    assert_eq!(
        unescape_path("/api/v1/namespaces/a%2Fb").as_deref(),
        Some("/api/v1/namespaces/a/b")
    );
    assert_eq!(unescape_path("/a+b").as_deref(), Some("/a+b"));
    assert_eq!(unescape_path("/x%ff").as_deref(), Some("/x\u{fffd}"));
    for bad in ["/api/v1/namespaces/%zz/configmaps", "/%", "/%4", "/%4g", "/a%"] {
        assert_eq!(unescape_path(bad), None, "{bad}");
    }
}

#[test]
fn queries_read_like_url_values() {
    let q = parse_query("watch=x&watch=%00&a+b=c+d&bad=%zz&%zz=1&semi;colon=1&&limit=2");
    assert_eq!(
        q,
        vec![
            ("watch".into(), "x".into()),
            ("watch".into(), "\0".into()),
            ("a b".into(), "c d".into()),
            ("limit".into(), "2".into()),
        ]
    );
    assert_eq!(first(&q, "watch"), Some("x"));
    assert_eq!(first(&q, "bad"), None);
    assert_eq!(parse_query("flag").as_slice(), [("flag".to_string(), String::new())]);
    // Over 10,000 parameters: none at all.
    let many = format!("watch=1{}", "&a=1".repeat(10_000));
    assert!(parse_query(&many).is_empty());
    let most = format!("watch=1{}", "&a=1".repeat(9_999));
    assert_eq!(first(&parse_query(&most), "watch"), Some("1"));
}
