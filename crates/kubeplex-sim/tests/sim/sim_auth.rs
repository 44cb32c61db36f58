//! The fake apiserver with an identity policy: authentication, impersonation, authorization of
//! every request and the review APIs, as kube-apiserver 1.36 answers them (fixtures
//! `tokenreview-*`, `sar-*`, `err-forbidden-*`, `err-unauthorized`, `err-anonymous`).
//!
//! What is compared with the captures: status codes; bodies byte for byte, after putting this
//! run's `managedFields` time (the capture's `2026-11-23T12:17:37Z`) and, for
//! `tokenreview-valid`, the test's token (the capture redacted the real one) into the fixture;
//! the headers the capture shows, except `Audit-Id`, `Date` and the priority-and-fairness UIDs,
//! whose values are per request or per cluster (their presence is compared).

use crate::support;

use std::time::Duration;

use http::Method;
use kubeplex_sim::auth::{Auth, RoleRef, Rule, Subject, UserInfo, MASTERS};
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::{json, Value};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const READER: &str = "reader-token";
const NODE: &str = "node-token";
const NOBODY: &str = "nobody-token";
const ADMIN: &str = "admin-token";
/// kubeplex's own ServiceAccount in node mode: reviews and impersonation.
const KUBEPLEX: &str = "kubeplex-token";
/// May impersonate users, nothing else.
const LIMITED: &str = "limited-token";
const NODE_NAME: &str = "fx2-node-0";

/// The capture's reader (`tokenreview-valid`): ServiceAccount fx2/reader with a Role that reads
/// configmaps in fx2 (and nothing else: `err-forbidden-get-protobuf` shows it cannot get pods).
fn policy() -> Auth {
    let reader = UserInfo::service_account("fx2", "reader")
        .with_uid("7fd04442-0fa4-40b5-927e-fc0fe5fc6819")
        .with_extra(
            "authentication.kubernetes.io/credential-id",
            &["JTI=16a0f477-2f24-4942-8a5a-795743a1c28b"],
        );
    Auth::new()
        .token(READER, reader)
        .token(NODE, UserInfo::node(NODE_NAME))
        .token(NOBODY, UserInfo::new("nobody"))
        .token(ADMIN, UserInfo::new("admin").with_uid("admin-uid").with_group(MASTERS))
        .proxy_service_account(
            KUBEPLEX,
            "kube-system",
            "kubeplex",
            vec![Rule::read(&[""], &["pods", "nodes", "services"])],
        )
        .service_account_token(LIMITED, "kube-system", "limited")
        .role("fx2", "reader", vec![Rule::read(&[""], &["configmaps"])])
        .role_binding(
            "fx2",
            "reader",
            RoleRef::Role("reader".into()),
            vec![Subject::service_account("fx2", "reader")],
        )
        .grant(
            Subject::service_account("kube-system", "limited"),
            None,
            vec![Rule::new(&["impersonate"], &[""], &["users"])],
        )
}

fn pod(name: &str, node: &str, configmap: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "fx2"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.example/app:1"}],
            "volumes": [{"name": "v", "configMap": {"name": configmap}}]}})
}

fn configmap(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
        "data": {"k": "v"}})
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
}

