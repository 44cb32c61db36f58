//! The pieces of the node mode's identity checks that read requests.

use http::{HeaderMap, Method, Request};

use super::*;
use crate::wire::request::ApiPath;

fn class(method: Method, uri: &str) -> (Class, ResourcePath) {
    let req = Request::builder().method(method).uri(uri).body(()).unwrap();
    let class = Class::of(&req);
    let ApiPath::Resource(rp) = class.path.clone() else { panic!("not a resource: {uri}") };
    (class, rp)
}

#[test]
fn reads_are_named_as_the_apiservers_request_info_names_them() {
    let (c, rp) = class(Method::GET, "/api/v1/namespaces/a/pods/x?watch=1");
    let a = read_attributes(&c, &rp);
    assert_eq!((a.verb.as_str(), a.name.as_str(), a.namespace.as_str()), ("get", "x", "a"));

    let (c, rp) = class(
        Method::GET,
        "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dnode-0&labelSelector=app%3Dweb",
    );
    let a = read_attributes(&c, &rp);
    assert_eq!(a.verb, "watch");
    assert_eq!(a.field_selector.as_deref(), Some("spec.nodeName=node-0"));
    assert_eq!(a.label_selector.as_deref(), Some("app=web"));
    assert_eq!(a.name, "");

    // A list narrowed to one name is a read of that name.
    let (c, rp) = class(
        Method::GET,
        "/apis/apps/v1/namespaces/a/deployments?fieldSelector=metadata.name%3Dweb",
    );
    let a = read_attributes(&c, &rp);
    assert_eq!((a.verb.as_str(), a.group.as_str(), a.name.as_str()), ("list", "apps", "web"));
    // ... unless the name could not be a path segment.
    let (c, rp) = class(Method::GET, "/api/v1/configmaps?fieldSelector=metadata.name%3D..");
    assert_eq!(read_attributes(&c, &rp).name, "");
}

#[test]
fn bearer_tokens_are_read_as_the_apiserver_reads_them() {
    let mut h = HeaderMap::new();
    assert_eq!(bearer_token(&h), None);
    h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
    assert_eq!(bearer_token(&h), Some("abc"));
    h.insert(header::AUTHORIZATION, HeaderValue::from_static("bearer   abc "));
    assert_eq!(bearer_token(&h), Some("abc"));
    h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic dTpw"));
    assert_eq!(bearer_token(&h), None);
    h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
    assert_eq!(bearer_token(&h), None);
}

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

#[test]
fn refusals_are_negotiated_like_the_apiservers() {
    let status = Status::forbidden_request(
        &Refused {
            user: "u",
            verb: "get",
            resource: "pods",
            namespace: "a",
            name: "x",
            ..Refused::default()
        },
        "",
    );
    let json = forbidden(&status, Some("application/json"));
    assert_eq!(json.status(), 403);
    assert_eq!(json.headers()["content-type"], "application/json");
    assert_eq!(json.headers()["x-content-type-options"], "nosniff");
    let protobuf = forbidden(&status, Some("application/vnd.kubernetes.protobuf"));
    assert_eq!(protobuf.headers()["content-type"], "application/vnd.kubernetes.protobuf");
    assert_eq!(unauthorized().status(), 401);
}

#[tokio::test]
async fn a_protobuf_refusal_is_the_apiservers_bytes() {
    use http_body_util::BodyExt;
    let status = Status::forbidden_request(
        &Refused {
            user: "system:serviceaccount:fx2:reader",
            verb: "get",
            resource: "pods",
            namespace: "fx2",
            name: "nope",
            ..Refused::default()
        },
        "",
    );
    let resp = forbidden(&status, Some("application/vnd.kubernetes.protobuf"));
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let captured = include_bytes!("../../../../shared/fixtures/err-forbidden-get-protobuf.body");
    assert_eq!(&body[..], &captured[..]);
}
