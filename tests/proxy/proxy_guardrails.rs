//! Passthrough guardrails (issue 13): in-flight limits answered as the apiserver's maxinflight
//! filter does (429, `Retry-After: 1`, plain text) once a request has waited in a bounded queue
//! as priority and fairness queues it, long-running and cached requests exempt;
//! bodies over the limit get the apiserver's 413 Status and never reach the upstream.

use kubeplex_test_support as support;

use std::time::Duration;

use http::Method;
use kubeplex::cache::store::StoreLimits;
use kubeplex::live::caches::CachesConfig;
use kubeplex::serve::guardrails::Guardrails;
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use support::stack::default_caches;
use support::*;

async fn stack(g: Guardrails) -> (Sim, Proxy, std::path::PathBuf) {
    let shape = ClusterShape { nodes: 1, namespaces: 1, pods: 3, configmaps: 2, services: 1 };
    let sim = SimBuilder::new().seed(seed::cluster(shape)).start().await.expect("sim");
    let dir = std::env::temp_dir().join(format!(
        "kubeplex-guard-{}-{}",
        std::process::id(),
        sim.addr().port()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let kc = dir.join("upstream.kubeconfig");
    sim.write_kubeconfig(&kc).expect("kubeconfig");
    let upstream =
        Upstream::new(UpstreamConfig::resolve(Some(&kc), None).expect("config")).expect("client");
    let caches = CachesConfig {
        limits: StoreLimits { max_snapshots: 100, max_snapshot_age: Duration::from_secs(300) },
        ..default_caches(&["pods"])
    };
    let proxy = Proxy::builder(upstream, caches)
        .admin("127.0.0.1:0".parse().expect("addr"))
        .guardrails(g)
        .start()
        .await
        .expect("proxy");
    let admin = proxy.admin_addr.expect("admin").to_string();
    for _ in 0..200 {
        if get(&admin, "/readyz").await.status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (sim, proxy, dir)
}

async fn scrape(proxy: &Proxy) -> String {
    let admin = proxy.admin_addr.expect("admin").to_string();
    String::from_utf8_lossy(&get(&admin, "/metrics").await.body).into_owned()
}

fn sum(text: &str, name: &str, labels: &[&str]) -> u64 {
    let prefix = format!("{name}{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test]
async fn oversized_create_gets_the_apiservers_413_and_is_not_forwarded() {
    let (sim, proxy, dir) = stack(Guardrails::default()).await;
    let addr = proxy.addr.to_string();
    let posts = || sum(&sim.metrics_text(), "apiserver_request_total", &["verb=\"POST\""]);
    let before = posts();
    let big = "x".repeat(4 * 1024 * 1024);
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "team-0"}, "data": {"k": big}});
    let r = send_json(&addr, Method::POST, "/api/v1/namespaces/team-0/configmaps", &cm).await;
    assert_eq!(r.status, 413);
    assert_eq!(r.header("content-type"), "application/json");
    // The apiserver's NewRequestEntityTooLargeError("limit is 3145728"), as its JSON
    // serializer writes it (a newline after the object).
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}
"#
    );
    assert_eq!(posts(), before, "the oversized create reached the upstream");
    // A create within the limit goes through.
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "small", "namespace": "team-0"}, "data": {"k": "v"}});
    let r = send_json(&addr, Method::POST, "/api/v1/namespaces/team-0/configmaps", &cm).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(posts(), before + 1);
    let m = scrape(&proxy).await;
    assert_eq!(sum(&m, "kubeplex_requests_total", &["source=\"denied\"", "code=\"413\""]), 1);
    let _ = std::fs::remove_dir_all(dir);
}