async fn auth_sim() -> Sim {
    SimBuilder::new()
        .seed([
            configmap("fx2", "c1"),
            configmap("fx2", "c2"),
            configmap("fx2-other", "o1"),
            pod("p1", NODE_NAME, "c1"),
            pod("p2", "node-1", "c2"),
            node(NODE_NAME),
            node("node-1"),
        ])
        .auth(policy())
        .start()
        .await
        .expect("sim starts")
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A request with an optional bearer token and extra headers; the whole answer.
async fn call(
    sim: &Sim,
    method: Method,
    path: &str,
    token: Option<&str>,
    extra: &[(&str, &str)],
    body: Option<&Value>,
) -> Resp {
    let auth = token.map(bearer);
    let mut headers: Vec<(&str, &str)> = vec![("Accept", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    headers.extend_from_slice(extra);
    let body = body.map(|b| serde_json::to_vec(b).expect("json"));
    request(&sim.addr().to_string(), method, path, &headers, body).await
}

/// The status of a request whose body may never end (a watch): read up to the headers.
async fn status_only(
    sim: &Sim,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> u16 {
    let mut s = tokio::time::timeout(STEP, tokio::net::TcpStream::connect(sim.addr()))
        .await
        .expect("connect in time")
        .expect("connect");
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", sim.addr());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes()).await.expect("write");
    s.write_all(body).await.expect("write body");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(STEP, read).await.expect("response head in time");
    let head = String::from_utf8_lossy(&got);
    head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// The capture's body with this run's managedFields time put in.
fn with_time(fixture_body: &[u8], ours: &Value) -> Vec<u8> {
    let time = ours.pointer("/metadata/managedFields/0/time").and_then(Value::as_str).unwrap_or("");
    String::from_utf8_lossy(fixture_body).replace("2026-11-23T12:17:37Z", time).into_bytes()
}

fn assert_same_bytes(name: &str, got: &[u8], want: &[u8]) {
    assert_eq!(
        String::from_utf8_lossy(got),
        String::from_utf8_lossy(want),
        "{name}: body differs from the capture"
    );
}

/// The response headers the capture shows, by name, with the same values — except those that
/// are per request or per cluster, which must only be present.
fn assert_capture_headers(name: &str, resp: &Resp) {
    let fx = fixture(name);
    for (k, v) in &fx.response_headers {
        let key = k.to_ascii_lowercase();
        match key.as_str() {
            "date"
            | "content-length"
            | "audit-id"
            | "x-kubernetes-pf-flowschema-uid"
            | "x-kubernetes-pf-prioritylevel-uid" => {
                assert!(resp.headers.contains_key(key.as_str()), "{name}: header {k} missing")
            }
            _ => assert_eq!(resp.header(&key), v, "{name}: header {k}"),
        }
    }
    // And nothing the apiserver would not have sent among the headers that matter.
    for extra in ["x-content-type-options", "x-kubernetes-pf-flowschema-uid"] {
        assert_eq!(
            resp.headers.contains_key(extra),
            fx.response_header(extra).is_some(),
            "{name}: header {extra} present in one answer only"
        );
    }
}

async fn post_review(sim: &Sim, token: &str, path: &str, body: &Value) -> Resp {
    let auth = bearer(token);
    request(
        &sim.addr().to_string(),
        Method::POST,
        path,
        &[
            ("Accept", "application/json"),
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
            ("User-Agent", "fixture-capture"),
        ],
        Some(serde_json::to_vec(body).expect("json")),
    )
    .await
}

const TOKENREVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const SARS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

#[tokio::test]
async fn token_reviews_match_the_captures() {
    let sim = auth_sim().await;
    for (name, token) in [("tokenreview-valid", READER), ("tokenreview-invalid", "not-a-token")] {
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}});
        let resp = post_review(&sim, KUBEPLEX, TOKENREVIEWS, &body).await;
        assert_eq!(resp.status, 201, "{name}: {}", String::from_utf8_lossy(&resp.body));
        let want = with_time(&fixture(name).body, &resp.json());
        let want = String::from_utf8_lossy(&want)
            .replace("<redacted-service-account-token>", READER)
            .into_bytes();
        assert_same_bytes(name, &resp.body, &want);
        assert_capture_headers(name, &resp);
    }
    let metrics = sim.metrics_text();
    for series in [
        "kubeplex_sim_reviews_total{kind=\"tokenreview\",result=\"authenticated\"} 1",
        "kubeplex_sim_reviews_total{kind=\"tokenreview\",result=\"unauthenticated\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
}

#[tokio::test]
async fn subject_access_reviews_match_the_captures() {
    let sim = auth_sim().await;
    for name in ["sar-list-allowed", "sar-list-denied", "sar-watch-selectors", "sar-node-pods"] {
        let fx = fixture(name);
        // The request the capture sent is the spec its answer echoes.
        let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": fx.json()["spec"]});
        let resp = post_review(&sim, KUBEPLEX, SARS, &body).await;
        assert_eq!(resp.status, 201, "{name}: {}", String::from_utf8_lossy(&resp.body));
        assert_same_bytes(name, &resp.body, &with_time(&fx.body, &resp.json()));
        assert_capture_headers(name, &resp);
    }
    let metrics = sim.metrics_text();
    for series in [
        "kubeplex_sim_reviews_total{kind=\"subjectaccessreview\",result=\"allowed\"} 3",
        "kubeplex_sim_reviews_total{kind=\"subjectaccessreview\",result=\"denied\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
}

#[tokio::test]
async fn refusals_match_the_captures() {
    let sim = auth_sim().await;
    for (name, token) in [
        ("err-forbidden-list", Some(READER)),
        ("err-forbidden-watch", Some(READER)),
        ("err-forbidden-get-protobuf", Some(READER)),
        ("err-unauthorized", Some("not-a-token")),
        ("err-anonymous", None),
    ] {
        let fx = fixture(name);
        let accept = fx.request_header("Accept").unwrap_or("application/json");
        let auth = token.map(bearer);
        let mut headers = vec![("Accept", accept)];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        let resp = request(&sim.addr().to_string(), Method::GET, &fx.path, &headers, None).await;
        assert_eq!(resp.status, fx.status, "{name}");
        assert_eq!(resp.body, fx.body, "{name}: {}", String::from_utf8_lossy(&resp.body));
        assert_capture_headers(name, &resp);
    }
}

/// One request of the matrix.
struct Case {
    label: &'static str,
    method: &'static str,
    path: String,
    body: Option<Value>,
}

fn get(label: &'static str, path: &str) -> Case {
    Case { label, method: "GET", path: path.to_string(), body: None }
}

fn cases(who: &str) -> Vec<Case> {
    let node_pods = "fieldSelector=spec.nodeName%3Dfx2-node-0";
    let create = |label, path: &str, body: Value| Case {
        label,
        method: "POST",
        path: path.to_string(),
        body: Some(body),
    };
    vec![
        get("get cm own ns", "/api/v1/namespaces/fx2/configmaps/c1"),
        get("list cm own ns", "/api/v1/namespaces/fx2/configmaps"),
        get("watch cm own ns", "/api/v1/namespaces/fx2/configmaps?watch=1"),
        create(
            "create cm own ns",
            "/api/v1/namespaces/fx2/configmaps",
            configmap("fx2", &format!("new-{who}")),
        ),
        get("get cm other ns", "/api/v1/namespaces/fx2-other/configmaps/o1"),
        get("list cm other ns", "/api/v1/namespaces/fx2-other/configmaps"),
        get("watch cm other ns", "/api/v1/namespaces/fx2-other/configmaps?watch=1"),
        create(
            "create cm other ns",
            "/api/v1/namespaces/fx2-other/configmaps",
            configmap("fx2-other", &format!("new-{who}")),
        ),
        get("list cm cluster", "/api/v1/configmaps"),
        get("list pods cluster", "/api/v1/pods"),
        get("watch pods cluster", "/api/v1/pods?watch=1"),
        get("list pods of the node", &format!("/api/v1/pods?{node_pods}")),
        get("watch pods of the node", &format!("/api/v1/pods?watch=1&{node_pods}")),
        get("list pods of another node", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"),
        get("get pod on the node", "/api/v1/namespaces/fx2/pods/p1"),
        get("get pod elsewhere", "/api/v1/namespaces/fx2/pods/p2"),
        get("get own node", "/api/v1/nodes/fx2-node-0"),
        get("list nodes", "/api/v1/nodes"),
        get(
            "watch own node by name",
            "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dfx2-node-0",
        ),
        create("create pod", "/api/v1/namespaces/fx2/pods", {
            let mut p = pod(&format!("mirror-{who}"), NODE_NAME, "c1");
            p["spec"].as_object_mut().map(|s| s.remove("volumes"));
            p
        }),
        get("discovery", "/api"),
        get("version", "/version"),
    ]
}

/// Expected status per case, in `cases` order.
const READER_CODES: [u16; 22] = [
    200, 200, 200, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403,
    403, 200, 200,
];
const NODE_CODES: [u16; 22] = [
    200, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 200, 200, 403, 200, 403, 200, 403, 200,
    201, 200, 200,
];
const NOBODY_CODES: [u16; 22] = [
    403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403,
    403, 200, 200,
];
/// Anonymous users may not even read discovery (only `system:public-info-viewer`'s paths).
const ANONYMOUS_CODES: [u16; 22] = [
    403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403,
    403, 403, 200,
];
const ADMIN_CODES: [u16; 22] = [
    200, 200, 200, 201, 200, 200, 200, 201, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200,
    201, 200, 200,
];

async fn run_matrix(sim: &Sim, who: &str, headers: &[(&str, &str)], want: &[u16; 22]) -> Vec<u16> {
    let mut got = Vec::new();
    for case in cases(who) {
        let mut h: Vec<(&str, &str)> = vec![("Accept", "application/json")];
        h.extend_from_slice(headers);
        let body =
            case.body.as_ref().map(|b| serde_json::to_vec(b).expect("json")).unwrap_or_default();
        if case.body.is_some() {
            h.push(("Content-Type", "application/json"));
        }
        got.push(status_only(sim, case.method, &case.path, &h, &body).await);
    }
    let labels: Vec<&str> = cases(who).iter().map(|c| c.label).collect();
    let diff: Vec<String> = labels
        .iter()
        .zip(got.iter().zip(want.iter()))
        .filter(|(_, (g, w))| g != w)
        .map(|(l, (g, w))| format!("{l}: got {g}, want {w}"))
        .collect();
    assert!(diff.is_empty(), "{who}:\n{}", diff.join("\n"));
    got
}

#[tokio::test]
async fn every_identity_gets_the_apiservers_status_for_every_verb_and_scope() {
    let sim = auth_sim().await;
    let b = |t: &str| bearer(t);
    let (reader, node, nobody, admin, kubeplex) =
        (b(READER), b(NODE), b(NOBODY), b(ADMIN), b(KUBEPLEX));
    run_matrix(&sim, "reader", &[("Authorization", &reader)], &READER_CODES).await;
    run_matrix(&sim, "node", &[("Authorization", &node)], &NODE_CODES).await;
    run_matrix(&sim, "nobody", &[("Authorization", &nobody)], &NOBODY_CODES).await;
    run_matrix(&sim, "anonymous", &[], &ANONYMOUS_CODES).await;
    run_matrix(&sim, "admin", &[("Authorization", &admin)], &ADMIN_CODES).await;
    // kubeplex forwarding a certificate-authenticated kubelet, and a token's ServiceAccount, by
    // impersonation: the same answers as the identities themselves get.
    run_matrix(
        &sim,
        "as-node",
        &[
            ("Authorization", &kubeplex),
            ("Impersonate-User", "system:node:fx2-node-0"),
            ("Impersonate-Group", "system:nodes"),
        ],
        &NODE_CODES,
    )
    .await;
    run_matrix(
        &sim,
        "as-reader",
        &[("Authorization", &kubeplex), ("Impersonate-User", "system:serviceaccount:fx2:reader")],
        &READER_CODES,
    )
    .await;
}

/// A SubjectAccessReview for what `case` asks, as kubeplex would send it.
fn sar_for(user: &UserInfo, case: &Case) -> Value {
    let (path, query) = case.path.split_once('?').unwrap_or((&case.path, ""));
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut ra = serde_json::Map::new();
    let rest = match segs.as_slice() {
        ["api", "v1", rest @ ..] => rest,
        _ => {
            return json!({"spec": {"nonResourceAttributes": {"path": path, "verb": "get"},
                "user": user.username, "groups": user.groups}});
        }
    };
    let rest = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => {
            ra.insert("namespace".into(), json!(ns));
            tail
        }
        r => r,
    };
    let watch = query.contains("watch=1");
    let verb = match (case.method, rest.len(), watch) {
        ("POST", _, _) => "create",
        ("GET", 2, _) => "get",
        (_, _, true) => "watch",
        _ => "list",
    };
    ra.insert("verb".into(), json!(verb));
    ra.insert("version".into(), json!("v1"));
    ra.insert("resource".into(), json!(rest[0]));
    let mut fs = form_pairs(query).into_iter().find(|(k, _)| k == "fieldSelector").map(|(_, v)| v);
    if let Some(name) = rest.get(1) {
        ra.insert("name".into(), json!(name));
    } else if let Some(n) = fs.as_deref().and_then(|f| f.strip_prefix("metadata.name=")) {
        ra.insert("name".into(), json!(n));
    }
    if let Some(f) = fs.take() {
        ra.insert("fieldSelector".into(), json!({"rawSelector": f}));
    }
    json!({"spec": {"resourceAttributes": ra, "user": user.username, "groups": user.groups}})
}

fn form_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.replace("%3D", "=")))
        .collect()
}

#[tokio::test]
async fn subject_access_reviews_agree_with_the_requests_own_answers() {
    let sim = auth_sim().await;
    let with_auth = |u: UserInfo| {
        let mut u = u;
        u.groups.push("system:authenticated".into());
        u
    };
    for (who, user, codes) in [
        ("reader", with_auth(UserInfo::service_account("fx2", "reader")), READER_CODES),
        ("node", with_auth(UserInfo::node(NODE_NAME)), NODE_CODES),
        ("nobody", with_auth(UserInfo::new("nobody")), NOBODY_CODES),
        ("anonymous", UserInfo::anonymous(), ANONYMOUS_CODES),
    ] {
        for (case, code) in cases(who).iter().zip(codes) {
            let mut body = sar_for(&user, case);
            body["apiVersion"] = json!("authorization.k8s.io/v1");
            body["kind"] = json!("SubjectAccessReview");
            let resp = post_review(&sim, KUBEPLEX, SARS, &body).await;
            assert_eq!(resp.status, 201, "{who} {}", case.label);
            let allowed = resp.json()["status"]["allowed"].as_bool().unwrap_or(false);
            assert_eq!(allowed, code != 403, "{who} {}: {}", case.label, resp.json()["status"]);
        }
    }
}

#[tokio::test]
async fn refusals_name_the_rule_that_refused() {
    let sim = auth_sim().await;
    let msg = |r: &Resp| r.json()["message"].as_str().unwrap_or("").to_string();
    // The Node authorizer's reason follows the RBAC message.
    let r = call(&sim, Method::GET, "/api/v1/pods", Some(NODE), &[], None).await;
    assert_eq!(
        msg(&r),
        "pods is forbidden: User \"system:node:fx2-node-0\" cannot list resource \"pods\" in API \
         group \"\" at the cluster scope: can only list/watch pods with spec.nodeName field selector"
    );
    let r = call(&sim, Method::GET, "/api/v1/nodes/node-1", Some(NODE), &[], None).await;
    assert_eq!(
        msg(&r),
        "nodes \"node-1\" is forbidden: User \"system:node:fx2-node-0\" cannot get resource \
         \"nodes\" in API group \"\" at the cluster scope: node 'fx2-node-0' cannot read \
         'node-1', only its own Node object"
    );
    // A non-resource path.
    let r = call(&sim, Method::GET, "/apis", None, &[], None).await;
    assert_eq!(r.status, 403);
    assert_eq!(msg(&r), "forbidden: User \"system:anonymous\" cannot get path \"/apis\"");
    assert_eq!(r.json()["details"], json!({}));
    // A subresource, and an unknown resource (authorization comes before routing).
    let r =
        call(&sim, Method::GET, "/api/v1/namespaces/fx2/pods/p1/status", Some(READER), &[], None)
            .await;
    assert_eq!(
        msg(&r),
        "pods \"p1\" is forbidden: User \"system:serviceaccount:fx2:reader\" cannot get resource \
         \"pods/status\" in API group \"\" in the namespace \"fx2\""
    );
    let r = call(&sim, Method::GET, "/apis/example.com/v1/widgets", Some(NOBODY), &[], None).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        msg(&r),
        "widgets.example.com is forbidden: User \"nobody\" cannot list resource \"widgets\" in \
         API group \"example.com\" at the cluster scope"
    );
    // The review APIs need system:auth-delegator (or the node rules) themselves.
    let body = json!({"spec": {"token": READER}});
    let r = post_review(&sim, NOBODY, TOKENREVIEWS, &body).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        msg(&r),
        "tokenreviews.authentication.k8s.io is forbidden: User \"nobody\" cannot create resource \
         \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"
    );
    assert_eq!(post_review(&sim, NODE, TOKENREVIEWS, &body).await.status, 201);
}

