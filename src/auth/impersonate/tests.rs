//! The impersonation filter's checks, and the headers kubeplex impersonates with.

use super::*;

#[test]
fn impersonation_requests_become_the_filters_checks() {
    let mut h = HeaderMap::new();
    assert_eq!(requested_impersonation(&h), None);
    h.append("impersonate-group", HeaderValue::from_static("devs"));
    assert_eq!(requested_impersonation(&h), Some(None), "groups without a user");
    h.append("impersonate-user", HeaderValue::from_static("system:serviceaccount:ns:sa"));
    h.append("impersonate-uid", HeaderValue::from_static("u-1"));
    h.append("impersonate-extra-example.com%2Fscopes", HeaderValue::from_static("view"));
    let target = requested_impersonation(&h).flatten().expect("a user");
    assert_eq!(target.username, "system:serviceaccount:ns:sa");
    assert_eq!(target.groups, ["devs"]);
    assert_eq!(target.extra["example.com/scopes"], ["view"]);
    let checks: Vec<_> = impersonation_checks(&target)
        .into_iter()
        .map(|a| (a.group, a.resource, a.subresource, a.namespace, a.name))
        .collect();
    let s = String::from;
    assert_eq!(
        checks,
        [
            (s(""), s("serviceaccounts"), s(""), s("ns"), s("sa")),
            (s(""), s("groups"), s(""), s(""), s("devs")),
            (s("authentication.k8s.io"), s("uids"), s(""), s(""), s("u-1")),
            (
                s("authentication.k8s.io"),
                s("userextras"),
                s("example.com/scopes"),
                s(""),
                s("view")
            ),
        ]
    );
}

#[test]
fn a_certificate_user_is_impersonated_with_its_groups() {
    let user = UserInfo {
        username: "system:node:node-0".into(),
        uid: "u".into(),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
        extra: [("example.com/k".to_string(), vec!["v".to_string()])].into(),
    };
    let headers: Vec<(String, String)> = impersonation_headers(&user)
        .into_iter()
        .map(|(k, v)| (k, v.to_str().unwrap().to_string()))
        .collect();
    let s = String::from;
    assert_eq!(
        headers,
        [
            (s("impersonate-user"), s("system:node:node-0")),
            // system:authenticated is the apiserver's to add.
            (s("impersonate-group"), s("system:nodes")),
            (s("impersonate-uid"), s("u")),
            (s("impersonate-extra-example.com%2Fk"), s("v")),
        ]
    );
}
