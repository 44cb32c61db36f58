use std::io::Read;

use flate2::read::GzDecoder;
use proptest::prelude::*;

use super::*;

const FIXTURE: &[u8] = include_bytes!("../../../../../shared/fixtures/cm-list-gzip.body");

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    GzDecoder::new(data).read_to_end(&mut out).unwrap();
    out
}

fn request(accept_encoding: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_str(accept_encoding).unwrap());
    headers
}

#[test]
fn matches_the_apiserver_framing() {
    let list = gunzip(FIXTURE);
    assert_eq!(list.len(), 264_771);
    assert!(list.starts_with(b"{\"kind\":\"ConfigMapList\"") && list.ends_with(b"]}\n"));
    let mut response = HeaderMap::new();
    let body = compress_response(&request("gzip"), &mut response, list.clone());
    // Same gzip header as Go's level-1 writer: magic, deflate, no flags, mtime 0, XFL 4, OS 255.
    assert_eq!(body.get(..10), FIXTURE.get(..10));
    assert_eq!(gunzip(&body), list);
    assert_eq!(response.get(CONTENT_ENCODING).unwrap(), "gzip");
    assert_eq!(response.get_all(VARY).iter().collect::<Vec<_>>(), ["Accept-Encoding"]);
}

#[test]
fn threshold_is_strictly_greater_than_128_kib() {
    let at = vec![b'x'; GZIP_THRESHOLD];
    let mut response = HeaderMap::new();
    assert_eq!(compress_response(&request("gzip"), &mut response, at.clone()), at);
    assert!(response.is_empty());
    let over = vec![b'x'; GZIP_THRESHOLD + 1];
    let body = compress_response(&request("gzip"), &mut response, over.clone());
    assert!(body.len() < over.len() / 50, "{} bytes", body.len());
    assert_eq!(gunzip(&body), over);
}

#[test]
fn vary_is_appended_to_an_existing_one() {
    let mut response = HeaderMap::new();
    response.insert(VARY, HeaderValue::from_static("Origin"));
    compress_response(&request("gzip"), &mut response, vec![0; GZIP_THRESHOLD + 1]);
    assert_eq!(response.get_all(VARY).iter().collect::<Vec<_>>(), ["Origin", "Accept-Encoding"]);
}

#[test]
fn accept_encoding_tokens() {
    assert!(accepts_gzip(&request("gzip")));
    assert!(accepts_gzip(&request("deflate, gzip")));
    assert!(accepts_gzip(&request("br,  gzip ,deflate")));
    assert!(!accepts_gzip(&request("gzip;q=1.0")));
    assert!(!accepts_gzip(&request("GZIP")));
    assert!(!accepts_gzip(&request("identity")));
    assert!(!accepts_gzip(&request("")));
    assert!(!accepts_gzip(&HeaderMap::new()));
    // Only the first header counts (Go's Header.Get).
    let mut two = request("identity");
    two.append(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    assert!(!accepts_gzip(&two));
    let big = vec![1u8; GZIP_THRESHOLD + 1];
    let mut response = HeaderMap::new();
    assert_eq!(compress_response(&request("identity"), &mut response, big.clone()), big);
    assert!(response.is_empty());
}

proptest! {
    #[test]
    fn gzip_round_trips(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        prop_assert_eq!(gunzip(&gzip(&data)), data);
    }

    #[test]
    fn accept_encoding_never_panics(value in proptest::collection::vec(any::<u8>(), 0..40)) {
        if let Ok(value) = HeaderValue::from_bytes(&value) {
            let mut headers = HeaderMap::new();
            headers.insert(ACCEPT_ENCODING, value);
            let _ = accepts_gzip(&headers);
        }
    }
}
