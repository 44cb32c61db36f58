use bytes::Bytes;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use http_body_util::{BodyExt, Full};

use super::*;
use crate::upstream::config::{
    AuthConfig, CertFiles, ConfigSource, ExecConfig, PreferredServer, ServerUrl, TlsConfig,
    DEFAULT_CONNECT_TIMEOUT,
};
use crate::upstream::testing::{FakeServer, Pki, TempDir, APISERVER_MAX_STREAMS};

/// Fails the test instead of hanging on a missing answer.
async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut).await.expect("timed out")
}

fn config(server: &str, tls: TlsConfig, auth: AuthConfig) -> UpstreamConfig {
    UpstreamConfig {
        server: ServerUrl::parse(server, false).unwrap(),
        tls,
        auth,
        namespace: None,
        source: ConfigSource::InCluster,
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        token_reload_interval: Duration::ZERO,
        preferred: Vec::new(),
    }
}

fn trusting(pki: &Pki) -> TlsConfig {
    TlsConfig { ca_pem: Some(pki.ca_pem.clone().into_bytes()), ..TlsConfig::default() }
}

fn with_cert(pki: &Pki) -> TlsConfig {
    TlsConfig {
        client_cert: Some(ClientCertPem {
            cert_pem: pki.client_cert_pem.clone().into_bytes(),
            key_pem: pki.client_key_pem.clone().into_bytes(),
        }),
        ..trusting(pki)
    }
}

fn get(target: &str) -> Request<UpstreamBody> {
    Request::get(target).body(empty()).unwrap()
}

fn empty() -> UpstreamBody {
    Full::new(Bytes::new()).map_err(|never| match never {}).boxed()
}

async fn ok_body(response: Response<ResponseBody>) -> String {
    assert_eq!(response.status(), StatusCode::OK);
    let body = within(response.into_body().collect()).await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

async fn tls_server(pki: &Pki) -> FakeServer {
    FakeServer::tls(&pki.server_cert_pem, &pki.server_key_pem, &pki.ca_pem).await
}

#[tokio::test]
async fn long_watches_share_one_http2_connection_with_token_and_client_cert() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let upstream =
        Upstream::new(config(&url, with_cert(&pki), AuthConfig::Token("tok".into()))).unwrap();
    assert_eq!(upstream.base_url(), url);

    // Three watches open at once: over HTTP/1.1 they would need three connections.
    let sends = (0..3).map(|i| {
        let upstream = upstream.clone();
        async move { upstream.send(get(&format!("/api/v1/pods?watch=1&i={i}"))).await }
    });
    let mut open = Vec::new();
    for response in within(futures_join(sends)).await {
        let mut body = response.unwrap().into_body();
        let frame = within(body.frame()).await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(frame, "event\n");
        open.push(body);
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    for s in &seen {
        assert_eq!(s.version, Version::HTTP_2);
        assert_eq!(s.authorization.as_deref(), Some("Bearer tok"));
        assert!(s.client_cert);
        assert_eq!(s.host.as_deref(), Some(&url["https://".len()..]));
        assert_eq!(s.connection, seen[0].connection, "one shared connection");
    }
    let mut targets: Vec<_> = seen.iter().map(|s| s.target.clone()).collect();
    targets.sort();
    assert_eq!(
        targets,
        ["/api/v1/pods?watch=1&i=0", "/api/v1/pods?watch=1&i=1", "/api/v1/pods?watch=1&i=2"]
    );
    drop(open);
}

/// Watches hold their streams for as long as they run, and the apiserver lets a connection
/// carry 100 at once: past that, kubeplex opens another connection (as client-go does) rather
/// than make every later request wait for a watch to end.
#[tokio::test]
async fn past_the_apiservers_stream_limit_requests_go_on_another_connection() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let upstream = Upstream::new(config(&url, trusting(&pki), AuthConfig::None)).unwrap();
    let watches = 150;
    let sends = (0..watches).map(|i| {
        let upstream = upstream.clone();
        async move { upstream.send(get(&format!("/api/v1/pods?watch=1&i={i}"))).await }
    });
    let mut open = Vec::new();
    for response in within(futures_join(sends)).await {
        let mut body = response.unwrap().into_body();
        within(body.frame()).await.unwrap().unwrap();
        open.push(body);
    }
    // A read while every watch runs is answered at once.
    let version = within(upstream.send(get("/version"))).await.unwrap();
    assert_eq!(ok_body(version).await, "ok");

    let seen = server.seen();
    let mut per_connection = std::collections::BTreeMap::<usize, usize>::new();
    for s in seen.iter().filter(|s| s.target.contains("watch=1")) {
        assert_eq!(s.version, Version::HTTP_2);
        *per_connection.entry(s.connection).or_default() += 1;
    }
    assert_eq!(per_connection.values().sum::<usize>(), watches);
    assert!(per_connection.len() >= 2, "{per_connection:?}");
    assert!(
        per_connection.values().all(|n| *n <= APISERVER_MAX_STREAMS as usize),
        "{per_connection:?}"
    );
    // Once watches end, their streams are free again: no connection more.
    let connections = per_connection.len();
    open.truncate(10);
    for i in 0..20 {
        let r = within(upstream.send(get(&format!("/api/v1/pods?i={i}")))).await.unwrap();
        assert_eq!(ok_body(r).await, "ok");
    }
    let used: std::collections::BTreeSet<usize> =
        server.seen().iter().map(|s| s.connection).collect();
    assert_eq!(used.len(), connections, "{used:?}");
    drop(open);
}

