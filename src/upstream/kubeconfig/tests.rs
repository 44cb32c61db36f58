use super::*;
use crate::upstream::testing::TempDir;

const HEAD: &str = "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n\
    contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n    namespace: team-a\n";

/// Writes a kubeconfig with `cluster` and `user` bodies (indented YAML) into `sub/config`.
fn load(dir: &TempDir, cluster: &str, user: &str) -> Result<UpstreamConfig, ConfigError> {
    let text = format!(
        "{HEAD}clusters:\n- name: c\n  cluster:\n{cluster}users:\n- name: u\n  user:\n{user}"
    );
    let path = dir.write("sub/config", text);
    UpstreamConfig::from_kubeconfig_files(&[path], None)
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

const SERVER: &str = "    server: https://k:6443\n    insecure-skip-tls-verify: true\n";

#[test]
fn ca_data_is_base64_even_when_wrapped_and_wins_over_the_file() {
    let dir = TempDir::new("ca-data");
    dir.write("sub/ca.pem", "FROM FILE");
    let data = b64(b"FROM DATA, long enough to wrap");
    let (first, rest) = data.split_at(10);
    let cluster = format!(
        "    server: https://k:6443\n    certificate-authority: ca.pem\n    certificate-authority-data: \"{first}\\n{rest}\"\n"
    );
    let config = load(&dir, &cluster, "    token: t\n").unwrap();
    assert_eq!(config.tls.ca_pem.as_deref(), Some(&b"FROM DATA, long enough to wrap"[..]));
}

#[test]
fn relative_files_resolve_against_the_kubeconfig_directory() {
    let dir = TempDir::new("relative");
    dir.write("sub/pki/ca.pem", "CA");
    dir.write("sub/pki/client.crt", "CERT");
    dir.write("sub/pki/client.key", "KEY");
    dir.write("sub/token", " file-token \n");
    let cluster = "    server: https://k:6443\n    certificate-authority: pki/ca.pem\n    tls-server-name: kubernetes\n";
    let user = "    client-certificate: pki/client.crt\n    client-key: pki/client.key\n    tokenFile: token\n";
    let config = load(&dir, cluster, user).unwrap();
    assert_eq!(
        config.tls,
        TlsConfig {
            ca_pem: Some(b"CA".to_vec()),
            insecure_skip_tls_verify: false,
            server_name: Some("kubernetes".into()),
            client_cert: Some(ClientCertPem {
                cert_pem: b"CERT".to_vec(),
                key_pem: b"KEY".to_vec()
            }),
        }
    );
    let token_path = std::path::absolute(dir.path()).unwrap().join("sub/token");
    assert_eq!(
        config.auth,
        AuthConfig::TokenFile { path: token_path, initial: "file-token".into() }
    );
    assert_eq!(config.namespace.as_deref(), Some("team-a"));
}

#[test]
fn client_cert_and_key_data() {
    let dir = TempDir::new("cert-data");
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(b"CERT"),
        b64(b"KEY")
    );
    let config = load(&dir, SERVER, &user).unwrap();
    assert_eq!(
        config.tls.client_cert,
        Some(ClientCertPem { cert_pem: b"CERT".to_vec(), key_pem: b"KEY".to_vec() })
    );
    assert_eq!(config.auth, AuthConfig::None);
}

#[test]
fn inline_token_with_token_file_starts_from_the_inline_token() {
    let dir = TempDir::new("token-both");
    let config =
        load(&dir, SERVER, "    token: inline\n    tokenFile: /nonexistent/token\n").unwrap();
    assert_eq!(
        config.auth,
        AuthConfig::TokenFile { path: "/nonexistent/token".into(), initial: "inline".into() }
    );
}

#[test]
fn token_and_basic_auth() {
    let dir = TempDir::new("token-basic");
    assert_eq!(
        load(&dir, SERVER, "    token: abc\n").unwrap().auth,
        AuthConfig::Token("abc".into())
    );
    assert_eq!(
        load(&dir, SERVER, "    username: admin\n    password: pw\n").unwrap().auth,
        AuthConfig::Basic { username: "admin".into(), password: "pw".into() }
    );
    let err = load(&dir, SERVER, "    token: abc\n    username: admin\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "more than one authentication method found for \"u\"; found [token basicAuth], only one is allowed"
    );
}

