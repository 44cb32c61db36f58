use std::path::Path;

use super::*;
use crate::upstream::testing::TempDir;

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: main\n\
         clusters:\n- name: c\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\n\
         contexts:\n- name: main\n  context:\n    cluster: c\n    user: u\n- name: other\n  context:\n    cluster: c\n    user: u\n\
         users:\n- name: u\n  user:\n    token: t\n"
    )
}

/// Every source present: explicit file, in-cluster, $KUBECONFIG and ~/.kube/config.
struct World {
    _dir: TempDir,
    explicit: PathBuf,
    env: Environment,
}

fn world() -> World {
    let dir = TempDir::new("precedence");
    let explicit = dir.write("explicit.yaml", kubeconfig("https://explicit:1"));
    let var = dir.write("var.yaml", kubeconfig("https://var:2"));
    dir.write("home/.kube/config", kubeconfig("https://home:3"));
    dir.write("sa/token", "sa-token\n");
    dir.write("sa/ca.crt", "CA PEM");
    dir.write("sa/namespace", "kube-system");
    let env = Environment {
        in_cluster: Some(InClusterEnv {
            host: "10.0.0.1".into(),
            port: "443".into(),
            dir: dir.path().join("sa"),
        }),
        kubeconfig_var: Some(var.into_os_string()),
        home: Some(dir.path().join("home")),
    };
    World { _dir: dir, explicit, env }
}

fn server_of(result: Result<UpstreamConfig, ConfigError>) -> String {
    result.unwrap().base_url()
}

#[test]
fn explicit_kubeconfig_wins_over_everything() {
    let w = world();
    assert_eq!(
        server_of(UpstreamConfig::resolve_in(&w.env, Some(&w.explicit), None)),
        "https://explicit:1"
    );
}

#[test]
fn in_cluster_comes_before_kubeconfig_variable() {
    let w = world();
    let config = UpstreamConfig::resolve_in(&w.env, None, None).unwrap();
    assert_eq!(config.base_url(), "https://10.0.0.1:443");
    assert_eq!(config.source, ConfigSource::InCluster);
    assert_eq!(
        config.auth,
        AuthConfig::TokenFile {
            path: w.env.in_cluster.as_ref().unwrap().dir.join("token"),
            initial: "sa-token".into()
        }
    );
    assert_eq!(config.tls.ca_pem.as_deref(), Some(&b"CA PEM"[..]));
    assert_eq!(config.namespace.as_deref(), Some("kube-system"));
}

#[test]
fn a_context_flag_skips_in_cluster() {
    let w = world();
    let config = UpstreamConfig::resolve_in(&w.env, None, Some("other")).unwrap();
    assert_eq!(config.base_url(), "https://var:2");
    let ConfigSource::Kubeconfig { context, .. } = config.source else {
        panic!("{:?}", config.source)
    };
    assert_eq!(context, "other");
}

#[test]
fn kubeconfig_variable_comes_before_home() {
    let mut w = world();
    w.env.in_cluster = None;
    assert_eq!(server_of(UpstreamConfig::resolve_in(&w.env, None, None)), "https://var:2");
}

#[test]
fn home_kubeconfig_is_the_last_resort() {
    let mut w = world();
    w.env.in_cluster = None;
    w.env.kubeconfig_var = None;
    assert_eq!(server_of(UpstreamConfig::resolve_in(&w.env, None, None)), "https://home:3");
}

#[test]
fn nothing_found_says_what_was_tried() {
    let env = Environment {
        in_cluster: None,
        kubeconfig_var: None,
        home: Some("/nonexistent-home".into()),
    };
    let err = UpstreamConfig::resolve_in(&env, None, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no upstream configuration: no --kubeconfig given, not running in a cluster, KUBECONFIG \
         is unset and /nonexistent-home/.kube/config does not exist"
    );
}

#[test]
fn a_missing_explicit_kubeconfig_is_an_error_not_a_fallback() {
    let w = world();
    let missing = Path::new("/nonexistent/kubeconfig");
    let err = UpstreamConfig::resolve_in(&w.env, Some(missing), None).unwrap_err();
    assert_eq!(err.to_string(), "kubeconfig /nonexistent/kubeconfig does not exist");
}

