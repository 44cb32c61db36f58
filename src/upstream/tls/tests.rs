use super::*;

fn tls(ca: Option<&[u8]>, insecure: bool) -> TlsConfig {
    TlsConfig {
        ca_pem: ca.map(<[u8]>::to_vec),
        insecure_skip_tls_verify: insecure,
        ..TlsConfig::default()
    }
}

#[test]
fn https_without_ca_is_refused_naming_the_server() {
    let err = client_config(&tls(None, false), true, "https://k:6443", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "https server https://k:6443 has no certificate-authority and \
         insecure-skip-tls-verify is not set; kubeplex trusts only a configured CA"
    );
}

#[test]
fn plain_http_needs_no_ca() {
    assert!(client_config(&tls(None, false), false, "http://k", None).is_ok());
}

#[test]
fn ca_with_insecure_is_refused_like_client_go() {
    let err = client_config(&tls(Some(b"x"), true), true, "s", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "specifying a root certificates file with the insecure flag is not allowed"
    );
}

#[test]
fn ca_without_certificates_is_refused() {
    let err = client_config(&tls(Some(b"not pem"), false), true, "s", None).unwrap_err();
    assert!(matches!(err, TlsError::NoCaCert), "{err}");
}

#[test]
fn client_cert_without_key_is_refused() {
    let pki = super::super::testing::Pki::new();
    let identity = ClientCertPem { cert_pem: pki.client_cert_pem.into(), key_pem: vec![] };
    let err = client_config(&tls(Some(pki.ca_pem.as_bytes()), false), true, "s", Some(&identity))
        .unwrap_err();
    assert!(matches!(err, TlsError::NoClientKey), "{err}");
}

#[test]
fn server_name_strips_ipv6_brackets() {
    assert_eq!(server_name("[::1]").unwrap(), ServerName::try_from("::1").unwrap());
    assert_eq!(server_name("kubernetes").unwrap(), ServerName::try_from("kubernetes").unwrap());
    assert!(server_name("bad name!").is_err());
}