/// `join_all` without the futures crate: spawn and await in order.
async fn futures_join<F, T>(futs: impl Iterator<Item = F>) -> Vec<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

#[tokio::test]
async fn send_replaces_the_callers_authorization_and_send_as_is_keeps_it_without_a_cert() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let url = format!("https://127.0.0.1:{}/prefix/", server.addr.port());
    let upstream =
        Upstream::new(config(&url, with_cert(&pki), AuthConfig::Token("own".into()))).unwrap();
    let from_caller = || {
        Request::get("https://kubeplex.local/api/v1/namespaces?limit=1")
            .version(Version::HTTP_2)
            .header(AUTHORIZATION, "Bearer caller")
            .header(HOST, "kubeplex.local")
            .body(empty())
            .unwrap()
    };
    ok_body(within(upstream.send(from_caller())).await.unwrap()).await;
    ok_body(within(upstream.send_as_is(from_caller())).await.unwrap()).await;
    let seen = server.seen();
    let got: Vec<_> = seen
        .iter()
        .map(|s| (s.target.as_str(), s.authorization.as_deref(), s.client_cert, s.host.as_deref()))
        .collect();
    let host = &url["https://".len()..url.len() - "/prefix/".len()];
    assert_eq!(
        got,
        [
            ("/prefix/api/v1/namespaces?limit=1", Some("Bearer own"), true, Some(host)),
            ("/prefix/api/v1/namespaces?limit=1", Some("Bearer caller"), false, Some(host)),
        ]
    );
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_rejected() {
    let (trusted, rogue) = (Pki::new(), Pki::new());
    let server = tls_server(&rogue).await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let upstream = Upstream::new(config(&url, trusting(&trusted), AuthConfig::None)).unwrap();
    let err = within(upstream.send(get("/version"))).await.unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with(&format!("request to {url}/version failed: ")), "{message}");
    assert!(message.contains("invalid peer certificate: UnknownIssuer"), "{message}");
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn insecure_skip_tls_verify_accepts_any_server_certificate() {
    let rogue = Pki::new();
    let server = tls_server(&rogue).await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let tls = TlsConfig { insecure_skip_tls_verify: true, ..TlsConfig::default() };
    let upstream = Upstream::new(config(&url, tls, AuthConfig::None)).unwrap();
    ok_body(within(upstream.send(get("/version"))).await.unwrap()).await;
    assert_eq!(server.seen()[0].version, Version::HTTP_2);
}