/// A chunked body (no Content-Length) over HTTP/1.1: read at most the limit; past it, the
/// apiserver's 413 and nothing forwarded; within it, forwarded whole.
async fn chunked_post(addr: &str, path: &str, body: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: k\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(64 * 1024) {
        let sent = async {
            conn.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
            conn.write_all(chunk).await?;
            conn.write_all(b"\r\n").await
        };
        // kubeplex may answer (413) and close before the whole body is sent.
        if sent.await.is_err() {
            break;
        }
    }
    let _ = conn.write_all(b"0\r\n\r\n").await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(STEP, conn.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn an_oversized_chunked_create_gets_the_413_and_is_not_forwarded() {
    let (sim, proxy, dir) = stack(Guardrails::default()).await;
    let addr = proxy.addr.to_string();
    let path = "/api/v1/namespaces/team-0/configmaps";
    let posts = || sum(&sim.metrics_text(), "apiserver_request_total", &["verb=\"POST\""]);
    let before = posts();
    let big = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "team-0"}, "data": {"k": "x".repeat(4 << 20)}});
    let answer = chunked_post(&addr, path, &serde_json::to_vec(&big).unwrap()).await;
    assert!(answer.starts_with("HTTP/1.1 413 Request Entity Too Large\r\n"), "{answer:.300}");
    assert!(answer.contains("\"message\":\"Request entity too large: limit is 3145728\""));
    assert_eq!(posts(), before, "the oversized create reached the upstream");
    let small = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "small-chunked", "namespace": "team-0"}, "data": {"k": "v"}});
    let answer = chunked_post(&addr, path, &serde_json::to_vec(&small).unwrap()).await;
    assert!(answer.starts_with("HTTP/1.1 201 Created\r\n"), "{answer:.300}");
    assert_eq!(posts(), before + 1);
    assert!(sim.get("", "configmaps", "team-0", "small-chunked").is_some());
    // The fake apiserver's own answer has the same status line (Go's, not hyper's).
    let (upstream, big) = (sim.addr().to_string(), serde_json::to_vec(&big).unwrap());
    let direct = chunked_post(&upstream, path, &big).await;
    assert!(direct.starts_with("HTTP/1.1 413 Request Entity Too Large\r\n"), "{direct:.300}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn over_the_inflight_limit_reads_get_429_but_watches_and_cached_reads_do_not() {
    let wait = Duration::from_millis(300);
    let g = Guardrails { max_requests_inflight: 2, queue_wait: wait, ..Guardrails::default() };
    let (sim, proxy, dir) = stack(g).await;
    let addr = proxy.addr.to_string();
    sim.stall(true);
    let held: Vec<_> = (0..2)
        .map(|_| {
            let a = addr.clone();
            tokio::spawn(async move { get(&a, "/version").await })
        })
        .collect();
    let inflight = "kubeplex_passthrough_inflight_requests";
    let mut m = String::new();
    for _ in 0..100 {
        m = scrape(&proxy).await;
        if sum(&m, inflight, &["request_kind=\"readOnly\""]) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sum(&m, inflight, &["request_kind=\"readOnly\""]), 2, "{m}");

    // The third passthrough read waits its queue wait for a slot in vain: the maxinflight
    // filter's tooManyRequests.
    let asked = std::time::Instant::now();
    let r = get(&addr, "/version").await;
    assert!(asked.elapsed() >= wait, "refused before its wait ran out");
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), "1");
    assert_eq!(r.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(r.header("x-content-type-options"), "nosniff");
    assert_eq!(&r.body[..], b"Too many requests, please try again later.\n");

    // A cached read costs the upstream nothing: served while the upstream is stalled.
    let r = get(&addr, "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(r.status, 200);

    // A passthrough watch is long-running: not refused (it waits on the stalled upstream).
    let a = addr.clone();
    let w = tokio::spawn(async move {
        watch_with(
            &a,
            "/api/v1/namespaces/team-0/configmaps?watch=true",
            &[("Accept", "application/json"), ("Authorization", "Bearer client")],
        )
        .await
        .status
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!w.is_finished(), "the watch was answered while the upstream is stalled");

    sim.stall(false);
    for h in held {
        let r = tokio::time::timeout(STEP, h).await.expect("held read").expect("task");
        assert_eq!(r.status, 200);
    }
    let status = tokio::time::timeout(STEP, w).await.expect("watch").expect("task");
    assert_eq!(status, 200);
    // Slots are released once the answers are sent.
    assert_eq!(get(&addr, "/version").await.status, 200);

    let m = scrape(&proxy).await;
    let dropped = "kubeplex_passthrough_dropped_requests_total";
    assert_eq!(sum(&m, dropped, &["request_kind=\"readOnly\""]), 1, "{m}");
    assert_eq!(sum(&m, "kubeplex_requests_total", &["source=\"denied\"", "code=\"429\""]), 1);
    assert_eq!(sum(&m, inflight, &["request_kind=\"readOnly\""]), 0, "{m}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A request over the limit waits as the apiserver's priority and fairness queues it, and is let
/// in when a slot frees; only one that finds the queue full (as many waiting as the limit lets
/// in flight) is refused before its wait runs out.
#[tokio::test]
async fn a_write_over_the_limit_waits_in_the_queue_and_goes_through_when_a_slot_frees() {
    let g = Guardrails {
        max_mutating_requests_inflight: 1,
        queue_wait: Duration::from_secs(60),
        ..Guardrails::default()
    };
    let (sim, proxy, dir) = stack(g).await;
    let addr = proxy.addr.to_string();
    let create = |name: &str| {
        let a = addr.clone();
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "team-0"}, "data": {"k": "v"}});
        tokio::spawn(async move {
            send_json(&a, Method::POST, "/api/v1/namespaces/team-0/configmaps", &cm).await.status
        })
    };
    let until = |name: &'static str, kind: &'static str, n: u64| {
        let proxy = &proxy;
        async move {
            let mut m = String::new();
            for _ in 0..200 {
                m = scrape(proxy).await;
                if sum(&m, name, &[&format!("request_kind=\"{kind}\"")]) == n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("{name}{{{kind}}} never {n}: {m}");
        }
    };
    sim.stall(true);
    let held = create("held");
    until("kubeplex_passthrough_inflight_requests", "mutating", 1).await;
    let queued = create("queued");
    until("kubeplex_passthrough_waiting_requests", "mutating", 1).await;
    // The queue is full: refused at once, long before the minute's wait.
    let refused = tokio::time::timeout(STEP, create("refused")).await.expect("refused at once");
    assert_eq!(refused.expect("task"), 429);

    sim.stall(false);
    for (name, task) in [("held", held), ("queued", queued)] {
        let status = tokio::time::timeout(STEP, task).await.expect(name).expect("task");
        assert_eq!(status, 201, "{name}");
    }
    let m = scrape(&proxy).await;
    let dropped = "kubeplex_passthrough_dropped_requests_total";
    assert_eq!(sum(&m, dropped, &["request_kind=\"mutating\""]), 1, "{m}");
    let waiting = "kubeplex_passthrough_waiting_requests";
    assert_eq!(sum(&m, waiting, &["request_kind=\"mutating\""]), 0, "{m}");
    // Both writes the queue let in reached the apiserver; the refused one did not.
    let names = get(&addr, "/api/v1/namespaces/team-0/configmaps").await;
    let text = String::from_utf8_lossy(&names.body);
    assert!(text.contains("\"held\"") && text.contains("\"queued\""), "{text:.400}");
    assert!(!text.contains("\"refused\""), "{text:.400}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The fake apiserver sheds load as the real one does: `tooManyRequests`, plain text.
#[tokio::test]
async fn the_sims_throttle_answers_as_the_apiservers_too_many_requests() {
    let sim = SimBuilder::new().start().await.expect("sim");
    sim.throttle(1, 2);
    let r = get(&sim.addr().to_string(), "/api/v1/configmaps").await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), "2");
    assert_eq!(r.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(&r.body[..], b"Too many requests, please try again later.\n");
    assert_eq!(get(&sim.addr().to_string(), "/api/v1/configmaps").await.status, 200);
}
