//! The bearer token as the apiserver reads it.

use http::HeaderValue;

use super::*;

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
