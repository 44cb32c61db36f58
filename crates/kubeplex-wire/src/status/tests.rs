use super::*;

/// A fixture body without Go's trailing newline (responses add it).
fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../../../shared/fixtures/{name}.body", env!("CARGO_MANIFEST_DIR"));
    let mut b = std::fs::read(path).unwrap_or_default();
    assert_eq!(b.pop(), Some(b'\n'), "fixture {name} ends with a newline");
    b
}

#[test]
fn not_found_matches_the_apiserver() {
    assert_eq!(Status::not_found("", "configmaps", "nope").to_json(), fixture("cm-get-notfound"));
}

#[test]
fn conflict_matches_the_apiserver() {
    assert_eq!(Status::conflict("", "configmaps", "cm-c").to_json(), fixture("err-conflict"));
}

#[test]
fn too_large_rv_matches_the_apiserver() {
    let s = Status::too_large_resource_version(999999999, 266);
    assert_eq!(s.to_json(), fixture("err-too-large-rv"));
    assert_eq!(s.retry_after(), Some(1));
}

#[test]
fn invalid_list_options_match_the_apiserver() {
    let s = Status::invalid(
        "meta.k8s.io",
        "ListOptions",
        "",
        vec![FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )],
    );
    assert_eq!(s.to_json(), fixture("err-rvmatch-exact-unset"));
    let s = Status::invalid(
        "meta.k8s.io",
        "ListOptions",
        "",
        vec![FieldError::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        )],
    );
    assert_eq!(s.to_json(), fixture("err-watchlist-no-rvmatch"));
}

#[test]
fn several_field_errors_are_bracketed() {
    let s = Status::invalid(
        "meta.k8s.io",
        "ListOptions",
        "",
        vec![
            FieldError::forbidden("a", "x"),
            FieldError::not_supported("b", "Foo", &["Exact", "NotOlderThan", ""]),
        ],
    );
    assert_eq!(
        s.message,
        "ListOptions.meta.k8s.io \"\" is invalid: [a: Forbidden: x, b: Unsupported value: \
         \"Foo\": supported values: \"Exact\", \"NotOlderThan\", \"\"]"
    );
}

#[test]
fn forbidden_requests_read_like_the_apiservers_403s() {
    let list = Status::forbidden_request(
        &Refused {
            user: "system:serviceaccount:fx2:reader",
            verb: "list",
            resource: "configmaps",
            namespace: "fx2-other",
            ..Refused::default()
        },
        "",
    );
    assert_eq!(list.to_json(), fixture("err-forbidden-list"));

    let watch = Status::forbidden_request(
        &Refused { user: "u", verb: "watch", resource: "pods", ..Refused::default() },
        "",
    );
    assert_eq!(
        watch.message,
        r#"pods is forbidden: User "u" cannot watch resource "pods" in API group "" at the cluster scope"#
    );
    let named = Status::forbidden_request(
        &Refused {
            user: "u",
            verb: "get",
            group: "apps",
            resource: "deployments",
            subresource: "scale",
            namespace: "a",
            name: "web",
            ..Refused::default()
        },
        "node 'x' cannot <get> it",
    );
    assert_eq!(
        named.message,
        r#"deployments.apps "web" is forbidden: User "u" cannot get resource "deployments/scale" in API group "apps" in the namespace "a": node 'x' cannot <get> it"#
    );
    let path = Status::forbidden_request(
        &Refused {
            user: "system:anonymous",
            verb: "get",
            path: Some("/apis"),
            ..Refused::default()
        },
        "",
    );
    assert_eq!(path.message, r#"forbidden: User "system:anonymous" cannot get path "/apis""#);
    // NewForbidden's details are set even when empty: `"details":{}`, as the apiserver writes.
    assert_eq!(path.to_value()["details"], serde_json::json!({}));
    assert_eq!(Status::unauthorized().to_json(), fixture("err-unauthorized"));
}