#[tokio::test]
async fn impersonation_is_authorized_for_the_requester() {
    let sim = auth_sim().await;
    let msg = |r: &Resp| r.json()["message"].as_str().unwrap_or("").to_string();
    // Allowed: the request runs as the impersonated user, groups, extra and uid.
    let grant = policy().grant(
        Subject::group("devs"),
        Some("fx2"),
        vec![Rule::read(&[""], &["configmaps"])],
    );
    sim.set_auth(Some(grant));
    let as_jane = [
        ("Impersonate-User", "jane"),
        ("Impersonate-Group", "devs"),
        ("Impersonate-Uid", "u-1"),
        ("Impersonate-Extra-Scopes", "a"),
    ];
    let r = call(
        &sim,
        Method::GET,
        "/api/v1/namespaces/fx2/configmaps",
        Some(KUBEPLEX),
        &as_jane,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", msg(&r));
    let r =
        call(&sim, Method::GET, "/api/v1/namespaces/fx2/secrets", Some(KUBEPLEX), &as_jane, None)
            .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        msg(&r),
        "secrets is forbidden: User \"jane\" cannot list resource \"secrets\" in API group \"\" in \
         the namespace \"fx2\""
    );
    // Refused: the requester lacks the impersonate verb on what it asks for.
    let r =
        call(&sim, Method::GET, "/api/v1/namespaces/fx2/configmaps", Some(LIMITED), &as_jane, None)
            .await;
    assert_eq!(r.status, 403);
    // kube-apiserver 1.36 (constrained impersonation, on by default) answers with the first
    // mode that applies: user-info, whose `impersonate-on` check of the request comes first.
    assert_eq!(
        msg(&r),
        "configmaps is forbidden: User \"system:serviceaccount:kube-system:limited\" cannot \
         impersonate-on:user-info:list resource \"configmaps\" in API group \"\" in the namespace \
         \"fx2\""
    );
    assert_eq!(r.header("x-content-type-options"), "nosniff");
    let r = call(
        &sim,
        Method::GET,
        "/api/v1/namespaces/fx2/configmaps",
        Some(LIMITED),
        &[("Impersonate-User", "jane"), ("Impersonate-Uid", "u-1")],
        None,
    )
    .await;
    assert_eq!(
        msg(&r),
        "configmaps is forbidden: User \"system:serviceaccount:kube-system:limited\" cannot \
         impersonate-on:user-info:list resource \"configmaps\" in API group \"\" in the namespace \
         \"fx2\""
    );
    let r = call(
        &sim,
        Method::GET,
        "/api/v1/namespaces/fx2/configmaps",
        Some(NOBODY),
        &[("Impersonate-User", "system:serviceaccount:fx2:reader")],
        None,
    )
    .await;
    assert_eq!(
        msg(&r),
        "configmaps is forbidden: User \"nobody\" cannot impersonate-on:serviceaccount:list \
         resource \"configmaps\" in API group \"\" in the namespace \"fx2\""
    );
    // Users only: allowed for `limited`, and the user then has only its own rights.
    let r = call(
        &sim,
        Method::GET,
        "/api/v1/namespaces/fx2/configmaps",
        Some(LIMITED),
        &[("Impersonate-User", "jane")],
        None,
    )
    .await;
    assert_eq!(r.status, 403);
    assert!(msg(&r).contains("User \"jane\" cannot list"), "{}", msg(&r));
    // Groups without a user are a bad request (1.36's constrained filter; the legacy one
    // answered 500 in plain text).
    let r = call(
        &sim,
        Method::GET,
        "/api/v1/namespaces/fx2/configmaps",
        Some(KUBEPLEX),
        &[("Impersonate-Group", "devs")],
        None,
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(
        msg(&r),
        "requested &user.DefaultInfo{Name:\"\", UID:\"\", Groups:[]string{\"devs\"}, \
         Extra:map[string][]string(nil)} without impersonating a user name"
    );
    assert!(String::from_utf8_lossy(&r.body).contains("\\u0026user.DefaultInfo"), "Go's JSON");
}

#[tokio::test]
async fn without_a_policy_every_request_is_allowed_as_before() {
    let sim = SimBuilder::new().seed([configmap("fx2", "c1")]).start().await.expect("sim starts");
    for (token, extra) in
        [(None, vec![]), (Some("garbage"), vec![]), (None, vec![("Impersonate-Group", "devs")])]
    {
        let r =
            call(&sim, Method::GET, "/api/v1/namespaces/fx2/configmaps", token, &extra, None).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["items"].as_array().map(Vec::len), Some(1));
    }
    assert_eq!(call(&sim, Method::GET, "/apis", None, &[], None).await.status, 200);
    // The reviews answer as an apiserver that allows everything and knows no tokens.
    let sar = json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "secrets"}, "user": "x"}});
    let r = post_review(&sim, "garbage", SARS, &sar).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"], json!({"allowed": true}));
    let r = post_review(&sim, "garbage", TOKENREVIEWS, &json!({"spec": {"token": "t"}})).await;
    assert_eq!(r.json()["status"], json!({"user": {}, "error": "invalid bearer token"}));

    // A policy set later applies to new requests; removing it restores the old behaviour.
    sim.set_auth(Some(Auth::new()));
    assert_eq!(
        call(&sim, Method::GET, "/api/v1/namespaces/fx2/configmaps", None, &[], None).await.status,
        403
    );
    assert_eq!(
        call(&sim, Method::GET, "/api/v1/namespaces/fx2/configmaps", Some("garbage"), &[], None)
            .await
            .status,
        401
    );
    sim.set_auth(None);
    assert_eq!(
        call(&sim, Method::GET, "/api/v1/namespaces/fx2/configmaps", None, &[], None).await.status,
        200
    );
}