#[tokio::test]
async fn tls_server_name_overrides_the_host_for_verification() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let named = |name: &str| TlsConfig { server_name: Some(name.into()), ..trusting(&pki) };
    let good =
        Upstream::new(config(&url, named("kubernetes.default.svc"), AuthConfig::None)).unwrap();
    ok_body(within(good.send(get("/healthz"))).await.unwrap()).await;
    let bad = Upstream::new(config(&url, named("other.example"), AuthConfig::None)).unwrap();
    let err = within(bad.send(get("/healthz"))).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("invalid peer certificate: certificate not valid for name \"other.example\""),
        "{err}"
    );
}

#[tokio::test]
async fn a_rotated_token_file_is_picked_up_by_the_same_upstream() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let dir = TempDir::new("rotation");
    let token = dir.write("token", "first");
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let auth = AuthConfig::TokenFile { path: token.clone(), initial: "first".into() };
    let upstream = Upstream::new(config(&url, trusting(&pki), auth)).unwrap();
    ok_body(within(upstream.send(get("/a"))).await.unwrap()).await;
    // The kubelet swaps a symlink to a new file; a rename over the old one is the same to us.
    let next = dir.write("token.new", "second-token");
    std::fs::rename(next, &token).unwrap();
    ok_body(within(upstream.send(get("/b"))).await.unwrap()).await;
    let auths: Vec<_> = server.seen().into_iter().map(|s| s.authorization).collect();
    assert_eq!(auths, [Some("Bearer first".to_owned()), Some("Bearer second-token".to_owned())]);
}

#[tokio::test]
async fn plain_http_upstream_streams_bodies_over_http1() {
    let server = FakeServer::plain().await;
    let url = format!("http://127.0.0.1:{}", server.addr.port());
    let upstream = Upstream::new(config(&url, TlsConfig::default(), AuthConfig::None)).unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let req = Request::post("/api/v1/namespaces/default/configmaps")
        .version(Version::HTTP_2)
        .header(AUTHORIZATION, "Bearer caller")
        .body(ChannelBody(rx).boxed())
        .unwrap();
    let send = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.send(req).await }
    });
    // The request reaches the server while its body is still open: nothing is buffered.
    within(tx.send(Bytes::from("hel"))).await.unwrap();
    within(async {
        while server.seen().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    within(tx.send(Bytes::from("lo"))).await.unwrap();
    drop(tx);
    ok_body(within(send).await.unwrap().unwrap()).await;
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(s.version, Version::HTTP_11);
    assert_eq!(
        (s.method.as_str(), s.target.as_str()),
        ("POST", "/api/v1/namespaces/default/configmaps")
    );
    assert_eq!(s.host, Some(url["http://".len()..].to_owned()));
    // Without credentials of its own, kubeplex passes the caller's through.
    assert_eq!(s.authorization.as_deref(), Some("Bearer caller"));
    assert_eq!(s.body, b"hello");
}

/// A request body fed chunk by chunk from a channel.
struct ChannelBody(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|data| Ok(hyper::body::Frame::data(data))))
    }
}

#[tokio::test]
async fn upgrades_use_http1_even_when_the_server_offers_h2() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let upstream =
        Upstream::new(config(&url, with_cert(&pki), AuthConfig::Token("t".into()))).unwrap();
    let req = Request::post("/api/v1/namespaces/default/pods/p/exec?command=sh")
        .header(http::header::CONNECTION, "Upgrade")
        .header(UPGRADE, "SPDY/3.1")
        .body(empty())
        .unwrap();
    let response = within(upstream.send(req)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    let mut io = hyper_util::rt::TokioIo::new(within(hyper::upgrade::on(response)).await.unwrap());
    within(io.write_all(b"ping")).await.unwrap();
    let mut buf = [0u8; 4];
    within(io.read_exact(&mut buf)).await.unwrap();
    assert_eq!(&buf, b"ping");
    let seen = server.seen();
    assert_eq!((seen[0].version, seen[0].client_cert), (Version::HTTP_11, true));
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer t"));
}

