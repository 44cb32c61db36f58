use super::*;
use std::time::Duration;

const V1: &str = "client.authentication.k8s.io/v1";

#[test]
fn parses_token_and_expiry() {
    let out = br#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",
            "status":{"token":"tok","expirationTimestamp":"2030-01-02T03:04:05Z"}}"#;
    let creds = parse(out, V1).unwrap();
    assert_eq!(creds.token.as_deref(), Some("tok"));
    assert!(creds.client_cert.is_none());
    assert_eq!(creds.expires, Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1893553445)));
}

#[test]
fn parses_a_cert_pair_as_pem_text() {
    let out = br#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",
            "status":{"clientCertificateData":"CERT","clientKeyData":"KEY"}}"#;
    let creds = parse(out, V1).unwrap();
    let cert = creds.client_cert.unwrap();
    assert_eq!((cert.cert_pem.as_slice(), cert.key_pem.as_slice()), (&b"CERT"[..], &b"KEY"[..]));
    assert_eq!(creds.expires, None);
}

#[test]
fn refuses_what_client_go_refuses() {
    let cases: [(&[u8], &str); 6] = [
        (br#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","status":{"token":"t"}}"#,
         "exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin returned version client.authentication.k8s.io/v1beta1"),
        (br#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1"}"#,
         "exec plugin didn't return a status field"),
        (br#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{}}"#,
         "exec plugin didn't return a token or cert/key pair"),
        (br#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"t","clientKeyData":"k"}}"#,
         "exec plugin returned only certificate or key, not both"),
        (br#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"t","expirationTimestamp":"soon"}}"#,
         "exec plugin returned an invalid expirationTimestamp \"soon\""),
        (br#"{"kind":"Status","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"t"}}"#,
         "decoding stdout: kind \"Status\" is not ExecCredential"),
    ];
    for (out, want) in cases {
        assert_eq!(parse(out, V1).unwrap_err().to_string(), want);
    }
}

proptest::proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
        let _ = parse(&bytes, V1);
    }
}
