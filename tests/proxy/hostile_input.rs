//! Hostile input: generated paths, query parameters and `Accept` values, and malformed request
//! heads over raw TCP, sent to the fake apiserver and to kubeplex in front of it. kubeplex
//! must answer each with the apiserver's status (the fake follows kube-apiserver 1.36's rules:
//! Go's net/http and net/url first, then the apiserver's decoding), and stay up: a normal list
//! still works after every case, and no handler panicked.

use std::time::{Duration, Instant};

use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use kubeplex_test_support::stack::Stack;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NORMAL_LIST: &str = "/api/v1/namespaces/team-0/configmaps";

fn small() -> ClusterShape {
    ClusterShape { nodes: 3, namespaces: 2, pods: 20, configmaps: 8, services: 2 }
}

/// What a raw request got back: the status of the first response, or `None` when the
/// connection was closed (or stayed silent) without one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: Option<u16>,
    head: String,
    body: Vec<u8>,
}

/// Writes `raw` (then, with `half_close`, ends the write side) and reads the response head,
/// and the body when the response ends with the connection. A streamed answer (a watch) is
/// read up to its head only.
async fn exchange(addr: &str, raw: &[u8], half_close: bool) -> Answer {
    let silent = Answer { status: None, head: String::new(), body: Vec::new() };
    let Ok(Ok(mut s)) =
        tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await
    else {
        panic!("{addr} does not accept connections");
    };
    // A server may answer and close before it has read everything (a huge head): a failed
    // write is not the answer.
    let _ = s.write_all(raw).await;
    if half_close {
        let _ = s.shutdown().await;
    }
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ if buf.is_empty() => return silent,
            _ => break buf.len(),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status = head.split(' ').nth(1).and_then(|c| c.get(..3)).and_then(|c| c.parse().ok());
    let mut body = buf[head_end..].to_vec();
    let lower = head.to_ascii_lowercase();
    let length = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let to_close = length.is_none() && !lower.contains("transfer-encoding");
    while to_close || length.is_some_and(|n| body.len() < n) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => body.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    Answer { status, head, body }
}

fn get_request(target: &[u8], accept: Option<&[u8]>) -> Vec<u8> {
    let mut r = b"GET ".to_vec();
    r.extend_from_slice(target);
    r.extend_from_slice(b" HTTP/1.1\r\nHost: kubernetes\r\nUser-Agent: hostile/1.0\r\n");
    if let Some(a) = accept {
        r.extend_from_slice(b"Accept: ");
        r.extend_from_slice(a);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"Connection: close\r\n\r\n");
    r
}

/// A normal list through kubeplex still works, and nothing below it has panicked.
async fn assert_up(stack: &Stack, after: &str) {
    let r = kubeplex_test_support::get(&stack.addr(), NORMAL_LIST).await;
    assert_eq!(r.status, 200, "kubeplex stopped answering lists after {after}");
}

/// A small seeded generator (xorshift): the same cases on every run, so a failure is
/// reproduced by running the test again; the case is printed with it.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T: ?Sized>(&mut self, from: &[&'a T]) -> &'a T {
        from[self.below(from.len())]
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// One path segment: plain, escaped (validly or not), dot segments, empty, very long,
/// non-UTF-8 once decoded, raw and escaped unicode.
fn segment(g: &mut Gen, plain: &str) -> Vec<u8> {
    match g.below(16) {
        0 => b"%zz".to_vec(),
        1 => b"%".to_vec(),
        2 => format!("{plain}%4").into_bytes(),
        3 => b"..".to_vec(),
        4 => b".".to_vec(),
        5 => Vec::new(),
        6 => "x".repeat(3000).into_bytes(),
        7 => b"%ff%fe".to_vec(),
        8 => "t\u{e9}am-0".as_bytes().to_vec(),
        9 => b"t%C3%A9am-0".to_vec(),
        10 => b"team%2D0".to_vec(),
        11 => b"a%2Fb".to_vec(),
        12 => b"%25".to_vec(),
        _ => plain.as_bytes().to_vec(),
    }
}