#[tokio::test]
async fn connection_refused_is_an_error_naming_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let url = format!("http://127.0.0.1:{port}");
    let upstream = Upstream::new(config(&url, TlsConfig::default(), AuthConfig::None)).unwrap();
    let err = within(upstream.send(get("/x"))).await.unwrap_err();
    assert!(err.to_string().starts_with(&format!("request to {url}/x failed: ")), "{err}");
    assert!(err.to_string().contains("onnection refused"), "{err}");
}

#[test]
fn https_without_a_ca_is_refused_at_construction() {
    let err = Upstream::new(config("https://k:6443", TlsConfig::default(), AuthConfig::None))
        .err()
        .unwrap();
    assert!(matches!(err, ClientError::Tls(TlsError::NoCa(_))), "{err}");
}

/// A credential plugin run through `/bin/sh` (never exec'ing a file the test just wrote, which
/// can fail with ETXTBSY while other test threads fork). It logs each run and its input to
/// `runs`, and prints the next line of `answers` as its ExecCredential.
fn plugin(dir: &TempDir, answers: &[String]) -> (ExecConfig, PathBuf) {
    let runs = dir.path().join("runs");
    for (i, answer) in answers.iter().enumerate() {
        dir.write(&format!("answer{}", i + 1), answer);
    }
    let script = dir.write(
        "plugin.sh",
        format!(
            "n=$(($(cat '{runs}' 2>/dev/null | wc -l) + 1))\n\
             echo \"$1 $FOO $KUBERNETES_EXEC_INFO\" >> '{runs}'\n\
             cat '{dir}/answer'$n\n",
            runs = runs.display(),
            dir = dir.path().display()
        ),
    );
    let exec = ExecConfig {
        command: "/bin/sh".into(),
        args: vec![script.to_string_lossy().into_owned(), "arg1".into()],
        env: vec![("FOO".into(), "foo".into())],
        api_version: "client.authentication.k8s.io/v1".into(),
        cluster_info: None,
    };
    (exec, runs)
}

fn credential(status: serde_json::Value) -> String {
    serde_json::json!({
        "kind": "ExecCredential",
        "apiVersion": "client.authentication.k8s.io/v1",
        "status": status,
    })
    .to_string()
}

#[tokio::test]
async fn exec_token_is_cached_until_401_then_refreshed() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let dir = TempDir::new("exec-token");
    let far = "2999-01-01T00:00:00Z";
    let answers = [
        credential(serde_json::json!({"token": "reject-me", "expirationTimestamp": far})),
        credential(serde_json::json!({"token": "good"})),
    ];
    let (exec, runs) = plugin(&dir, &answers);
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let upstream = Upstream::new(config(&url, trusting(&pki), AuthConfig::Exec(exec))).unwrap();
    let statuses = [
        within(upstream.send(get("/1"))).await.unwrap().status(),
        within(upstream.send(get("/2"))).await.unwrap().status(),
        within(upstream.send(get("/3"))).await.unwrap().status(),
    ];
    assert_eq!(statuses, [StatusCode::UNAUTHORIZED, StatusCode::OK, StatusCode::OK]);
    let auths: Vec<_> = server.seen().into_iter().map(|s| s.authorization.unwrap()).collect();
    assert_eq!(auths, ["Bearer reject-me", "Bearer good", "Bearer good"]);
    let info = r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#;
    assert_eq!(
        std::fs::read_to_string(runs).unwrap(),
        format!("arg1 foo {info}\narg1 foo {info}\n")
    );
}