#[tokio::test]
async fn a_watch_is_authorized_once_when_it_starts() {
    let sim = auth_sim().await;
    let auth = bearer(READER);
    let addr = sim.addr().to_string();
    let headers = [("Accept", "application/json"), ("Authorization", auth.as_str())];
    let path = "/api/v1/namespaces/fx2/configmaps?watch=1&timeoutSeconds=2";
    let resp = request(&addr, Method::GET, path, &headers, None);
    // Revoke everything while the watch is open: it keeps its events (the apiserver does not
    // re-authorize a running watch), while a new request is refused.
    let sim_ref = &sim;
    let revoke = async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        sim_ref
            .set_auth(Some(Auth::new().token(READER, UserInfo::service_account("fx2", "reader"))));
        sim_ref.create(configmap("fx2", "c3")).expect("create");
    };
    let (resp, ()) = tokio::join!(resp, revoke);
    assert_eq!(resp.status, 200);
    let text = String::from_utf8_lossy(&resp.body);
    assert!(text.contains("\"name\":\"c3\""), "the open watch saw the new object: {text}");
    let r =
        call(&sim, Method::GET, "/api/v1/namespaces/fx2/configmaps", Some(READER), &[], None).await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn a_kubeconfig_carries_the_token() {
    let sim = auth_sim().await;
    let cfg: Value = serde_json::from_str(&sim.kubeconfig_with_token(READER)).expect("json");
    assert_eq!(cfg["users"][0]["user"], json!({"token": READER}));
    assert_eq!(cfg["clusters"][0]["cluster"]["server"], json!(sim.url()));
}