fn path(g: &mut Gen) -> Vec<u8> {
    let shapes: &[&[&str]] = &[
        &["api", "v1", "namespaces", "team-0", "configmaps"],
        &["api", "v1", "namespaces", "team-0", "configmaps", "config-0"],
        &["api", "v1", "namespaces", "team-1", "pods"],
        &["api", "v1", "pods"],
        &["api", "v1", "nodes", "node-1"],
        &["api", "v1", "namespaces", "team-0"],
        &["apis", "apps", "v1", "namespaces", "team-0", "deployments"],
        &["api", "v1", "configmaps"],
        &["api", "v1"],
        &["apis"],
        &["version"],
    ];
    let shape = shapes[g.below(shapes.len())];
    let mut out = Vec::new();
    for (i, plain) in shape.iter().enumerate() {
        out.push(b'/');
        // Most segments stay plain: a path with one odd segment reaches deeper code.
        if i >= 2 && g.chance(4) {
            out.extend(segment(g, plain));
        } else {
            out.extend_from_slice(plain.as_bytes());
        }
    }
    if g.chance(10) {
        out.push(b'/');
    }
    if g.chance(12) {
        out.splice(0..0, b"/".iter().copied());
    }
    out
}

fn parameter(g: &mut Gen) -> String {
    let huge = "v".repeat(10_000);
    match g.below(20) {
        0 | 1 => format!("watch={}", g.pick(&["1", "0", "true", "false", "x", "", "%00", "FALSE"])),
        2 => format!("watch={}&watch={}", g.pick(&["x", "0", "1"]), g.pick(&["%00", "0", "false"])),
        3 => format!(
            "limit={}",
            g.pick(&["5", "-1", "0", "x", "99999999999999999999", "", "1e3", "+2", "%zz"])
        ),
        4 => format!("timeoutSeconds={}", g.pick(&["1", "x", "-5", "", "99999999999999999999"])),
        5 => format!(
            "resourceVersion={}",
            g.pick(&["0", "", "abc", "1", "-1", "18446744073709551616", " 1", "%ff"])
        ),
        6 => format!("resourceVersionMatch={}", g.pick(&["Exact", "NotOlderThan", "bogus", ""])),
        7 => format!(
            "labelSelector={}",
            g.pick(&["app%3Dapp-1", "a%20in%20(", "!!", "app%21%3D", "x%3D%3D%3Dy", "a,,b"])
        ),
        8 => format!(
            "fieldSelector={}",
            g.pick(&[
                "metadata.name%3Dconfig-1",
                "spec.nodeName%3Dnode-1",
                "bogus%3D1",
                "a%3D%3Db%3D%3Dc",
                "metadata.name",
            ])
        ),
        9 => format!("continue={}", g.pick(&["garbage", "", "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"])),
        10 => format!("sendInitialEvents={}", g.pick(&["true", "false", "x"])),
        11 => format!("allowWatchBookmarks={}", g.pick(&["true", "0"])),
        12 => format!("includeObject={}", g.pick(&["None", "Object", "bogus"])),
        13 => "foo=bar".into(),
        14 => "".into(),
        15 => "a;b=1".into(),
        16 => format!("labelSelector=app%3D{huge}"),
        17 => format!("unknown={huge}"),
        18 => format!("export={}", g.pick(&["true", "0", ""])),
        _ => "pretty=false".into(),
    }
}

fn accept(g: &mut Gen) -> Option<&'static [u8]> {
    let values: &[&[u8]] = &[
        b"application/json",
        b"application/vnd.kubernetes.protobuf",
        b"application/vnd.kubernetes.protobuf, application/json",
        b"application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
        b"application/json;as=Table;v=v2;g=meta.k8s.io",
        b"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        b"application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        b"*/*",
        b"text/html",
        b"application/yaml",
        b"garbage;;;=",
        b"application/json;q=0",
        b"",
    ];
    (!g.chance(6)).then(|| values[g.below(values.len())])
}

