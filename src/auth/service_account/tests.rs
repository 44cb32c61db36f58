//! Against what kube-apiserver 1.36 issued and answered (tests/fixtures/realcluster/
//! serviceaccount: a token bound to the pod tier-a on the node probe-a, its keys and issuer,
//! and its TokenReview), and against tokens signed here with an EC key.

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path =
        format!("{}/tests/fixtures/realcluster/serviceaccount/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(path).expect("fixture")
}

fn real_keys() -> Keys {
    let discovery: Value = serde_json::from_slice(&fixture("openid-configuration.json")).unwrap();
    let jwks: Value = serde_json::from_slice(&fixture("jwks.json")).unwrap();
    Keys::new(discovery["issuer"].as_str().unwrap(), parse_jwks(&jwks))
}

fn token(name: &str) -> String {
    String::from_utf8(fixture(name)).unwrap()
}

/// The apiserver's own token verifies with its published key (RS256), and the user kubeplex
/// makes of it is the one its TokenReview answered: name, uid, groups, every extra.
#[test]
fn a_real_pod_bound_token_verifies_and_is_the_user_the_apiservers_review_named() {
    let claims = verify_jwt(&token("pod-bound.token"), &real_keys()).expect("verified");
    assert_eq!(claims.namespace, "kube-system");
    assert_eq!(claims.pod.0, "tier-a");
    assert_eq!(claims.node.as_ref().map(|n| n.0.as_str()), Some("probe-a"));
    let review: Value = serde_json::from_slice(&fixture("tokenreview.json")).unwrap();
    let want: UserInfo = serde_json::from_value(review["status"]["user"].clone()).unwrap();
    assert_eq!(claims.user(), want);
    // The pod and ServiceAccount it names, as the apiserver served them: their uids.
    let pod: Value = serde_json::from_slice(&fixture("pod.json")).unwrap();
    let sa: Value = serde_json::from_slice(&fixture("serviceaccount.json")).unwrap();
    assert_eq!(pod["metadata"]["uid"], json!(claims.pod.1));
    assert_eq!(sa["metadata"]["uid"], json!(claims.service_account.1));
}

/// What kubeplex leaves to a TokenReview: a token bound to nothing (the apiserver accepts it,
/// but its validity does not rest on a pod kubeplex can see), one whose signature does not
/// hold, one of another issuer, one signed with a key kubeplex has not fetched.
#[test]
fn what_cannot_be_verified_here_is_reviewed() {
    let keys = real_keys();
    assert_eq!(verify_jwt(&token("unbound.token"), &keys), Err(Unverified::NotPodBound));
    let real = token("pod-bound.token");
    let mut parts: Vec<String> = real.split('.').map(str::to_string).collect();
    let mut payload: Value = serde_json::from_slice(&b64(&parts[1]).unwrap()).unwrap();
    payload["kubernetes.io"]["node"]["name"] = json!("another-node");
    parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.to_string());
    assert_eq!(verify_jwt(&parts.join("."), &keys), Err(Unverified::BadSignature));
    let other = Keys::new("https://issuer.example", parse_jwks(&json!({"keys": []})));
    assert_eq!(verify_jwt(&real, &other), Err(Unverified::Other));
    let none = Keys::new(&keys.issuer, Vec::new());
    assert_eq!(verify_jwt(&real, &none), Err(Unverified::UnknownKey));
    for garbage in ["", "a.b", "a.b.c.d", "!!.!!.!!", "e30.e30.e30"] {
        assert_eq!(verify_jwt(garbage, &keys), Err(Unverified::Other), "{garbage}");
    }
}

/// An ES256 key as the apiserver publishes one (`kty: EC`, `crv: P-256`), and a token signed
/// with it.
struct EcIssuer {
    pair: EcdsaKeyPair,
    keys: Keys,
}

const ISSUER: &str = "https://kubernetes.default.svc";

impl EcIssuer {
    fn new() -> EcIssuer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let point = pair.public_key().as_ref();
        let b = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let jwk = json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "ec-1", "alg": "ES256",
            "x": b(&point[1..33]), "y": b(&point[33..65])}]});
        EcIssuer { pair, keys: Keys::new(ISSUER, parse_jwks(&jwk)) }
    }

    fn sign(&self, payload: &Value) -> String {
        let b = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let head = b(json!({"alg": "ES256", "kid": "ec-1"}).to_string().as_bytes());
        let body = b(payload.to_string().as_bytes());
        let signed = format!("{head}.{body}");
        let sig = self.pair.sign(&SystemRandom::new(), signed.as_bytes()).unwrap();
        format!("{signed}.{}", b(sig.as_ref()))
    }
}

fn payload(now: i64) -> Value {
    json!({"aud": [ISSUER], "exp": now + 3600, "iat": now, "nbf": now, "iss": ISSUER,
        "jti": "j-1", "sub": "system:serviceaccount:kube-system:kubeplex",
        "kubernetes.io": {"namespace": "kube-system",
            "node": {"name": "node-0", "uid": "n-uid"},
            "pod": {"name": "kubeplex-abcde", "uid": "p-uid"},
            "serviceaccount": {"name": "kubeplex", "uid": "sa-uid"}}})
}

/// ES256, and the times go-jose checks with its minute of leeway; an audience that is not the
/// apiserver's is another service's token.
#[test]
fn an_ec_signed_token_is_verified_and_its_times_checked_with_a_minutes_leeway() {
    let issuer = EcIssuer::new();
    let now = 1_800_000_000;
    let claims = verify_jwt(&issuer.sign(&payload(now)), &issuer.keys).expect("verified");
    assert_eq!(claims.user().username, "system:serviceaccount:kube-system:kubeplex");
    assert_eq!(claims.user().extra[NODE_NAME], ["node-0"]);
    assert_eq!(claims.user().extra[CREDENTIAL_ID], ["JTI=j-1"]);
    assert!(claims.current_at(now));
    assert!(claims.current_at(now + 3600 + 60), "expired less than the leeway ago");
    assert!(!claims.current_at(now + 3600 + 61));
    assert!(claims.current_at(now - 60), "not yet valid by less than the leeway");
    assert!(!claims.current_at(now - 61));
    let mut other = payload(now);
    other["aud"] = json!(["vault"]);
    assert_eq!(verify_jwt(&issuer.sign(&other), &issuer.keys), Err(Unverified::Other));
    let mut one = payload(now);
    one["aud"] = json!(ISSUER);
    assert!(verify_jwt(&issuer.sign(&one), &issuer.keys).is_ok(), "aud as one string");
    let mut secret = payload(now);
    secret["kubernetes.io"]["secret"] = json!({"name": "s", "uid": "s-uid"});
    assert_eq!(verify_jwt(&issuer.sign(&secret), &issuer.keys), Err(Unverified::NotPodBound));
}