#[test]
fn exec_plugin_config() {
    let dir = TempDir::new("exec");
    let cluster = "    server: https://k:6443\n    insecure-skip-tls-verify: true\n    tls-server-name: api\n\
        \x20   extensions:\n    - name: client.authentication.k8s.io/exec\n      extension:\n        audience: x\n";
    let user =
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ./bin/cred\n\
        \x20     args: [get, --json]\n      env:\n      - name: FOO\n        value: bar\n\
        \x20     provideClusterInfo: true\n      interactiveMode: IfAvailable\n";
    let config = load(&dir, cluster, user).unwrap();
    let AuthConfig::Exec(exec) = config.auth else { panic!("{:?}", config.auth) };
    let base = std::path::absolute(dir.path()).unwrap().join("sub");
    assert_eq!(exec.command, base.join("./bin/cred").to_string_lossy());
    assert_eq!(exec.args, ["get", "--json"]);
    assert_eq!(exec.env, [("FOO".to_owned(), "bar".to_owned())]);
    assert_eq!(exec.api_version, "client.authentication.k8s.io/v1");
    assert_eq!(
        exec.cluster_info.unwrap().to_string(),
        r#"{"server":"https://k:6443","tls-server-name":"api","insecure-skip-tls-verify":true,"config":{"audience":"x"}}"#
    );
}

#[test]
fn exec_command_from_path_is_not_resolved_and_is_ignored_beside_a_token() {
    let dir = TempDir::new("exec-path");
    let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: gke-auth\n";
    let AuthConfig::Exec(config) = load(&dir, SERVER, exec).unwrap().auth else { panic!() };
    assert_eq!((config.command.as_str(), config.cluster_info), ("gke-auth", None));
    let with_token = format!("    token: t\n{exec}");
    assert_eq!(load(&dir, SERVER, &with_token).unwrap().auth, AuthConfig::Token("t".into()));
}

#[test]
fn unsupported_settings_are_refused_by_name() {
    let dir = TempDir::new("refused");
    let cases = [
        (format!("{SERVER}    proxy-url: http://proxy:3128\n"), "    token: t\n".to_owned(),
         "cluster \"c\" sets proxy-url, which kubeplex does not support; reach the apiserver directly"),
        (SERVER.to_owned(), "    auth-provider:\n      name: oidc\n".to_owned(),
         "user \"u\" uses auth-provider \"oidc\", which kubeplex does not support; use an exec credential plugin"),
        (SERVER.to_owned(), "    as: someone\n".to_owned(),
         "user \"u\" sets impersonation (as, as-groups, as-uid or as-user-extra), which kubeplex does not support"),
        (SERVER.to_owned(), "    exec:\n      apiVersion: v1\n      command: x\n      interactiveMode: Always\n".to_owned(),
         "user \"u\": invalid exec plugin: interactiveMode Always needs a terminal, which kubeplex does not have"),
        (SERVER.to_owned(), "    exec:\n      command: x\n".to_owned(),
         "user \"u\": invalid exec plugin: apiVersion must be specified"),
        (SERVER.to_owned(), format!("    client-certificate-data: {}\n", b64(b"C")),
         "client-key-data or client-key must be specified for \"u\" to use the clientCert authentication method"),
        ("    certificate-authority-data: \"!!\"\n    server: https://k\n".to_owned(), String::new(),
         "invalid base64 in certificate-authority-data of \"c\""),
        ("    insecure-skip-tls-verify: true\n".to_owned(), String::new(), "no server found for cluster \"c\""),
    ];
    for (cluster, user, want) in cases {
        let user = if user.is_empty() { "    {}\n".to_owned() } else { user };
        assert_eq!(load(&dir, &cluster, &user).unwrap_err().to_string(), want);
    }
}