/// Every generated request gets the same status from kubeplex as from the fake apiserver, and
/// kubeplex stays up through all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_requests_get_the_apiservers_status() {
    let stack = Stack::new(small(), &["configmaps", "pods"]).await;
    let (proxy, upstream) = (stack.addr(), stack.upstream());
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    let cases = 240;
    let mut diverged = Vec::new();
    let mut statuses = std::collections::BTreeMap::<Option<u16>, usize>::new();
    for case in 0..cases {
        let mut target = path(&mut g);
        let n = g.below(4);
        if n > 0 || g.chance(8) {
            let params: Vec<String> = (0..n).map(|_| parameter(&mut g)).collect();
            target.push(b'?');
            target.extend_from_slice(params.join("&").as_bytes());
        }
        let accept = accept(&mut g);
        let raw = get_request(&target, accept);
        let (direct, through) =
            tokio::join!(exchange(&upstream, &raw, false), exchange(&proxy, &raw, false));
        let shown = format!(
            "case {case}: GET {} Accept {:?}",
            String::from_utf8_lossy(&target).chars().take(300).collect::<String>(),
            accept.map(String::from_utf8_lossy)
        );
        *statuses.entry(direct.status).or_default() += 1;
        if direct.status != through.status {
            diverged.push(format!(
                "{shown}: apiserver {:?}, kubeplex {:?}\n  apiserver: {}\n  kubeplex:  {}",
                direct.status,
                through.status,
                String::from_utf8_lossy(&direct.body).chars().take(300).collect::<String>(),
                String::from_utf8_lossy(&through.body).chars().take(300).collect::<String>(),
            ));
        }
        assert_up(&stack, &shown).await;
    }
    println!("the fake apiserver's statuses: {statuses:?}");
    // The generator reaches past the parsing: successes and each kind of refusal, and no
    // connection left without an answer.
    for status in [200, 400, 404, 422] {
        assert!(statuses.get(&Some(status)).is_some_and(|n| *n > 3), "few {status}s: {statuses:?}");
    }
    assert_eq!(statuses.get(&None), None, "{statuses:?}");
    assert!(
        diverged.is_empty(),
        "{} of {cases} diverged:\n{}",
        diverged.len(),
        diverged.join("\n")
    );
    assert_eq!(stack.metric("kubeplex_request_panics_total").await, 0);
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
}

/// The two cases, byte for byte: an invalid escape gets net/http's own 400 from
/// kubeplex without the upstream being asked (it is stalled here: a request sent on would
/// hang), and a repeated `watch` is read by its first value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_escape_is_refused_as_go_does_without_the_upstream() {
    let stack = Stack::new(small(), &["configmaps"]).await;
    let (proxy, upstream) = (stack.addr(), stack.upstream());
    let raw = get_request(b"/api/v1/namespaces/%zz/configmaps", Some(b"application/json"));
    let direct = exchange(&upstream, &raw, false).await;
    stack.sim.stall(true);
    let through = tokio::time::timeout(Duration::from_secs(5), exchange(&proxy, &raw, false))
        .await
        .expect("kubeplex answered without waiting for the (stalled) upstream");
    stack.sim.stall(false);
    for a in [&direct, &through] {
        assert_eq!(a.status, Some(400), "{a:?}");
        assert!(a.head.to_ascii_lowercase().contains("content-type: text/plain; charset=utf-8"));
        assert!(a.head.to_ascii_lowercase().contains("connection: close"));
        assert_eq!(a.body, b"400 Bad Request");
        assert!(!a.head.contains("Audit-Id"), "net/http answers before the apiserver: {a:?}");
    }
    // `watch=x&watch=%00`: the first value, `x`, is true: a watch (its head is 200 at once).
    let raw = get_request(b"/api/v1/namespaces/team-0/configmaps?watch=x&watch=%00", None);
    let (direct, through) =
        tokio::join!(exchange(&upstream, &raw, false), exchange(&proxy, &raw, false));
    assert_eq!((direct.status, through.status), (Some(200), Some(200)));
    assert!(
        through.head.contains("Transfer-Encoding: chunked")
            || through.head.contains("transfer-encoding: chunked")
    );
    // `watch=0&watch=1`: a list.
    let raw = get_request(b"/api/v1/namespaces/team-0/configmaps?watch=0&watch=1", None);
    let through = exchange(&proxy, &raw, false).await;
    assert_eq!(through.status, Some(200));
    assert!(String::from_utf8_lossy(&through.body).contains("\"kind\":\"ConfigMapList\""));
    // A malformed limit after a good one is never read; a malformed one first is a 400.
    let raw = get_request(b"/api/v1/namespaces/team-0/configmaps?limit=x&limit=2", None);
    let (direct, through) =
        tokio::join!(exchange(&upstream, &raw, false), exchange(&proxy, &raw, false));
    assert_eq!((direct.status, through.status), (Some(400), Some(400)));
    assert_eq!(direct.body, through.body);
    // A named GET is a get whatever its query says (`GetResource` reads only GetOptions):
    // `watch=1` and a malformed `limit` are ignored, and the object comes back.
    let raw = get_request(b"/api/v1/namespaces/team-0/configmaps/config-0?watch=1&limit=x", None);
    let (direct, through) =
        tokio::join!(exchange(&upstream, &raw, false), exchange(&proxy, &raw, false));
    assert_eq!((direct.status, through.status), (Some(200), Some(200)));
    assert!(String::from_utf8_lossy(&through.body).starts_with("{\"kind\":\"ConfigMap\""));
    assert_eq!(direct.body, through.body);
    assert_up(&stack, "the issue's cases").await;
    assert_eq!(stack.metric("kubeplex_request_panics_total").await, 0);
}

