//! Requests read once into their class.

use super::*;

fn request(method: Method, uri: &str) -> Request<()> {
    Request::builder().method(method).uri(uri).body(()).unwrap()
}

#[test]
fn requests_are_classified_once_into_verb_path_and_options() {
    let class = Class::of(&request(
        Method::GET,
        "/api/v1/namespaces/a/pods?watch=1&resourceVersion=5&labelSelector=x%3Dy",
    ));
    assert_eq!(class.verb, Verb::Watch);
    let options = class.options.expect("options");
    assert!(options.watch);
    assert_eq!(options.resource_version.as_deref(), Some("5"));
    assert_eq!(options.label_selector.as_deref(), Some("x=y"));
    assert!(!class.credentials);

    let get = Class::of(&request(Method::GET, "/apis/apps/v1/namespaces/a/deployments/web"));
    assert_eq!(get.verb, Verb::Get);
    assert!(matches!(&get.path, ApiPath::Resource(rp) if rp.name.as_deref() == Some("web")));

    assert_eq!(Class::of(&request(Method::GET, "/api/v1/pods")).verb, Verb::List);
    assert_eq!(
        Class::of(&request(Method::DELETE, "/api/v1/namespaces/a/pods/x")).verb,
        Verb::Delete
    );
    // Not a resource: no verb of the API, no options.
    let other = Class::of(&request(Method::GET, "/version"));
    assert_eq!(other.verb, Verb::Other);
    assert!(other.options.is_none());
    // Malformed options are left for the upstream to refuse.
    let bad = Class::of(&request(Method::GET, "/api/v1/pods?limit=abc"));
    assert_eq!(bad.verb, Verb::List);
    assert!(bad.options.is_none());
    // Writes carry no list options.
    assert!(Class::of(&request(Method::POST, "/api/v1/namespaces/a/pods")).options.is_none());

    let mut with_token = request(Method::GET, "/api/v1/pods");
    with_token.headers_mut().insert("authorization", "Bearer t".parse().unwrap());
    assert!(Class::of(&with_token).credentials);
    let mut impersonating = request(Method::GET, "/api/v1/pods");
    impersonating.headers_mut().insert("impersonate-user", "u".parse().unwrap());
    assert!(Class::of(&impersonating).credentials);
}
