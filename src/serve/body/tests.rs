//! Refusals written as the apiserver writes them.

use super::*;
use crate::wire::status::Refused;

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
    let forbidden = |accept: &str| {
        refused(&Refusal::Forbidden { status: status.clone(), accept: Some(accept.into()) })
    };
    let json = forbidden("application/json");
    assert_eq!(json.status(), 403);
    assert_eq!(json.headers()["content-type"], "application/json");
    assert_eq!(json.headers()["x-content-type-options"], "nosniff");
    let protobuf = forbidden("application/vnd.kubernetes.protobuf");
    assert_eq!(protobuf.headers()["content-type"], "application/vnd.kubernetes.protobuf");
    assert_eq!(refused(&Refusal::Unauthorized).status(), 401);
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
    let accept = Some("application/vnd.kubernetes.protobuf".to_string());
    let resp = refused(&Refusal::Forbidden { status, accept });
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let captured = include_bytes!("../../../../shared/fixtures/err-forbidden-get-protobuf.body");
    assert_eq!(&body[..], &captured[..]);
}
