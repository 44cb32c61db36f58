//! ServiceAccount tokens as kube-apiserver 1.36 issues them to pods: JWTs signed with its key
//! (`ES256` here; a real cluster's key is often RSA), published at `/openid/v1/jwks` with the
//! issuer at `/.well-known/openid-configuration`, bound to a pod whose node they name
//! (`TokenRequest` with a Pod `boundObjectRef`; the kubelet projects such a token into every
//! pod), and valid only while that pod and its ServiceAccount exist with the uids they name
//! (`pkg/serviceaccount/claims.go`). Kubeplex can verify them itself
//! (`verifyServiceAccountTokens`), as it can the real apiserver's.

use std::sync::Arc;

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

use super::DEFAULT_AUDIENCE;

/// The issuer the sim's tokens name (`--service-account-issuer`), its default audience too.
pub const ISSUER: &str = DEFAULT_AUDIENCE;

/// The apiserver's ServiceAccount signing key.
pub struct Signer {
    pair: EcdsaKeyPair,
    kid: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("kid", &self.kid).finish_non_exhaustive()
    }
}

fn b64(v: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
}

impl Signer {
    pub fn new() -> Arc<Signer> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("a P-256 key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("the key just made");
        // The apiserver's key id is the key's SHA-256, base64url (`keyIDFromPublicKey`).
        let kid =
            b64(ring::digest::digest(&ring::digest::SHA256, pair.public_key().as_ref()).as_ref());
        Arc::new(Signer { pair, kid })
    }

    /// `/openid/v1/jwks`: the public key, as the apiserver publishes it.
    pub fn jwks(&self) -> Value {
        let point = self.pair.public_key().as_ref();
        json!({"keys": [{"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256",
            "alg": "ES256", "x": b64(&point[1..33]), "y": b64(&point[33..65])}]})
    }

    /// `/.well-known/openid-configuration` (the key set's address under the issuer's).
    pub fn discovery(&self) -> Value {
        json!({"issuer": ISSUER, "jwks_uri": format!("{ISSUER}/openid/v1/jwks"),
            "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"]})
    }

    /// A signed JWT of `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let head = b64(json!({"alg": "ES256", "kid": self.kid}).to_string().as_bytes());
        let body = b64(claims.to_string().as_bytes());
        let signed = format!("{head}.{body}");
        let sig = self.pair.sign(&SystemRandom::new(), signed.as_bytes()).expect("signed");
        format!("{signed}.{}", b64(sig.as_ref()))
    }
}

/// What a bound token's validity rests on: its pod and ServiceAccount, by name and uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub namespace: String,
    pub pod: (String, String),
    pub service_account: (String, String),
}

fn uid_of(v: &Value) -> &str {
    v.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("")
}

/// The claims of a token for `pod` of `service_account` (its node's, when `node` is given),
/// valid for `seconds` from `now` (Unix seconds), as `token.Claims` writes them.
pub fn claims(
    pod: &Value,
    service_account: &Value,
    node: Option<&Value>,
    now: i64,
    seconds: i64,
) -> Value {
    let name =
        |v: &Value| v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    let namespace = pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    let mut private = json!({"namespace": namespace,
        "pod": {"name": name(pod), "uid": uid_of(pod)},
        "serviceaccount": {"name": name(service_account), "uid": uid_of(service_account)}});
    let node_name = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if !node_name.is_empty() {
        private["node"] = json!({"name": node_name, "uid": node.map(uid_of).unwrap_or("")});
    }
    json!({"aud": [ISSUER], "exp": now + seconds, "iat": now, "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(), "kubernetes.io": private, "nbf": now,
        "sub": format!("system:serviceaccount:{namespace}:{}", name(service_account))})
}

/// The binding `claims` names.
pub fn bound(claims: &Value) -> Bound {
    let s = |p: &str| claims.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    Bound {
        namespace: s("/kubernetes.io/namespace"),
        pod: (s("/kubernetes.io/pod/name"), s("/kubernetes.io/pod/uid")),
        service_account: (
            s("/kubernetes.io/serviceaccount/name"),
            s("/kubernetes.io/serviceaccount/uid"),
        ),
    }
}