#[tokio::test]
async fn an_expired_exec_credential_is_refreshed() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let dir = TempDir::new("exec-expired");
    let answers = [
        credential(
            serde_json::json!({"token": "old", "expirationTimestamp": "2000-01-01T00:00:00Z"}),
        ),
        credential(serde_json::json!({"token": "new"})),
    ];
    let (exec, _) = plugin(&dir, &answers);
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let upstream = Upstream::new(config(&url, trusting(&pki), AuthConfig::Exec(exec))).unwrap();
    for target in ["/1", "/2", "/3"] {
        ok_body(within(upstream.send(get(target))).await.unwrap()).await;
    }
    let auths: Vec<_> = server.seen().into_iter().map(|s| s.authorization.unwrap()).collect();
    assert_eq!(auths, ["Bearer old", "Bearer new", "Bearer new"]);
}

#[tokio::test]
async fn exec_client_certificate_is_presented_and_a_change_gets_new_connections() {
    let pki = Pki::new();
    let server = tls_server(&pki).await;
    let dir = TempDir::new("exec-cert");
    let expired = "2000-01-01T00:00:00Z";
    let cert = serde_json::json!({
        "clientCertificateData": pki.client_cert_pem,
        "clientKeyData": pki.client_key_pem,
        "expirationTimestamp": expired,
    });
    let answers = [
        credential(cert.clone()),
        credential(cert),
        credential(serde_json::json!({"token": "t", "expirationTimestamp": expired})),
    ];
    let (exec, runs) = plugin(&dir, &answers);
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let upstream = Upstream::new(config(&url, trusting(&pki), AuthConfig::Exec(exec))).unwrap();
    for target in ["/1", "/2", "/3"] {
        ok_body(within(upstream.send(get(target))).await.unwrap()).await;
    }
    assert_eq!(std::fs::read_to_string(runs).unwrap().lines().count(), 3);
    let seen: Vec<_> =
        server.seen().into_iter().map(|s| (s.client_cert, s.authorization, s.connection)).collect();
    // The same certificate again keeps the connection; dropping it needs a new one.
    assert_eq!(seen, [(true, None, 1), (true, None, 1), (false, Some("Bearer t".into()), 2)]);
}

#[tokio::test]
async fn a_failing_exec_plugin_is_reported() {
    let dir = TempDir::new("exec-fail");
    let script = dir.write("fail.sh", "exit 3\n");
    let exec = ExecConfig {
        command: "/bin/sh".into(),
        args: vec![script.to_string_lossy().into_owned()],
        env: vec![],
        api_version: "client.authentication.k8s.io/v1".into(),
        cluster_info: None,
    };
    let upstream =
        Upstream::new(config("http://127.0.0.1:1", TlsConfig::default(), AuthConfig::Exec(exec)))
            .unwrap();
    let err = within(upstream.send(get("/"))).await.unwrap_err();
    assert_eq!(err.to_string(), "exec: executable /bin/sh failed with exit code 3");
    let missing = ExecConfig { command: "/nonexistent/plugin".into(), ..exec_default() };
    let upstream = Upstream::new(config(
        "http://127.0.0.1:1",
        TlsConfig::default(),
        AuthConfig::Exec(missing),
    ))
    .unwrap();
    let err = within(upstream.send(get("/"))).await.unwrap_err();
    assert_eq!(err.to_string(), "exec: executable /nonexistent/plugin not found");
}