#[tokio::test]
async fn the_proxy_identity_reads_its_caches_and_nothing_else() {
    let sim = auth_sim().await;
    let r =
        call(&sim, Method::GET, "/api/v1/pods?resourceVersion=0", Some(KUBEPLEX), &[], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["items"].as_array().map(Vec::len), Some(2));
    let r = call(&sim, Method::GET, "/api/v1/configmaps", Some(KUBEPLEX), &[], None).await;
    assert_eq!(r.status, 403);
    let r = call(&sim, Method::DELETE, "/api/v1/namespaces/fx2/pods/p1", Some(KUBEPLEX), &[], None)
        .await;
    assert_eq!(r.status, 403);
    assert!(sim.get("", "pods", "fx2", "p1").is_some(), "a refused delete deletes nothing");
}

/// The Node authorizer's graph follows the store through an informer: right after a pod is
/// bound to a node, that node's reads of the pod and of what it uses are refused ("no
/// relationship found") until the graph catches up — as on kube-apiserver 1.36 (median 0.3 s,
/// max 0.9 s measured). The default lag is that max; a seeded pod is long bound.
#[tokio::test]
async fn the_node_authorizer_lags_a_new_binding_then_follows_it() {
    let lag = Duration::from_millis(400);
    let sim = SimBuilder::new()
        .seed([configmap("fx2", "c1"), configmap("fx2", "c9"), pod("p1", NODE_NAME, "c1")])
        .auth(policy())
        .node_graph_lag(lag)
        .start()
        .await
        .expect("sim starts");
    let read = |path: &'static str| call(&sim, Method::GET, path, Some(NODE), &[], None);
    // Seeded: bound long ago.
    assert_eq!(read("/api/v1/namespaces/fx2/configmaps/c1").await.status, 200);
    sim.create(pod("p9", NODE_NAME, "c9")).expect("create");
    let bound = std::time::Instant::now();
    let refused = read("/api/v1/namespaces/fx2/configmaps/c9").await;
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
    let message = refused.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(message.ends_with("no relationship found between node 'fx2-node-0' and this object"));
    assert_eq!(read("/api/v1/namespaces/fx2/pods/p9").await.status, 403);
    let mut allowed = None;
    while bound.elapsed() < lag * 5 {
        if read("/api/v1/namespaces/fx2/configmaps/c9").await.status == 200 {
            allowed = Some(bound.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let allowed = allowed.expect("allowed once the graph caught up");
    assert!(allowed >= lag, "allowed after {allowed:?}, before the graph could know");
    assert_eq!(read("/api/v1/namespaces/fx2/pods/p9").await.status, 200);
    // A SubjectAccessReview gets the same answers as the requests (it asks the same graph).
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": format!("system:node:{NODE_NAME}"), "groups": ["system:nodes"],
            "resourceAttributes": {"verb": "get", "resource": "configmaps", "namespace": "fx2",
                "name": "c9"}}});
    let r =
        post_review(&sim, ADMIN, "/apis/authorization.k8s.io/v1/subjectaccessreviews", &sar).await;
    assert_eq!(r.json()["status"]["allowed"], true, "{}", String::from_utf8_lossy(&r.body));
}

