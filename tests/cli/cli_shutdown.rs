//! A rolling update as the kubelet does it: SIGTERM to `kubeplex serve` while 200 watches are
//! open and a long list is being read. The list completes (every item, valid JSON), every watch
//! ends at its end (the chunked terminator, so clients resume from their last resourceVersion
//! rather than see a broken stream), and the process exits 0 within the grace period.

use std::process::Stdio;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::SimBuilder;
use kubeplex_test_support as support;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubeplex");
const WATCHES: usize = 200;
const GRACE: Duration = Duration::from_secs(20);

/// Starts a GET whose client reads slowly: a small receive buffer and a pause per body frame,
/// so that kubeplex is still writing the answer when SIGTERM arrives. Returns the status and a
/// task that reads the rest (the whole body and whether it ended cleanly).
async fn slow_get(
    addr: &str,
    path: &str,
) -> (u16, tokio::task::JoinHandle<(bytes::Bytes, bool)>, tokio::sync::oneshot::Receiver<()>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let stream = tokio::time::timeout(support::STEP, socket.connect(addr.parse().unwrap()))
        .await
        .expect("connect timed out")
        .unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header("Host", addr)
        .header("Accept", "application/json")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = tokio::time::timeout(support::STEP, sender.send_request(req))
        .await
        .expect("response timed out")
        .unwrap();
    let status = resp.status().as_u16();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let reader = tokio::spawn(async move {
        let mut body = resp.into_body();
        let mut got = bytes::BytesMut::new();
        let mut started = Some(started_tx);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match tokio::time::timeout(support::STEP, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        got.extend_from_slice(&data);
                    }
                    if let Some(tx) = started.take() {
                        let _ = tx.send(());
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Ok(Some(Err(_))) | Err(_) => return (got.freeze(), false),
                Ok(None) => return (got.freeze(), true),
            }
        }
        (got.freeze(), false)
    });
    (status, reader, started_rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_a_long_list_ends_200_watches_cleanly_and_exits_0() {
    // Enough pods that the list is megabytes: more than the kernel's socket buffers hold, so
    // kubeplex is still writing it after the signal.
    let shape = ClusterShape { nodes: 4, namespaces: 4, pods: 3500, configmaps: 40, services: 0 };
    let sim = SimBuilder::new().seed(seed::cluster(shape)).start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("kubeplex-cli-shutdown-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("upstream.kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let file = dir.join("kubeplex.yaml");
    std::fs::write(
        &file,
        format!(
            "kubeconfig: {}\nlisten: 127.0.0.1:0\nadminListen: 127.0.0.1:0\n\
             caches: [pods, configmaps]\nlogFormat: json\nshutdownGracePeriod: {}s\n",
            kubeconfig.display(),
            GRACE.as_secs()
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", file.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let serving = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if v["message"] == "kubeplex serving" {
                return v;
            }
        }
        panic!("kubeplex exited before serving");
    })
    .await
    .expect("kubeplex serving within 30s");
    // The rest of the log is drained so that kubeplex never blocks on a full pipe.
    let log = tokio::spawn(async move {
        let mut rest = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            rest.push(line);
        }
        rest
    });
    let listen = serving["listen"].as_str().unwrap().to_string();
    let admin = serving["admin"].as_str().unwrap().to_string();
    let mut ready = false;
    for _ in 0..400 {
        if support::get(&admin, "/readyz").await.status == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "ready within 20s");

    // 200 watches from the cache, half on pods and half on configmaps, each past its initial
    // state (the cache's state as ADDED events, then the bookmark of its end).
    let mut watches = Vec::with_capacity(WATCHES);
    for i in 0..WATCHES {
        let path = if i % 2 == 0 {
            "/api/v1/namespaces/team-1/configmaps?watch=1&resourceVersion=0"
        } else {
            "/api/v1/namespaces/team-2/pods?watch=1&resourceVersion=0&labelSelector=app%3Dnone"
        };
        let w = support::watch(&listen, path, "application/json").await;
        assert_eq!(w.status, 200, "watch {i}");
        watches.push(w);
    }
    for w in watches.iter_mut().step_by(2) {
        assert!(w.next_within(support::STEP).await.is_some(), "the configmaps' state arrives");
    }

    let direct = support::get(&sim.addr().to_string(), "/api/v1/pods?resourceVersion=0").await;
    let want = direct.json()["items"].as_array().unwrap().len();
    assert_eq!(want, 3500);
    let (status, list, started) = slow_get(&listen, "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(status, 200);
    tokio::time::timeout(support::STEP, started).await.expect("the list starts").unwrap();

    let pid = child.id().unwrap().to_string();
    let signalled = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().await.unwrap().success());

    // Every watch ends at its end, well before the grace period is over.
    for (i, w) in watches.iter_mut().enumerate() {
        let left = GRACE.saturating_sub(signalled.elapsed());
        assert!(w.ends_within(left).await, "watch {i} still open after the grace period");
        assert!(!w.broken(), "watch {i} was cut instead of ended");
    }
    let (body, clean) = list.await.unwrap();
    assert!(clean, "the list's stream ended cleanly ({} bytes read)", body.len());
    let list: serde_json::Value = serde_json::from_slice(&body).expect("the whole list, as JSON");
    assert_eq!(list["items"].as_array().unwrap().len(), want);
    assert!(body.len() > 8 << 20, "a long list: {} bytes", body.len());
    let read_for = signalled.elapsed();

    let status = tokio::time::timeout(GRACE, child.wait())
        .await
        .expect("exit within the grace period")
        .unwrap();
    let took = signalled.elapsed();
    eprintln!(
        "list: {} bytes, read until {read_for:?} after SIGTERM; exit after {took:?}",
        body.len()
    );
    assert_eq!(status.code(), Some(0), "exit 0 after SIGTERM");
    assert!(took < GRACE, "exited {took:?} after SIGTERM");
    // The list was still being read after the signal: it is what held the exit back.
    assert!(read_for > Duration::from_millis(200), "the list was read for {read_for:?}");
    let logged = log.await.unwrap();
    assert!(logged.iter().any(|l| l.contains("SIGTERM")), "{logged:?}");
    let _ = std::fs::remove_dir_all(dir);
}