#[test]
fn context_errors_name_what_is_missing() {
    let dir = TempDir::new("contexts");
    let path = dir.write(
        "config",
        "current-context: gone\ncontexts:\n- name: no-cluster\n  context:\n    user: u\n\
         - name: bad-cluster\n  context:\n    cluster: nope\n\
         - name: bad-user\n  context:\n    cluster: c\n    user: nobody\n\
         clusters:\n- name: c\n  cluster:\n    server: http://k\n",
    );
    let files = format!("[{:?}]", path);
    let err = |context: Option<&str>| {
        UpstreamConfig::from_kubeconfig_files(std::slice::from_ref(&path), context)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(err(None), format!("context \"gone\" not found in {files}"));
    assert_eq!(err(Some("typo")), format!("context \"typo\" not found in {files}"));
    assert_eq!(err(Some("no-cluster")), "cluster was not specified for context \"no-cluster\"");
    assert_eq!(
        err(Some("bad-cluster")),
        "cluster \"nope\" was not found for context \"bad-cluster\""
    );
    assert_eq!(err(Some("bad-user")), "user \"nobody\" was not found for context \"bad-user\"");
}

#[test]
fn pretty_json_kubeconfig_like_the_sims() {
    let dir = TempDir::new("json");
    let json = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": "http://127.0.0.1:8080/base/"}}],
        "users": [{"name": "sim", "user": {}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim", "namespace": "default"}}],
        "current-context": "sim",
    });
    let path = dir.write("config.json", serde_json::to_string_pretty(&json).unwrap());
    let config = UpstreamConfig::from_kubeconfig_files(std::slice::from_ref(&path), None).unwrap();
    assert_eq!(config.base_url(), "http://127.0.0.1:8080/base");
    assert_eq!((config.auth, config.namespace.as_deref()), (AuthConfig::None, Some("default")));
    assert_eq!(
        config.source,
        ConfigSource::Kubeconfig { files: vec![path], context: "sim".into() }
    );
}

#[test]
fn a_context_without_a_user_is_anonymous() {
    let dir = TempDir::new("userless");
    let path = dir.write(
        "config",
        r#"{"current-context":"j","clusters":[{"name":"c","cluster":{"server":"http://k"}}],
            "contexts":[{"name":"j","context":{"cluster":"c"}}],"users":null}"#,
    );
    let config = UpstreamConfig::from_kubeconfig_files(&[path], None).unwrap();
    assert_eq!((config.auth, config.tls), (AuthConfig::None, TlsConfig::default()));
}

#[test]
fn empty_file_has_no_current_context() {
    let dir = TempDir::new("empty");
    let path = dir.write("config", "");
    let err = UpstreamConfig::from_kubeconfig_files(std::slice::from_ref(&path), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("current-context is not set in [{path:?}]; choose a context with --context")
    );
}

#[test]
fn duplicate_names_in_one_file_are_refused() {
    let dir = TempDir::new("dup");
    let path = dir.write("config", "users:\n- name: u\n- name: u\n");
    let err = UpstreamConfig::from_kubeconfig_files(std::slice::from_ref(&path), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("kubeconfig {}: duplicate user name \"u\"", path.display())
    );
}

#[test]
fn malformed_yaml_names_the_file() {
    let dir = TempDir::new("malformed");
    let path = dir.write("config", "clusters: [\n");
    let err = UpstreamConfig::from_kubeconfig_files(std::slice::from_ref(&path), None).unwrap_err();
    let want = format!("parsing kubeconfig {}: ", path.display());
    assert!(err.to_string().starts_with(&want), "{err}");
}

/// client-go reads a kubeconfig written by Windows PowerShell (UTF-16 with a byte order mark),
/// or with a UTF-8 one; a UTF-16 file cut in the middle of a character is a parse error, not a
/// panic.
#[test]
fn utf16_and_bom_kubeconfigs_are_read_as_client_go_reads_them() {
    let dir = TempDir::new("utf16");
    let text = "current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c}\n\
        clusters:\n- name: c\n  cluster: {server: \"https://k:6443\"}\n";
    let le: Vec<u8> =
        [0xFF, 0xFE].into_iter().chain(text.encode_utf16().flat_map(u16::to_le_bytes)).collect();
    let be: Vec<u8> =
        [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
    let bom: Vec<u8> = [0xEF, 0xBB, 0xBF].into_iter().chain(text.bytes()).collect();
    for (name, bytes) in [("le", le.clone()), ("be", be), ("bom", bom)] {
        let path = dir.write(name, bytes);
        let config = UpstreamConfig::from_kubeconfig_files(&[path], None).unwrap();
        assert_eq!(config.base_url(), "https://k:6443", "{name}");
    }
    let cut = dir.write("cut", &le[..le.len() - 1]);
    let err = UpstreamConfig::from_kubeconfig_files(std::slice::from_ref(&cut), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("parsing kubeconfig {}: incomplete UTF-16 character", cut.display())
    );
}

proptest::proptest! {
    #[test]
    fn merge_never_panics(text in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
        let _ = Kubeconfig::default().merge(Path::new("/x/config"), &text);
        for bom in [&[0xFF, 0xFE][..], &[0xFE, 0xFF], &[0xEF, 0xBB, 0xBF]] {
            let _ = Kubeconfig::default().merge(Path::new("/x/config"), &[bom, &text].concat());
        }
    }

    #[test]
    fn merge_of_yamlish_text_never_panics(text in "[a-z:\\- \\n\\[\\]{}\"]{0,200}") {
        let mut merged = Kubeconfig::default();
        if merged.merge(Path::new("/x/config"), text.as_bytes()).is_ok() {
            if let Ok(selected) = merged.select(None) {
                let _ = build(selected);
            }
        }
    }
}
