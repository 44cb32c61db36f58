//! Who a TLS client is, by its certificate: kube-apiserver's x509 authenticator
//! (`k8s.io/apiserver/pkg/authentication/request/x509`, `CommonNameUserConversion`, 1.36).
//!
//! Every request of a TLS connection that presented a client certificate carries exactly one of
//! [`ClientCert`] (verified: this is the user) or [`RejectedClientCert`] (presented, but it
//! failed verification) in its `http::Extensions`; a request of a connection without a client
//! certificate carries neither.

use std::fmt::Write as _;

use x509_parser::certificate::X509Certificate;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::oid_registry::{OID_X509_COMMON_NAME, OID_X509_ORGANIZATION_NAME};
use x509_parser::x509::AttributeTypeAndValue;

/// The `user.extra` key under which the apiserver records which credential authenticated a
/// request (`user.CredentialIDKey`).
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// The subject attribute kube-apiserver reads a user's UID from
/// (`asn1util.X509UID()`: the CNCF enterprise arc 1.3.6.1.4.1.57683, suffix 2; read since 1.33,
/// feature `AllowParsingUserUIDFromCertAuth`, beta and on by default).
const UID_OID: &str = "1.3.6.1.4.1.57683.2";

/// The user a verified client certificate authenticates, as kube-apiserver derives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCert {
    /// The subject's common name (the last CN attribute, as Go's `pkix.Name` keeps it).
    pub user: String,
    /// Every subject organization (O), in certificate order.
    pub groups: Vec<String>,
    /// The subject's `1.3.6.1.4.1.57683.2` attribute, when present.
    pub uid: Option<String>,
    /// `X509SHA256=<hex of the leaf certificate's SHA-256>`: the value of `user.extra`
    /// [`CREDENTIAL_ID_KEY`] the apiserver sets for a certificate user.
    pub credential_id: String,
}

/// A client certificate was presented and failed verification (unknown issuer, expired, not
/// for client auth, an unparseable subject). The apiserver's x509 authenticator returns an
/// error for it, so the request is 401 Unauthorized unless another authenticator (a bearer
/// token) succeeds — it is never anonymous.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedClientCert {
    /// Why, for logs (never sent to the client: the apiserver answers a bare 401).
    pub reason: String,
}

/// The user of a verified leaf certificate: `Ok(None)` when the subject has no common name
/// (the apiserver's conversion then does not authenticate, and no error: other authenticators
/// decide), `Err` when the certificate cannot be parsed or its UID attribute is ambiguous
/// (the apiserver's conversion errors: 401).
pub(crate) fn from_leaf(der: &[u8]) -> Result<Option<ClientCert>, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("parsing the client certificate: {e}"))?;
    subject_user(&cert, der)
}

fn subject_user(cert: &X509Certificate<'_>, der: &[u8]) -> Result<Option<ClientCert>, String> {
    let mut user = String::new();
    let mut groups = Vec::new();
    let mut uids = Vec::new();
    for attr in cert.subject().iter_attributes() {
        let ty = attr.attr_type();
        if *ty == OID_X509_COMMON_NAME {
            // Go's pkix.Name.FillFromRDNSequence: a later CN replaces an earlier one, and a
            // value that is not a string is skipped.
            if let Some(cn) = string_value(attr) {
                user = cn;
            }
        } else if *ty == OID_X509_ORGANIZATION_NAME {
            groups.extend(string_value(attr));
        } else if ty.to_id_string() == UID_OID {
            uids.push(string_value(attr).ok_or("unable to parse UID into a string")?);
        }
    }
    // CommonNameUserConversion: no CN, no user (and no error).
    if user.is_empty() {
        return Ok(None);
    }
    // parseUIDFromCert: at most one, and not empty.
    let uid = match uids.as_slice() {
        [] => None,
        [uid] if uid.is_empty() => return Err("UID cannot be an empty string".into()),
        [uid] => Some(uid.clone()),
        _ => return Err(format!("expected 1 UID, but found multiple: {uids:?}")),
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut credential_id = String::from("X509SHA256=");
    for b in digest.as_ref() {
        let _ = write!(credential_id, "{b:02x}");
    }
    Ok(Some(ClientCert { user, groups, uid, credential_id }))
}

/// A directory-string value as Go's `parseASN1String` reads it (PrintableString, UTF8String,
/// IA5String, NumericString, T61String as Latin-1, BMPString as UTF-16BE); `None` for anything
/// else, which Go's name parsing skips.
fn string_value(attr: &AttributeTypeAndValue<'_>) -> Option<String> {
    if let Ok(s) = attr.as_str() {
        return Some(s.to_owned());
    }
    let value = attr.attr_value();
    let data = value.data;
    match value.tag() {
        Tag::T61String => Some(data.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString if data.len() % 2 == 0 => {
            let units = data.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]));
            char::decode_utf16(units).collect::<Result<String, _>>().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
