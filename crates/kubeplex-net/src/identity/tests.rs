//! The apiserver's `CommonNameUserConversion` on certificates built with rcgen.

use rcgen::string::BmpString;
use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair};

use super::*;

const UID: [u64; 8] = [1, 3, 6, 1, 4, 1, 57683, 2];
/// rcgen keeps one value per attribute type: a second O or CN goes in under its OID spelled as
/// a custom type, which is the same attribute in the certificate.
fn second_o() -> DnType {
    DnType::CustomDnType(vec![2, 5, 4, 10])
}
fn second_cn() -> DnType {
    DnType::CustomDnType(vec![2, 5, 4, 3])
}

fn cert(subject: &[(DnType, DnValue)]) -> Vec<u8> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = DistinguishedName::new();
    for (ty, value) in subject {
        params.distinguished_name.push(ty.clone(), value.clone());
    }
    params.self_signed(&KeyPair::generate().unwrap()).unwrap().der().to_vec()
}

fn utf8(s: &str) -> DnValue {
    DnValue::Utf8String(s.into())
}

#[test]
fn the_user_is_the_common_name_and_the_groups_every_organization() {
    let der = cert(&[
        (DnType::OrganizationName, utf8("system:nodes")),
        (DnType::CommonName, utf8("system:node:worker-1")),
        (second_o(), DnValue::PrintableString("team-a".try_into().unwrap())),
    ]);
    let user = from_leaf(&der).unwrap().unwrap();
    assert_eq!(user.user, "system:node:worker-1");
    assert_eq!(user.groups, ["system:nodes", "team-a"]);
    assert_eq!(user.uid, None);
}

#[test]
fn the_credential_id_is_the_sha256_of_the_certificate() {
    let der = cert(&[(DnType::CommonName, utf8("alice"))]);
    let user = from_leaf(&der).unwrap().unwrap();
    let hex = user.credential_id.strip_prefix("X509SHA256=").unwrap();
    assert_eq!(hex.len(), 64);
    assert!(hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{hex}");
    // Another certificate of the same subject is another credential.
    let again = from_leaf(&cert(&[(DnType::CommonName, utf8("alice"))])).unwrap().unwrap();
    assert_ne!(again.credential_id, user.credential_id);
}

#[test]
fn the_last_common_name_wins_as_in_go() {
    let der = cert(&[(DnType::CommonName, utf8("first")), (second_cn(), utf8("second"))]);
    assert_eq!(from_leaf(&der).unwrap().unwrap().user, "second");
}

#[test]
fn bmp_strings_are_read() {
    let der = cert(&[
        (DnType::CommonName, DnValue::BmpString(BmpString::try_from("zoë").unwrap())),
        (DnType::OrganizationName, DnValue::BmpString(BmpString::try_from("ops").unwrap())),
    ]);
    let user = from_leaf(&der).unwrap().unwrap();
    assert_eq!((user.user.as_str(), user.groups.as_slice()), ("zoë", &["ops".to_string()][..]));
}

#[test]
fn no_common_name_is_no_user_and_no_error() {
    let der = cert(&[(DnType::OrganizationName, utf8("system:masters"))]);
    assert_eq!(from_leaf(&der), Ok(None));
}

#[test]
fn the_uid_attribute_is_read_once_and_must_not_be_empty() {
    let uid = DnType::CustomDnType(UID.to_vec());
    let der = cert(&[(DnType::CommonName, utf8("alice")), (uid.clone(), utf8("1234-abcd"))]);
    assert_eq!(from_leaf(&der).unwrap().unwrap().uid.as_deref(), Some("1234-abcd"));

    // Two UIDs: rcgen writes one, so the certificate gets a neighbour OID (…57683.3) and its
    // last byte patched to …57683.2 (the signature no longer matters: this only parses).
    let neighbour = DnType::CustomDnType(vec![1, 3, 6, 1, 4, 1, 57683, 3]);
    let mut two = cert(&[
        (DnType::CommonName, utf8("alice")),
        (uid.clone(), utf8("a")),
        (neighbour, utf8("b")),
    ]);
    let encoded_neighbour = [0x06, 0x09, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xc2, 0x53, 0x03];
    // In the issuer (self-signed: the same name) and in the subject.
    let at: Vec<usize> =
        (0..two.len() - 11).filter(|&i| two[i..i + 11] == encoded_neighbour).collect();
    assert_eq!(at.len(), 2);
    for i in at {
        two[i + 10] = 0x02;
    }
    assert_eq!(
        from_leaf(&two),
        Err(r#"expected 1 UID, but found multiple: ["a", "b"]"#.to_string())
    );

    let empty = cert(&[(DnType::CommonName, utf8("alice")), (uid, utf8(""))]);
    assert_eq!(from_leaf(&empty), Err("UID cannot be an empty string".to_string()));
}

#[test]
fn malformed_certificates_are_errors_not_panics() {
    let der = cert(&[(DnType::CommonName, utf8("alice"))]);
    for bad in [&b""[..], b"not a certificate", &der[..der.len() / 2], &der[1..]] {
        assert!(from_leaf(bad).is_err());
    }
    // Every truncation of a real certificate.
    for n in 0..der.len() {
        let _ = from_leaf(&der[..n]);
    }
}