/// What Go's net/http does with a malformed head, for the table below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Go {
    /// Answers this status, then closes.
    Answers(u16),
    /// Closes without an answer.
    Closes,
}

/// (name, bytes, half-close after writing, Go's answer, hyper's when it differs)
type HeadCase = (&'static str, Vec<u8>, bool, Go, Option<Go>);

/// Malformed request heads over raw TCP: kubeplex's listener (its lean HTTP/1.1 server and
/// hyper behind it) answers each exactly as the fake apiserver's (hyper) does, and stays up.
/// Each case names what Go's net/http (kube-apiserver's server) does; where hyper differs the
/// case says so, and the assertion holds hyper's answer. Both listeners here are hyper's, so
/// these differences are kubeplex's and the fake's alike; none changes what a conforming
/// client (client-go, kubectl, kube-rs) sees:
/// - `HTTP/2.0` in an HTTP/1 request line: Go 505, hyper 400 (no client sends it);
/// - HTTP/1.1 without `Host`: Go 400 ("missing required Host header"), hyper serves it
///   (every HTTP/1.1 client sends Host);
/// - more than 100 header lines: Go has no count limit (only 1 MiB of head), hyper 431
///   (a client impersonating with over ~95 groups or extras would notice);
/// - a request target over 64 KiB: Go serves it (1 MiB of head), hyper 414 (a label
///   selector that long would notice);
/// - an unknown `Transfer-Encoding`: Go 501, hyper 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_heads_are_answered_or_closed_and_kubeplex_stays_up() {
    let stack = Stack::with_sim(SimBuilder::new(), small(), &["configmaps"]).await;
    let (proxy, upstream) = (stack.addr(), stack.upstream());
    let huge_header =
        format!("GET /api HTTP/1.1\r\nHost: k\r\nX-Big: {}\r\n\r\n", "a".repeat(1 << 20));
    let many_headers = format!(
        "GET /api HTTP/1.1\r\nHost: k\r\n{}Connection: close\r\n\r\n",
        (0..120).map(|i| format!("X-H{i}: v\r\n")).collect::<String>()
    );
    let long_target =
        format!("GET /api/v1/namespaces/{} HTTP/1.1\r\nHost: k\r\n\r\n", "n".repeat(70_000));
    // (name, bytes, half-close after writing, Go's answer, hyper's when it differs)
    let cases: Vec<HeadCase> = vec![
        ("garbage", b"\x16\x03\x01\x00\xa5garbage\r\n\r\n".to_vec(), false, Go::Answers(400), None),
        ("request line without a target", b"GET\r\n\r\n".to_vec(), false, Go::Answers(400), None),
        ("HTTP/0.9", b"GET /api\r\n\r\n".to_vec(), false, Go::Answers(400), None),
        (
            "header line without a colon",
            b"GET /api HTTP/1.1\r\nHost: k\r\nNoColonHere\r\n\r\n".to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        (
            "space before the colon",
            b"GET /api HTTP/1.1\r\nHost : k\r\n\r\n".to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        ("a 1 MiB header", huge_header.into_bytes(), false, Go::Answers(431), None),
        (
            "a non-numeric Content-Length",
            b"POST /api/v1/namespaces/team-0/configmaps HTTP/1.1\r\nHost: k\r\nContent-Length: abc\r\n\r\n"
                .to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        (
            "a negative Content-Length",
            b"POST /api/v1/namespaces/team-0/configmaps HTTP/1.1\r\nHost: k\r\nContent-Length: -1\r\n\r\n"
                .to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        (
            "two different Content-Lengths",
            b"POST /api/v1/namespaces/team-0/configmaps HTTP/1.1\r\nHost: k\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx"
                .to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        (
            "a malformed % escape in the target",
            b"GET /api/v1/namespaces/%zz/configmaps HTTP/1.1\r\nHost: k\r\n\r\n".to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        (
            "a control byte in the target",
            b"GET /api/v1/na\x01mespaces HTTP/1.1\r\nHost: k\r\n\r\n".to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        (
            "a space in the target",
            b"GET /api/v1 x HTTP/1.1\r\nHost: k\r\n\r\n".to_vec(),
            false,
            Go::Answers(400),
            None,
        ),
        (
            "a truncated head, then the client's end",
            b"GET /api/v1/namespaces/team-0/configmaps HTTP/1.1\r\nHost: k\r\n".to_vec(),
            true,
            Go::Closes,
            None,
        ),
        ("a truncated request line", b"GET /api/v1/na".to_vec(), true, Go::Closes, None),
        ("only CRLFs", b"\r\n\r\n\r\n".to_vec(), true, Go::Closes, None),
        ("HTTP/2.0 in an HTTP/1 request line", b"GET /api HTTP/2.0\r\nHost: k\r\n\r\n".to_vec(), false, Go::Answers(505), Some(Go::Answers(400))),
        ("HTTP/1.1 without Host", b"GET /api HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec(), false, Go::Answers(400), Some(Go::Answers(200))),
        ("120 headers", many_headers.into_bytes(), false, Go::Answers(200), Some(Go::Answers(431))),
        ("a 70 KB target", long_target.into_bytes(), false, Go::Answers(404), Some(Go::Answers(414))),
        (
            "an unsupported Transfer-Encoding",
            b"POST /api/v1/namespaces/team-0/configmaps HTTP/1.1\r\nHost: k\r\nTransfer-Encoding: gzip\r\n\r\n"
                .to_vec(),
            false,
            Go::Answers(501),
            Some(Go::Answers(400)),
        ),
    ];
    let mut table = Vec::new();
    let mut mismatched = Vec::new();
    for (name, raw, half_close, go, hyper) in &cases {
        let (direct, through) =
            tokio::join!(exchange(&upstream, raw, *half_close), exchange(&proxy, raw, *half_close));
        let outcome = |a: &Answer| a.status.map_or(Go::Closes, Go::Answers);
        table.push(format!(
            "{name}: Go {go:?}, fake apiserver {:?}, kubeplex {:?}",
            outcome(&direct),
            outcome(&through)
        ));
        if outcome(&direct) != outcome(&through) || outcome(&through) != hyper.unwrap_or(*go) {
            mismatched.push(table.last().cloned().unwrap_or_default());
        }
        assert_up(&stack, name).await;
    }
    println!("{}", table.join("\n"));
    assert!(mismatched.is_empty(), "mismatched:\n{}", mismatched.join("\n"));
    assert_eq!(stack.metric("kubeplex_request_panics_total").await, 0);
}
