//! The TLS listener over loopback with a real TLS client: ALPN, client certificates as the
//! apiserver's x509 authenticator takes them, reloads, the handshake deadline, start errors.

mod support;

use std::time::{Duration, Instant};

use http::Version;
use rcgen::KeyPair;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use self::support::{client_config, get_once, test_ca, version_of, Conn, Files, Server, WAIT};
use super::*;
use crate::scratch::TempDir;

const H2: &[u8] = b"h2";
const H1: &[u8] = b"http/1.1";

#[tokio::test]
async fn alpn_picks_http2_when_offered_and_http1_otherwise() {
    let ca = test_ca();
    let files = Files::new("alpn", &ca.server_for(&["127.0.0.1", "alpn.test"]), &ca);
    let server = Server::start(files.config.clone()).await;

    let both = get_once(server.addr, client_config(&ca, &[H2, H1], None)).await;
    assert_eq!(version_of(&both), Some(Version::HTTP_2), "{both}");
    let h1_only = get_once(server.addr, client_config(&ca, &[H1], None)).await;
    assert_eq!(version_of(&h1_only), Some(Version::HTTP_11), "{h1_only}");
    // No ALPN at all (curl --no-alpn, old clients): HTTP/1.1.
    let none = get_once(server.addr, client_config(&ca, &[], None)).await;
    assert_eq!(version_of(&none), Some(Version::HTTP_11), "{none}");
}

#[tokio::test]
async fn a_client_certificate_from_the_client_ca_is_the_user_and_its_groups() {
    let ca = test_ca();
    let files = Files::new("user", &ca.server_for(&["127.0.0.1", "user.test"]), &ca);
    let server = Server::start(files.config.clone()).await;
    let node = ca.client("system:node:worker-1", &["system:nodes", "team-a"]);

    for alpn in [H2, H1] {
        let seen = get_once(server.addr, client_config(&ca, &[alpn], Some(&node))).await;
        assert!(
            seen.ends_with(
                "user=system:node:worker-1 groups=system:nodes,team-a uid= rejected=false body="
            ),
            "{seen}"
        );
    }
}

#[tokio::test]
async fn without_a_client_certificate_the_request_is_served_with_no_identity() {
    let ca = test_ca();
    let files = Files::new("anon", &ca.server_for(&["127.0.0.1", "anon.test"]), &ca);
    let server = Server::start(files.config.clone()).await;

    let seen = get_once(server.addr, client_config(&ca, &[H2, H1], None)).await;
    assert_eq!(seen, "HTTP/2.0 user= groups= uid= rejected=false body=");
}