fn exec_default() -> ExecConfig {
    ExecConfig {
        command: String::new(),
        args: vec![],
        env: vec![],
        api_version: "client.authentication.k8s.io/v1".into(),
        cluster_info: None,
    }
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn a_read_goes_to_the_next_upstream_when_the_first_cannot_be_reached_and_a_write_fails() {
    let server = FakeServer::plain().await;
    let url = format!("http://127.0.0.1:{}", server.addr.port());
    let pool = format!("http://127.0.0.1:{}", closed_port());
    let mut cfg = config(&url, TlsConfig::default(), AuthConfig::Token("tok".into()));
    cfg.preferred = vec![PreferredServer {
        server: ServerUrl::parse(&pool, false).unwrap(),
        ca_pem: None,
        client_cert: None,
    }];
    let upstream = Upstream::new(cfg).unwrap();
    assert_eq!(upstream.urls(), [pool.as_str(), url.as_str()]);
    assert_eq!(upstream.active_url(), pool);

    // A read is sent again, at once, to the apiserver, with the same credentials.
    let response = within(upstream.send(get("/api/v1/pods"))).await.unwrap();
    assert_eq!(response.extensions().get::<ServedBy>(), Some(&ServedBy(1)));
    ok_body(response).await;
    assert_eq!(upstream.active_url(), url);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer tok"));
    assert_eq!(seen[0].target, "/api/v1/pods");

    // The apiserver is the last resort: unreachable too, the error is the client's.
    let dead = format!("http://127.0.0.1:{}", closed_port());
    let mut cfg = config(&dead, TlsConfig::default(), AuthConfig::None);
    cfg.preferred = vec![PreferredServer {
        server: ServerUrl::parse(&pool, false).unwrap(),
        ca_pem: None,
        client_cert: None,
    }];
    let upstream = Upstream::new(cfg).unwrap();
    let posted = Request::post("/api/v1/namespaces/a/configmaps")
        .body(Full::new(Bytes::from_static(b"{}")).map_err(|never| match never {}).boxed())
        .unwrap();
    // A write's body is gone with the failed attempt: it fails, and the next request goes on.
    let failed = within(upstream.send_as_is(posted)).await.unwrap_err();
    assert!(failed.unreachable(), "{failed}");
    assert_eq!(upstream.active_url(), dead);
    let failed = within(upstream.send(get("/api/v1/pods"))).await.unwrap_err();
    assert!(failed.unreachable(), "{failed}");
}

#[tokio::test]
async fn a_pool_gets_its_own_client_certificate_and_the_apiserver_the_kubeconfigs_credentials() {
    let pki = Pki::new();
    let pool = tls_server(&pki).await;
    let apiserver = FakeServer::plain().await;
    let dir = TempDir::new("pool-cert");
    let cert = dir.write("pool.crt", &pki.client_cert_pem);
    let key = dir.write("pool.key", &pki.client_key_pem);
    let pool_url = format!("https://127.0.0.1:{}", pool.addr.port());
    let mut cfg = config(
        &format!("http://127.0.0.1:{}", apiserver.addr.port()),
        TlsConfig::default(),
        AuthConfig::Token("tok".into()),
    );
    cfg.preferred = vec![PreferredServer {
        server: ServerUrl::parse(&pool_url, true).unwrap(),
        ca_pem: Some(pki.ca_pem.clone().into_bytes()),
        client_cert: Some(CertFiles { cert, key }),
    }];
    let upstream = Upstream::new(cfg).unwrap();
    ok_body(within(upstream.send(get("/api/v1/pods"))).await.unwrap()).await;
    // Passthrough as the client: no certificate, its own token.
    let mut as_is = get("/api/v1/nodes");
    as_is.headers_mut().insert(AUTHORIZATION, "Bearer agent".parse().unwrap());
    ok_body(within(upstream.send_as_is(as_is)).await.unwrap()).await;
    let seen = pool.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].client_cert, "kubeplex's own requests present the pool's certificate");
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer tok"));
    assert!(!seen[1].client_cert);
    assert_eq!(seen[1].authorization.as_deref(), Some("Bearer agent"));
    assert!(apiserver.seen().is_empty());

    // Missing files stop start-up with the path.
    let mut cfg = config(&pool_url, TlsConfig::default(), AuthConfig::None);
    cfg.preferred = vec![PreferredServer {
        server: ServerUrl::parse(&pool_url, true).unwrap(),
        ca_pem: None,
        client_cert: Some(CertFiles {
            cert: dir.path().join("none.crt"),
            key: dir.path().join("none.key"),
        }),
    }];
    let err = Upstream::new(cfg).unwrap_err().to_string();
    assert!(err.contains("none.crt"), "{err}");
}
