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

#[test]
fn a_captured_gzip_list_reads_back() {
    assert_eq!(super::gunzip(FIXTURE, 1 << 30).unwrap(), gunzip(FIXTURE));
    // Its limit is the decompressed size: one byte less is refused.
    let len = gunzip(FIXTURE).len();
    assert_eq!(super::gunzip(FIXTURE, len).unwrap().len(), len);
    assert_eq!(super::gunzip(FIXTURE, len - 1), Err(GunzipError::TooLarge(len - 1)));
}

/// A streaming list compressed as kube-apiserver 1.37's WatchListCompression writes it: one gzip
/// member per flush. Each member's bytes come out as soon as the member is in.
#[test]
fn members_written_one_per_flush_read_as_they_arrive() {
    let flushes: [&[u8]; 3] = [b"{\"type\":\"ADDED\"}\n", b"", b"{\"type\":\"BOOKMARK\"}\n"];
    let mut reader = Gunzip::new(1024);
    let mut seen = Vec::new();
    for flush in flushes {
        let out = reader.push(&gzip(flush)).unwrap();
        assert_eq!(out, flush, "a member's output is out once the member is");
        seen.extend(out);
    }
    assert_eq!(reader.finish().unwrap(), b"");
    assert_eq!(seen, flushes.concat());
}

#[test]
fn a_stream_cut_inside_a_member_or_not_gzip_is_an_error() {
    let member = gzip(b"some watch events");
    let mut reader = Gunzip::new(1024);
    reader.push(&member[..member.len() - 4]).unwrap();
    assert_eq!(reader.finish(), Err(GunzipError::Truncated));
    assert!(matches!(super::gunzip(b"not gzip at all", 1024), Err(GunzipError::Malformed(_))));
    // Nothing at all is an empty body.
    assert_eq!(super::gunzip(b"", 1024).unwrap(), b"");
}

/// A small body that would decompress to 64 MiB is refused at the limit.
#[test]
fn a_small_body_cannot_inflate_past_the_limit() {
    let bomb = gzip(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let mut reader = Gunzip::new(1 << 20);
    assert_eq!(reader.push(&bomb), Err(GunzipError::TooLarge(1 << 20)));
}

proptest! {
    /// Members split anywhere: the chunks a connection delivers never line up with them.
    #[test]
    fn members_read_back_whatever_the_chunks(
        members in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..2000), 1..4),
        cuts in proptest::collection::vec(0usize..6000, 0..6),
    ) {
        let stream: Vec<u8> = members.iter().flat_map(|m| gzip(m)).collect();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(stream.len())).collect();
        cuts.sort_unstable();
        let mut reader = Gunzip::new(1 << 20);
        let mut out = Vec::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([stream.len()]) {
            out.extend(reader.push(&stream[at..cut]).unwrap());
            at = cut;
        }
        out.extend(reader.finish().unwrap());
        prop_assert_eq!(out, members.concat());
    }

    #[test]
    fn gunzip_never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = super::gunzip(&data, 1 << 16);
    }

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