/// On a real apiserver under load most bindings reach the Node authorizer's graph before the
/// kubelet's first read and some take up to about a second (`GraphLag::Measured`): pod by pod,
/// each lag drawn as measured, the same for a pod whatever asks, never past the maximum.
#[tokio::test]
async fn the_measured_graph_lag_varies_pod_by_pod_up_to_its_maximum() {
    let max = Duration::from_millis(800);
    let lag = |i: usize| {
        kubeplex_sim::pod_graph_lag(kubeplex_sim::GraphLag::Measured, max, &format!("fx2/p{i}"))
    };
    let lags: Vec<Duration> = (0..400).map(lag).collect();
    let quick = lags.iter().filter(|l| l.is_zero()).count();
    assert!((250..=325).contains(&quick), "{quick} of 400 at once (72% measured)");
    assert!(lags.iter().all(|l| *l <= max));
    assert!(lags.iter().any(|l| *l >= max.mul_f64(0.66)), "a tail near the maximum");
    assert_eq!(lag(7), lag(7));
    // Served: right after 20 bindings the pods the draw gives a long lag are refused, the
    // others not; after the maximum, none.
    let sim = SimBuilder::new()
        .seed([configmap("fx2", "c1")])
        .auth(policy())
        .node_graph_lag_measured(max)
        .start()
        .await
        .expect("sim starts");
    for i in 0..20 {
        sim.create(pod(&format!("p{i}"), NODE_NAME, "c1")).expect("create");
    }
    let created = std::time::Instant::now();
    let mut refused = Vec::new();
    for i in 0..20 {
        let path = format!("/api/v1/namespaces/fx2/pods/p{i}");
        let r = call(&sim, Method::GET, &path, Some(NODE), &[], None).await;
        if r.status == 403 {
            refused.push(i);
        }
    }
    let read_within = created.elapsed();
    for i in 0..20 {
        if lag(i) > read_within + Duration::from_millis(50) {
            assert!(refused.contains(&i), "p{i} (lag {:?}) granted early", lag(i));
        }
    }
    for i in 0..20 {
        if lag(i).is_zero() {
            assert!(!refused.contains(&i), "p{i} (lag {:?}) refused", lag(i));
        }
    }
    assert!(refused.len() < 20, "{refused:?}: not every pod lags");
    tokio::time::sleep(max).await;
    for i in 0..20 {
        let path = format!("/api/v1/namespaces/fx2/pods/p{i}");
        assert_eq!(call(&sim, Method::GET, &path, Some(NODE), &[], None).await.status, 200);
    }
}