#[test]
fn kubeconfig_variable_merges_like_client_go() {
    let dir = TempDir::new("merge");
    // a: defines cluster c1 and context ctx-a, no current-context.
    let a = dir.write(
        "a.yaml",
        "clusters:\n- name: c1\n  cluster:\n    server: http://from-a\n\
         contexts:\n- name: ctx-a\n  context:\n    cluster: c1\n",
    );
    // b: first to set current-context; its c1 loses to a's, its ctx-b is new.
    let b = dir.write(
        "b.yaml",
        "current-context: ctx-b\nclusters:\n- name: c1\n  cluster:\n    server: http://from-b\n\
         - name: c2\n  cluster:\n    server: http://c2-from-b\n\
         contexts:\n- name: ctx-b\n  context:\n    cluster: c1\n    namespace: nb\n",
    );
    // c: sets current-context too late to matter.
    let c = dir.write("c.yaml", "current-context: ctx-a\n");
    let list = std::env::join_paths([
        a.clone(),
        PathBuf::new(),
        dir.path().join("missing.yaml"),
        b.clone(),
        a.clone(),
        c.clone(),
    ])
    .unwrap();
    let env = Environment { in_cluster: None, kubeconfig_var: Some(list), home: None };
    let config = UpstreamConfig::resolve_in(&env, None, None).unwrap();
    assert_eq!(config.base_url(), "http://from-a");
    assert_eq!(config.namespace.as_deref(), Some("nb"));
    assert_eq!(
        config.source,
        ConfigSource::Kubeconfig { files: vec![a, b, c], context: "ctx-b".into() }
    );
}

#[test]
fn kubeconfig_variable_with_no_existing_file_is_an_error() {
    let list = std::env::join_paths(["/nonexistent/a", "/nonexistent/b"]).unwrap();
    let env = Environment { in_cluster: None, kubeconfig_var: Some(list), home: None };
    let err = UpstreamConfig::resolve_in(&env, None, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "none of the files in KUBECONFIG exists: [\"/nonexistent/a\", \"/nonexistent/b\"]"
    );
}

#[test]
fn in_cluster_brackets_an_ipv6_service_host() {
    let dir = TempDir::new("ipv6");
    dir.write("token", "t");
    dir.write("ca.crt", "ca");
    let config = UpstreamConfig::in_cluster_from(dir.path(), "fd00::1", "443").unwrap();
    assert_eq!(config.base_url(), "https://[fd00::1]:443");
    assert_eq!(config.namespace, None);
}

#[test]
fn in_cluster_without_a_token_names_the_file() {
    let dir = TempDir::new("no-token");
    dir.write("ca.crt", "ca");
    let err = UpstreamConfig::in_cluster_from(dir.path(), "10.0.0.1", "443").unwrap_err();
    let want = format!("reading {}/token: ", dir.path().display());
    assert!(err.to_string().starts_with(&want), "{err}");
}

#[test]
fn server_urls_parse_like_client_go() {
    let ok = |s: &str, tls: bool| ServerUrl::parse(s, tls).unwrap();
    let url = ok("https://h:6443/", false);
    assert_eq!((url.https, url.authority.as_str(), url.path_prefix.as_str()), (true, "h:6443", ""));
    assert_eq!(ok("https://h/k8s/clusters/c-1/", false).path_prefix, "/k8s/clusters/c-1");
    assert_eq!(ok("h:6443", true).to_string(), "https://h:6443");
    assert_eq!(ok("h:6443", false).to_string(), "http://h:6443");
    assert_eq!(ok("https://[::1]:6443", false).authority, "[::1]:6443");
    for (bad, reason) in [
        ("ftp://h", "the scheme must be http or https"),
        ("https://u:p@h", "user info in the url is not supported"),
        ("https://h/?a=b", "a query is not allowed"),
        ("https://", "not a valid url"),
    ] {
        let err = ServerUrl::parse(bad, false).unwrap_err();
        assert_eq!(err.to_string(), format!("invalid server url {bad:?}: {reason}"));
    }
}

#[test]
fn debug_output_never_shows_secrets() {
    let shown = format!(
        "{:?} {:?} {:?} {:?}",
        AuthConfig::Token("tok-secret".into()),
        AuthConfig::Basic { username: "admin".into(), password: "pw-secret".into() },
        AuthConfig::TokenFile { path: "/t".into(), initial: "file-secret".into() },
        ClientCertPem { cert_pem: b"cert".to_vec(), key_pem: b"key-secret".to_vec() },
    );
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("admin") && shown.contains("\"/t\""), "{shown}");
}

proptest::proptest! {
    #[test]
    fn server_parse_never_panics(s in ".{0,40}", tls in proptest::bool::ANY) {
        let _ = ServerUrl::parse(&s, tls);
    }
}
