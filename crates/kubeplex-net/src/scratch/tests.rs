use super::*;

/// A CA read back from its PEM signs client certificates that chain to it, with the CN and
/// O the apiserver's x509 authenticator reads as user and groups.
#[test]
fn an_existing_ca_signs_client_certificates_that_chain_to_it() {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "harness-ca");
    let key = KeyPair::generate().expect("key");
    let ca_pem = params.self_signed(&key).expect("ca").pem();

    assert!(Pki::from_pem(&ca_pem, "not a key").is_none());
    assert!(Pki::from_pem("not a certificate", &key.serialize_pem()).is_none());
    let pki = Pki::from_pem(&ca_pem, &key.serialize_pem()).expect("the CA parses");
    let issued = pki.client("system:node:n-7", &["system:nodes"]);

    let ca_der = crate::tls::pem::certs(ca_pem.as_bytes()).unwrap().remove(0);
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&issued.der).unwrap();
    assert_eq!(cert.issuer(), ca.subject());
    cert.verify_signature(Some(ca.public_key())).expect("signed by the CA's key");
    let cn: Vec<_> = cert.subject().iter_common_name().map(|a| a.as_str().unwrap()).collect();
    let o: Vec<_> = cert.subject().iter_organization().map(|a| a.as_str().unwrap()).collect();
    assert_eq!((cn, o), (vec!["system:node:n-7"], vec!["system:nodes"]));
}