/// A ServiceAccount whose token is bound to a pod on node probe-a, allowed to impersonate its
/// associated node for get, list and watch (constrained impersonation, kube-apiserver 1.36): the
/// answers are the real apiserver's, byte for byte (`scripts/realcluster/
/// capture-impersonation.py`, tests/fixtures/realcluster/impersonation) — its own Node as that
/// node; another node, its own with a group, a patch it was not granted, another user or a
/// ServiceAccount refused with the first mode's reason; groups without a user a 400.
#[tokio::test]
async fn constrained_impersonation_answers_as_kube_apiserver_1_36() {
    const TIER: &str = "tier-a-token";
    let verbs: Vec<String> = ["get", "list", "watch"]
        .iter()
        .map(|v| format!("impersonate-on:associated-node:{v}"))
        .collect();
    let verbs: Vec<&str> = verbs.iter().map(String::as_str).collect();
    let policy = Auth::new()
        .bound_service_account_token(TIER, "kube-system", "tier", "tier-a", "probe-a")
        .grant(
            Subject::service_account("kube-system", "tier"),
            None,
            vec![
                Rule::new(&["impersonate:associated-node"], &["authentication.k8s.io"], &["nodes"]),
                Rule::new(&verbs, &["*"], &["*"]),
            ],
        );
    let sim = SimBuilder::new()
        .seed([node("probe-a"), node("probe-b")])
        .auth(policy)
        .start()
        .await
        .expect("sim starts");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/realcluster/impersonation");
    let mut cases = 0;
    for entry in std::fs::read_dir(&dir).expect("captures") {
        let path = entry.expect("entry").path();
        let capture: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let request = &capture["request"];
        let method: Method = request["method"].as_str().unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = request["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h[0].as_str().unwrap().to_string(), h[1].as_str().unwrap().to_string()))
            .collect();
        let extra: Vec<(&str, &str)> =
            headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let body = (method == Method::PATCH).then(|| json!({}));
        let r = call(
            &sim,
            method,
            request["path"].as_str().unwrap(),
            Some(TIER),
            &extra,
            body.as_ref(),
        )
        .await;
        assert_eq!(u64::from(r.status), capture["code"].as_u64().unwrap(), "{name}");
        let want = capture["body"].as_str().unwrap();
        if !want.is_empty() {
            assert_same_bytes(&name, &r.body, want.as_bytes());
        }
        cases += 1;
    }
    assert_eq!(cases, 7);
}

/// The apiserver's ServiceAccount issuer and keys (`/.well-known/openid-configuration`,
/// `/openid/v1/jwks`), which kubeplex verifies bound tokens with: the key set only as
/// `application/jwk-set+json` — an `Accept: application/json` is answered 406, as
/// kube-apiserver 1.36 answers it.
#[tokio::test]
async fn the_service_account_keys_are_published_as_the_apiserver_publishes_them() {
    let sim = auth_sim().await;
    let discovery =
        call(&sim, Method::GET, "/.well-known/openid-configuration", Some(KUBEPLEX), &[], None)
            .await;
    assert_eq!(discovery.status, 200);
    assert_eq!(discovery.json()["issuer"], "https://kubernetes.default.svc");
    let refused = call(&sim, Method::GET, "/openid/v1/jwks", Some(KUBEPLEX), &[], None).await;
    assert_eq!(refused.status, 406);
    assert_eq!(
        refused.json()["message"],
        "406: Not Acceptable\n\nAvailable representations: application/jwk-set+json"
    );
    let auth = bearer(KUBEPLEX);
    let headers = [("Authorization", auth.as_str()), ("Accept", "application/jwk-set+json")];
    let keys =
        request(&sim.addr().to_string(), Method::GET, "/openid/v1/jwks", &headers, None).await;
    assert_eq!(keys.status, 200);
    assert_eq!(keys.header("content-type"), "application/jwk-set+json");
    assert_eq!(keys.json()["keys"][0]["kty"], "EC");
}