#[tokio::test]
async fn certificates_that_do_not_verify_are_rejected_never_a_user() {
    let ca = test_ca();
    let files = Files::new("reject", &ca.server_for(&["127.0.0.1", "reject.test"]), &ca);
    let server = Server::start(files.config.clone()).await;

    let other_ca = test_ca().client("system:admin", &["system:masters"]);
    let expired = ca.client_with("alice", &["devs"], |p| {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let not_yet = ca.client_with("alice", &["devs"], |p| {
        p.not_before = rcgen::date_time_ymd(2200, 1, 1);
        p.not_after = rcgen::date_time_ymd(2201, 1, 1);
    });
    let server_only = ca.client_with("alice", &["devs"], |p| {
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    });
    for (what, cert) in [
        ("other CA", other_ca),
        ("expired", expired),
        ("not yet valid", not_yet),
        ("server auth only", server_only),
    ] {
        // The handshake completes (Go's RequestClientCert, as the apiserver serves), and the
        // request says the certificate was rejected: the apiserver's 401, never anonymous.
        let seen = get_once(server.addr, client_config(&ca, &[H2], Some(&cert))).await;
        assert_eq!(seen, "HTTP/2.0 user= groups= uid= rejected=true body=", "{what}");
    }
}

#[tokio::test]
async fn a_verified_certificate_without_a_common_name_is_no_user_and_not_rejected() {
    let ca = test_ca();
    let files = Files::new("nocn", &ca.server_for(&["127.0.0.1", "nocn.test"]), &ca);
    let server = Server::start(files.config.clone()).await;
    let cert = ca.client("", &["system:nodes"]);

    let seen = get_once(server.addr, client_config(&ca, &[H1], Some(&cert))).await;
    assert_eq!(seen, "HTTP/1.1 user= groups= uid= rejected=false body=");
}

#[tokio::test]
async fn a_client_ca_bundle_of_several_certificates_accepts_each() {
    let (ca1, ca2) = (test_ca(), test_ca());
    let files = Files::new("bundle", &ca1.server_for(&["127.0.0.1", "bundle.test"]), &ca1);
    files.dir.write("ca.crt", format!("{}{}", ca1.ca_pem, ca2.ca_pem));
    let server = Server::start(files.config.clone()).await;

    for (n, ca) in [&ca1, &ca2].into_iter().enumerate() {
        let cert = ca.client(&format!("user-{n}"), &["g"]);
        let seen = get_once(server.addr, client_config(&ca1, &[H1], Some(&cert))).await;
        assert_eq!(seen, format!("HTTP/1.1 user=user-{n} groups=g uid= rejected=false body="));
    }
}

#[tokio::test]
async fn http1_upgrades_pass_through_with_the_client_certificate() {
    let ca = test_ca();
    let files = Files::new("upgrade", &ca.server_for(&["127.0.0.1", "upgrade.test"]), &ca);
    let server = Server::start(files.config.clone()).await;
    let cert = ca.client("system:node:worker-1", &["system:nodes"]);

    let mut conn = Conn::open(server.addr, client_config(&ca, &[H1], Some(&cert))).await.unwrap();
    assert_eq!(conn.upgrade_and_echo(b"stdin bytes").await.unwrap(), b"stdin bytes");
}

#[tokio::test]
async fn a_rotated_serving_certificate_is_used_by_new_connections_while_old_ones_go_on() {
    let ca = test_ca();
    let first = ca.server_for(&["127.0.0.1", "first.test"]);
    let files = Files::new("rotate", &first, &ca);
    let server = Server::start(files.config.clone()).await;
    let config = client_config(&ca, &[H1], None);

    let mut before = Conn::open(server.addr, config.clone()).await.unwrap();
    assert_eq!(before.server_cert, first.der);
    assert!(before.send("one").await.unwrap().ends_with("body=one"));

    // The kubelet and cert-manager's Secret volumes replace the files by rename.
    let second = ca.server_for(&["127.0.0.1", "second.test"]);
    files.dir.replace("tls.key", &second.key_pem);
    files.dir.replace("tls.crt", &second.cert_pem);
    tokio::time::sleep(files.config.reload_interval * 3).await;

    let after = Conn::open(server.addr, config.clone()).await.unwrap();
    assert_eq!(after.server_cert, second.der);
    assert_ne!(second.der, first.der);
    // The connection opened before still works, on what it negotiated.
    assert!(before.send("two").await.unwrap().ends_with("body=two"));
}

#[tokio::test]
async fn a_broken_rewrite_keeps_the_last_good_certificate_until_the_files_are_whole() {
    let ca = test_ca();
    let first = ca.server_for(&["127.0.0.1", "first.test"]);
    let files = Files::new("broken", &first, &ca);
    let server = Server::start(files.config.clone()).await;
    let config = client_config(&ca, &[H1], None);
    let wait = files.config.reload_interval * 3;
    let served = |_: ()| async {
        Conn::open(server.addr, config.clone()).await.unwrap().server_cert.clone()
    };

    // Garbage in place of the certificate: still the first one.
    files.dir.write("tls.crt", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n");
    tokio::time::sleep(wait).await;
    assert_eq!(served(()).await, first.der);

    // A new certificate whose key is not written yet: a mismatch, still the first one.
    let second_key = KeyPair::generate().unwrap();
    let second_key_pem = second_key.serialize_pem();
    let second = ca.server_with_key(&["127.0.0.1", "second.test"], second_key);
    files.dir.write("tls.crt", &second.cert_pem);
    tokio::time::sleep(wait).await;
    assert_eq!(served(()).await, first.der);

    // The key arrives: retried at the next check, the second certificate is served.
    files.dir.write("tls.key", &second_key_pem);
    tokio::time::sleep(wait).await;
    assert_eq!(served(()).await, second.der);
}

#[tokio::test]
async fn a_rotated_client_ca_applies_to_the_next_request_of_an_open_connection() {
    let (old_ca, new_ca) = (test_ca(), test_ca());
    let files = Files::new("ca-rotate", &old_ca.server_for(&["127.0.0.1", "ca.test"]), &old_ca);
    let server = Server::start(files.config.clone()).await;
    let cert = old_ca.client("bob", &["ops"]);
    let mut conn =
        Conn::open(server.addr, client_config(&old_ca, &[H2], Some(&cert))).await.unwrap();
    assert!(conn.send("").await.unwrap().contains("user=bob groups=ops"));

    // The old CA is no longer trusted: like the apiserver, which verifies every request
    // against the current bundle, the open connection's next request is no longer bob.
    files.dir.replace("ca.crt", &new_ca.ca_pem);
    tokio::time::sleep(files.config.reload_interval * 3).await;
    let seen = conn.send("").await.unwrap();
    assert_eq!(seen, "HTTP/2.0 user= groups= uid= rejected=true body=");
}

#[tokio::test]
async fn a_silent_client_is_dropped_after_the_handshake_timeout_and_others_are_served() {
    let ca = test_ca();
    let mut files = Files::new("silent", &ca.server_for(&["127.0.0.1", "silent.test"]), &ca);
    files.config.handshake_timeout = Duration::from_millis(300);
    let server = Server::start(files.config.clone()).await;

    let started = Instant::now();
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    // Others are served meanwhile.
    let seen = get_once(server.addr, client_config(&ca, &[H1], None)).await;
    assert!(seen.starts_with("HTTP/1.1"), "{seen}");

    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(WAIT, silent.read(&mut buf)).await.expect("never dropped");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());

    let seen = get_once(server.addr, client_config(&ca, &[H2], None)).await;
    assert!(seen.starts_with("HTTP/2.0"), "{seen}");
}

#[tokio::test]
async fn a_failed_handshake_ends_that_connection_only() {
    let ca = test_ca();
    let files = Files::new("distrust", &ca.server_for(&["127.0.0.1", "distrust.test"]), &ca);
    let server = Server::start(files.config.clone()).await;

    // A client that does not trust the serving certificate gives up in the handshake.
    let stranger = Conn::open(server.addr, client_config(&test_ca(), &[H1], None)).await;
    assert!(stranger.is_err());
    let seen = get_once(server.addr, client_config(&ca, &[H1], None)).await;
    assert!(seen.starts_with("HTTP/1.1"), "{seen}");
}

#[tokio::test]
async fn missing_or_bad_files_at_start_are_errors_naming_the_file() {
    let ca = test_ca();
    let files = Files::new("start", &ca.server_for(&["127.0.0.1", "start.test"]), &ca);
    let missing = files.dir.path().join("missing.crt");
    let err =
        |config: TlsConfig| TlsAcceptor::new(config).err().expect("must not start").to_string();

    let mut config = files.config.clone();
    config.cert_file = missing.clone();
    let msg = err(config);
    assert!(msg.contains(&*missing.to_string_lossy()), "{msg}");

    let mut config = files.config.clone();
    config.key_file = missing.clone();
    let msg = err(config);
    assert!(msg.contains(&*missing.to_string_lossy()), "{msg}");

    let mut config = files.config.clone();
    config.client_ca_file = Some(missing.clone());
    let msg = err(config);
    assert!(msg.contains(&*missing.to_string_lossy()), "{msg}");

    let empty = files.dir.write("empty.crt", "");
    let mut config = files.config.clone();
    config.cert_file = empty.clone();
    let msg = err(config);
    assert!(msg.contains(&*empty.to_string_lossy()) && msg.contains("no PEM certificate"), "{msg}");

    let other_key = files.dir.write("other.key", KeyPair::generate().unwrap().serialize_pem());
    let mut config = files.config.clone();
    config.key_file = other_key.clone();
    let msg = err(config);
    assert!(msg.contains(&*other_key.to_string_lossy()), "{msg}");
}

#[tokio::test]
async fn keys_in_pkcs8_pkcs1_and_sec1_are_served() {
    // Keys as openssl writes them (`genpkey`, `pkey -traditional`, `ecparam -genkey`).
    let keys = [
        ("rsa pkcs#8", include_str!("tests/rsa.pk8.pem"), include_str!("tests/rsa.pk8.pem")),
        ("rsa pkcs#1", include_str!("tests/rsa.pk8.pem"), include_str!("tests/rsa.pk1.pem")),
        ("ec pkcs#8", include_str!("tests/ec.pk8.pem"), include_str!("tests/ec.pk8.pem")),
        ("ec sec1", include_str!("tests/ec.pk8.pem"), include_str!("tests/ec.sec1.pem")),
    ];
    let ca = test_ca();
    for (what, pkcs8, served_key) in keys {
        let cert =
            ca.server_with_key(&["127.0.0.1", "keys.test"], KeyPair::from_pem(pkcs8).unwrap());
        let dir = TempDir::new("keys");
        let mut config =
            TlsConfig::new(dir.write("tls.crt", &cert.cert_pem), dir.write("tls.key", served_key));
        config.client_ca_file = Some(dir.write("ca.crt", &ca.ca_pem));
        let server = Server::start(config).await;
        let conn = Conn::open(server.addr, client_config(&ca, &[H2], None)).await;
        assert_eq!(conn.expect(what).server_cert, cert.der, "{what}");
    }
}

#[tokio::test]
async fn without_a_client_ca_no_certificate_is_asked_for() {
    let ca = test_ca();
    let files = Files::new("noca", &ca.server_for(&["127.0.0.1", "noca.test"]), &ca);
    let mut config = files.config.clone();
    config.client_ca_file = None;
    let server = Server::start(config).await;
    let cert = ca.client("carol", &["g"]);

    let seen = get_once(server.addr, client_config(&ca, &[H1], Some(&cert))).await;
    assert_eq!(seen, "HTTP/1.1 user= groups= uid= rejected=false body=");
}
