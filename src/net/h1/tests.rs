use super::*;

fn lean(buf: &[u8]) -> (Request<ReqBody>, usize, bool) {
    match parse_head(buf) {
        Parsed::Lean { req, len, close } => (*req, len, close),
        other => panic!("not lean: {other:?}"),
    }
}

fn is_other(buf: &[u8]) -> bool {
    matches!(parse_head(buf), Parsed::Other)
}

#[test]
fn a_watch_request_is_served_here_with_its_headers_in_order() {
    let head = b"GET /api/v1/pods?watch=1&resourceVersion=7 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kubelet/v1.36\r\nAccept: application/json, */*\r\naccept: text/plain\r\n\r\n";
    let mut buf = head.to_vec();
    buf.extend_from_slice(b"GET /next");
    let (req, len, close) = lean(&buf);
    assert_eq!(len, head.len());
    assert!(!close);
    assert_eq!(req.method(), Method::GET);
    assert_eq!(req.version(), Version::HTTP_11);
    assert_eq!(req.uri().path(), "/api/v1/pods");
    assert_eq!(req.uri().query(), Some("watch=1&resourceVersion=7"));
    let accept: Vec<_> = req.headers().get_all("accept").iter().collect();
    assert_eq!(accept, ["application/json, */*", "text/plain"]);
    assert_eq!(req.headers()["user-agent"], "kubelet/v1.36");
    assert!(req.body().is_end_stream());
}

#[test]
fn connection_close_and_an_empty_content_length_stay_lean() {
    let (_, _, close) = lean(b"GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n");
    assert!(close);
    let (req, _, close) = lean(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(!close);
    assert_eq!(req.headers()["content-length"], "0");
}

#[test]
fn an_incomplete_head_waits_for_more() {
    assert!(matches!(parse_head(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n"), Parsed::Partial));
    assert!(matches!(parse_head(b"GE"), Parsed::Partial));
}

#[test]
fn everything_else_goes_to_hyper() {
    // HTTP/2's preface, other methods, bodies, upgrades, HTTP/1.0, absolute forms, garbage.
    assert!(is_other(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    assert!(is_other(b"POST /api/v1/pods HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"));
    assert!(is_other(b"HEAD /api HTTP/1.1\r\n\r\n"));
    assert!(is_other(b"GET /api HTTP/1.1\r\nContent-Length: 5\r\n\r\n"));
    assert!(is_other(b"GET /api HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
    assert!(is_other(b"GET /exec HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n"));
    assert!(is_other(b"GET /api HTTP/1.1\r\nExpect: 100-continue\r\n\r\n"));
    assert!(is_other(b"GET /api HTTP/1.0\r\n\r\n"));
    assert!(is_other(b"GET http://example/api HTTP/1.1\r\n\r\n"));
    assert!(is_other(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"));
    assert!(is_other(b"GET /api HTTP/1.1\r\nBad Header: x\r\n\r\n"));
}

fn head_text(status: u16, headers: &[(&str, &str)], body: Body, close: bool) -> (String, Framing) {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let (head, framing, _) = encode_head(StatusCode::from_u16(status).unwrap(), &map, &body, close);
    let text = String::from_utf8(head).unwrap();
    let (before, date) = text.split_once("date: ").expect("a date header");
    assert!(date.ends_with(" GMT\r\n\r\n"), "{date:?}");
    (before.to_string(), framing)
}

#[test]
fn heads_are_written_as_hyper_writes_them() {
    let full = || -> kubeplex_net::Body {
        http_body_util::BodyExt::boxed(http_body_util::BodyExt::map_err(
            http_body_util::Full::new(Bytes::from_static(b"hello")),
            |never| match never {},
        ))
    };
    let (h, f) = head_text(200, &[("content-type", "application/json")], full(), false);
    assert_eq!(h, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n");
    assert_eq!(f, Framing::Length(5));

    let streaming = http_body_util::StreamBody::new(futures_util::stream::empty::<
        Result<http_body::Frame<Bytes>, kubeplex_net::BoxError>,
    >())
    .boxed();
    let (h, f) =
        head_text(410, &[("audit-id", "a"), ("transfer-encoding", "gzip")], streaming, true);
    assert_eq!(
        h,
        "HTTP/1.1 410 Gone\r\naudit-id: a\r\nconnection: close\r\ntransfer-encoding: chunked\r\n"
    );
    assert_eq!(f, Framing::Chunked);

    let (h, f) = head_text(204, &[("content-length", "0")], full(), false);
    assert_eq!(h, "HTTP/1.1 204 No Content\r\n");
    assert_eq!(f, Framing::None);

    // A content-length the response names wins over the body's size, once.
    let (h, f) = head_text(200, &[("content-length", "9"), ("content-length", "9")], full(), false);
    assert_eq!(h, "HTTP/1.1 200 OK\r\ncontent-length: 9\r\n");
    assert_eq!(f, Framing::Length(9));

    let (h, _) = head_text(599, &[], full(), false);
    assert_eq!(h, "HTTP/1.1 599 <none>\r\ncontent-length: 5\r\n");
}
