//! ServiceAccount tokens bound to a pod, verified by kubeplex itself as kube-apiserver 1.36's
//! ServiceAccount authenticator verifies them (`verifyServiceAccountTokens: true`), rather than
//! by a TokenReview each.
//!
//! Why: every node tier presents a pool its own pod's token (bound to its node: `nodeImpersonation: associated-node`),
//! and so does every DaemonSet agent it passes on (kube-proxy, a CNI agent): at 2,000 nodes a
//! pool starting would ask thousands of TokenReviews, one per token, where it asked a few
//! hundred reviews in all before node tiers were bound to their nodes.
//!
//! What the apiserver does (`pkg/serviceaccount/jwt.go`, `claims.go`), and kubeplex with it:
//! - the token is a JWT signed by one of the apiserver's ServiceAccount keys — the public keys it
//!   publishes at `/openid/v1/jwks` (fetched from the upstream, again every 10 minutes and when a
//!   token names a key not seen yet) — with `RS256`/`RS384`/`RS512` or `ES256`/`ES384`;
//! - its issuer is the apiserver's (`/.well-known/openid-configuration`), its audiences include
//!   the apiserver's (by default the issuer: `--api-audiences` defaults to it);
//! - it is within its validity, with go-jose's one-minute leeway (`jwt.DefaultLeeway`);
//! - its ServiceAccount exists with the claim's uid, and the pod it is bound to exists with the
//!   claim's uid, neither deleted more than the leeway ago (the apiserver reads both from its
//!   own informers); a token bound to a Secret or a Node, or to nothing, is left to a
//!   TokenReview;
//! - the user is `system:serviceaccount:NS:NAME` with the ServiceAccount's uid, its groups, and
//!   the extras naming the pod, its node and the credential (`ServiceAccountInfo.UserInfo`).
//!
//! A grant kubeplex derives itself is only as current as the view it comes from: the pod and the
//! ServiceAccount are looked up in caches whose watch of the apiserver is live
//! (`ResourceCache::view`, as for the Node authorizer's rules), so a token stops working here
//! as soon as its pod's deletion arrives, as at the apiserver. Anything kubeplex cannot tell —
//! no live cache holds the pod or the ServiceAccount, a key it does not have, a claim it does
//! not read — goes to a TokenReview, as before. Nothing is refused here: a token that fails
//! these checks is reviewed, and the apiserver's 401 is the client's.

use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use base64::Engine;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use ring::signature::{self, UnparsedPublicKey};
use serde::Deserialize;
use serde_json::Value;

use super::review::UserInfo;
use crate::cache::resource::{ResourceCache, View, HEARD_WITHIN};
use crate::cache::{CachedObject, Encoding};
use crate::live::caches::Caches;
use crate::upstream::Upstream;
use crate::wire::codec;

/// go-jose's `jwt.DefaultLeeway`, which the apiserver validates times with, and the grace it
/// gives a deleted pod's or ServiceAccount's tokens (`invalidIfDeletedBefore`).
const LEEWAY: i64 = 60;
/// The keys are fetched again this often, and at most this often for a key not seen yet.
const KEYS_EVERY: Duration = Duration::from_secs(600);
const UNKNOWN_KEY_EVERY: Duration = Duration::from_secs(60);
/// Tokens whose signature was checked, kept for this long at most (their times and their pod
/// and ServiceAccount are checked again on every use).
const VERIFIED_FOR: Duration = Duration::from_secs(600);
const VERIFIED_MAX: u64 = 100_000;
/// The largest discovery document or key set read.
const MAX_DOCUMENT: usize = 1 << 20;

/// The extras of a bound ServiceAccount token's user (`serviceaccount.PodNameKey` and kin).
const POD_NAME: &str = "authentication.kubernetes.io/pod-name";
const POD_UID: &str = "authentication.kubernetes.io/pod-uid";
const NODE_NAME: &str = "authentication.kubernetes.io/node-name";
const NODE_UID: &str = "authentication.kubernetes.io/node-uid";
const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// Verifies bound ServiceAccount tokens (module documentation).
pub struct TokenVerifier {
    upstream: Arc<Upstream>,
    caches: OnceLock<Weak<Caches>>,
    keys: RwLock<Option<Arc<Keys>>>,
    /// When the keys were last asked for.
    fetched: Mutex<Option<Instant>>,
    verified: moka::sync::Cache<[u8; 32], Arc<Claims>>,
    /// Cached objects (resource, key, resourceVersion, uid) seen with that uid and no deletion
    /// under way: an object unchanged since is not decoded again on the next request.
    present: moka::sync::Cache<(&'static str, String, u64, String), ()>,
}

/// The apiserver's issuer and ServiceAccount public keys.
pub struct Keys {
    pub issuer: String,
    keys: Vec<(String, PublicKey)>,
}

/// One public key of `/openid/v1/jwks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (`04 || x || y`) on P-256 or P-384.
    Ec {
        p384: bool,
        point: Vec<u8>,
    },
}

/// What a verified token claims (`privateClaims` and the registered claims it is checked on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub exp: i64,
    pub nbf: Option<i64>,
    pub iat: Option<i64>,
    pub namespace: String,
    pub service_account: (String, String),
    pub pod: (String, String),
    pub node: Option<(String, String)>,
    pub jti: Option<String>,
}

impl TokenVerifier {
    pub fn new(upstream: Arc<Upstream>) -> Arc<Self> {
        Arc::new(TokenVerifier {
            upstream,
            caches: OnceLock::new(),
            keys: RwLock::new(None),
            fetched: Mutex::new(None),
            verified: moka::sync::Cache::builder()
                .max_capacity(VERIFIED_MAX)
                .time_to_live(VERIFIED_FOR)
                .build(),
            present: moka::sync::Cache::builder()
                .max_capacity(VERIFIED_MAX)
                .time_to_live(VERIFIED_FOR)
                .build(),
        })
    }

    /// Its caches' entry counts, for `kubeplex_auth_cache_entries`.
    pub fn entry_counts(&self) -> Vec<(&'static str, crate::auth::review::EntryCount)> {
        let (verified, present) = (self.verified.clone(), self.present.clone());
        vec![
            ("sa_verified", Box::new(move || verified.entry_count())),
            ("sa_present", Box::new(move || present.entry_count())),
        ]
    }

    /// The caches whose views of pods and ServiceAccounts a token is checked against.
    pub fn attach(&self, caches: &Arc<Caches>) {
        let _ = self.caches.set(Arc::downgrade(caches));
    }

    /// Fetches the keys now and every [`KEYS_EVERY`], in `tasks`.
    pub fn maintain(self: &Arc<Self>, tasks: &mut tokio::task::JoinSet<()>) {
        let this = self.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(KEYS_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                this.refresh().await;
            }
        });
    }

    /// Fetches the issuer and the keys from the upstream; the last ones stay if that fails.
    pub async fn refresh(&self) {
        *self.fetched.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                tracing::debug!(issuer = %keys.issuer, keys = keys.keys.len(), "ServiceAccount keys fetched");
                *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(keys));
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not fetch the ServiceAccount keys; tokens are reviewed")
            }
        }
    }

    async fn fetch(&self) -> Result<Keys, String> {
        let discovery = self.get("/.well-known/openid-configuration", "application/json").await?;
        let issuer = discovery["issuer"].as_str().ok_or("no issuer")?.to_string();
        // The apiserver serves the key set as this type only (406 for application/json).
        let jwks = self.get("/openid/v1/jwks", "application/jwk-set+json").await?;
        Ok(Keys { issuer, keys: parse_jwks(&jwks) })
    }

    async fn get(&self, path: &str, accept: &str) -> Result<Value, String> {
        let body = http_body_util::Empty::new().map_err(|never| match never {}).boxed();
        let req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(http::header::ACCEPT, accept)
            .body(body)
            .map_err(|e| e.to_string())?;
        let resp = self.upstream.send(req).await.map_err(|e| e.to_string())?;
        if resp.status() != StatusCode::OK {
            return Err(format!("{path}: {}", resp.status()));
        }
        let bytes = http_body_util::Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        serde_json::from_slice(&bytes).map_err(|e| format!("{path}: {e}"))
    }

    /// The user `token` authenticates as, when it is a ServiceAccount token bound to a pod that
    /// kubeplex can verify (module documentation); `None`: a TokenReview decides.
    pub fn verify(self: &Arc<Self>, token: &str) -> Option<UserInfo> {
        let key = token_key(token)?;
        let claims = match self.verified.get(&key) {
            Some(claims) => claims,
            None => {
                let keys = self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()?;
                match verify_jwt(token, &keys) {
                    Ok(claims) => {
                        let claims = Arc::new(claims);
                        self.verified.insert(key, claims.clone());
                        claims
                    }
                    Err(Unverified::UnknownKey) => {
                        self.fetch_for_unknown_key();
                        return None;
                    }
                    Err(_) => return None,
                }
            }
        };
        let now = crate::cache::clock::unix_now() as i64;
        if !claims.current_at(now) {
            return None;
        }
        let caches = self.caches.get()?.upgrade()?;
        let (ns, (pod, pod_uid)) = (&claims.namespace, &claims.pod);
        let (sa, sa_uid) = &claims.service_account;
        let alive = |(resource, kind): (&'static str, &str), name: &str, uid: &str| {
            let Some((encoding, o)) = live_object(&caches, resource, ns, name) else {
                return false;
            };
            let seen = (resource, o.key.to_string(), o.resource_version, uid.to_string());
            if self.present.contains_key(&seen) {
                return true;
            }
            match still_there(kind, encoding, &o, uid, now) {
                There::Yes => {
                    self.present.insert(seen, ());
                    true
                }
                There::Deleting => true,
                There::No => false,
            }
        };
        if !alive(("pods", "Pod"), pod, pod_uid)
            || !alive(("serviceaccounts", "ServiceAccount"), sa, sa_uid)
        {
            return None;
        }
        Some(claims.user())
    }

    /// A token names a key not seen yet (the apiserver's keys rotated): fetched again, at most
    /// every [`UNKNOWN_KEY_EVERY`].
    fn fetch_for_unknown_key(self: &Arc<Self>) {
        let mut fetched = self.fetched.lock().unwrap_or_else(|p| p.into_inner());
        if fetched.is_some_and(|at| at.elapsed() < UNKNOWN_KEY_EVERY) {
            return;
        }
        *fetched = Some(Instant::now());
        let this = self.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { this.refresh().await });
        }
    }
}

impl Claims {
    /// `public.Validate(jwt.Expected{Time: now})` with go-jose's leeway.
    fn current_at(&self, now: i64) -> bool {
        now - LEEWAY <= self.exp
            && self.nbf.is_none_or(|nbf| now + LEEWAY >= nbf)
            && self.iat.is_none_or(|iat| now + LEEWAY >= iat)
    }

    /// `ServiceAccountInfo.UserInfo`, with `system:authenticated` as the apiserver adds it.
    pub fn user(&self) -> UserInfo {
        let ns = &self.namespace;
        let mut extra = std::collections::BTreeMap::new();
        extra.insert(POD_NAME.to_string(), vec![self.pod.0.clone()]);
        extra.insert(POD_UID.to_string(), vec![self.pod.1.clone()]);
        if let Some(jti) = self.jti.as_ref().filter(|j| !j.is_empty()) {
            extra.insert(CREDENTIAL_ID.to_string(), vec![format!("JTI={jti}")]);
        }
        if let Some((node, uid)) = &self.node {
            extra.insert(NODE_NAME.to_string(), vec![node.clone()]);
            if !uid.is_empty() {
                extra.insert(NODE_UID.to_string(), vec![uid.clone()]);
            }
        }
        UserInfo {
            username: format!("system:serviceaccount:{ns}:{}", self.service_account.0),
            uid: self.service_account.1.clone(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ],
            extra,
        }
    }
}

/// A token's key in the caches: its SHA-256 (the token itself is never kept).
fn token_key(token: &str) -> Option<[u8; 32]> {
    ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref().try_into().ok()
}

/// Why a token was not verified here.
#[derive(Debug, PartialEq, Eq)]
pub enum Unverified {
    /// Not a JWT kubeplex reads, or not one of the apiserver's ServiceAccount tokens.
    Other,
    /// Signed with a key kubeplex does not have (yet).
    UnknownKey,
    BadSignature,
    /// Not bound to a pod (a legacy Secret's token, or one bound to a Secret or a Node).
    NotPodBound,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: String,
}

#[derive(Deserialize)]
struct Payload {
    iss: String,
    #[serde(default, deserialize_with = "audiences")]
    aud: Vec<String>,
    exp: i64,
    nbf: Option<i64>,
    iat: Option<i64>,
    jti: Option<String>,
    #[serde(rename = "kubernetes.io")]
    kubernetes: Option<Private>,
}

#[derive(Deserialize)]
struct Private {
    namespace: String,
    serviceaccount: Ref,
    pod: Option<Ref>,
    node: Option<Ref>,
    secret: Option<Ref>,
}

#[derive(Deserialize)]
struct Ref {
    name: String,
    #[serde(default)]
    uid: String,
}

/// `aud`: a string or a list of them (RFC 7519).
fn audiences<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Aud::deserialize(d)? {
        Aud::One(a) => vec![a],
        Aud::Many(a) => a,
    })
}

fn b64(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok()
}

/// A token's signature and claims, as the apiserver's authenticator checks them before its
/// validator looks the pod and the ServiceAccount up.
pub fn verify_jwt(token: &str, keys: &Keys) -> Result<Claims, Unverified> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Unverified::Other);
    };
    let header: Header =
        serde_json::from_slice(&b64(h).ok_or(Unverified::Other)?).map_err(|_| Unverified::Other)?;
    let payload: Payload =
        serde_json::from_slice(&b64(p).ok_or(Unverified::Other)?).map_err(|_| Unverified::Other)?;
    // Not the apiserver's own ServiceAccount token (an OIDC provider's, another issuer's).
    if payload.iss != keys.issuer || payload.kubernetes.is_none() {
        return Err(Unverified::Other);
    }
    let signature = b64(s).ok_or(Unverified::Other)?;
    let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
    let candidates: Vec<&PublicKey> = keys
        .keys
        .iter()
        .filter(|(kid, _)| header.kid.is_empty() || *kid == header.kid)
        .map(|(_, k)| k)
        .collect();
    if candidates.is_empty() {
        return Err(Unverified::UnknownKey);
    }
    if !candidates.iter().any(|k| k.verifies(&header.alg, signed, &signature)) {
        return Err(Unverified::BadSignature);
    }
    // The apiserver's own audiences: by default its issuer (`--api-audiences`).
    if !payload.aud.contains(&keys.issuer) {
        return Err(Unverified::Other);
    }
    let private = payload.kubernetes.ok_or(Unverified::Other)?;
    let pod = match (private.pod, private.secret) {
        (Some(pod), None) if !pod.uid.is_empty() => pod,
        _ => return Err(Unverified::NotPodBound),
    };
    Ok(Claims {
        exp: payload.exp,
        nbf: payload.nbf,
        iat: payload.iat,
        namespace: private.namespace,
        service_account: (private.serviceaccount.name, private.serviceaccount.uid),
        pod: (pod.name, pod.uid),
        node: private.node.map(|n| (n.name, n.uid)),
        jti: payload.jti,
    })
}

impl PublicKey {
    /// Whether `signature` is this key's over `message` with the JWS algorithm `alg`.
    fn verifies(&self, alg: &str, message: &[u8], signature: &[u8]) -> bool {
        match self {
            PublicKey::Rsa { n, e } => {
                let params = match alg {
                    "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                    "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                    "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                    _ => return false,
                };
                signature::RsaPublicKeyComponents { n, e }
                    .verify(params, message, signature)
                    .is_ok()
            }
            PublicKey::Ec { p384, point } => {
                let params: &dyn signature::VerificationAlgorithm = match (alg, p384) {
                    ("ES256", false) => &signature::ECDSA_P256_SHA256_FIXED,
                    ("ES384", true) => &signature::ECDSA_P384_SHA384_FIXED,
                    _ => return false,
                };
                UnparsedPublicKey::new(params, point).verify(message, signature).is_ok()
            }
        }
    }
}

/// The keys of a JWK set (`/openid/v1/jwks`) kubeplex can verify with, by `kid`.
pub fn parse_jwks(jwks: &Value) -> Vec<(String, PublicKey)> {
    let field = |k: &Value, f: &str| k[f].as_str().and_then(b64);
    let mut out = Vec::new();
    for k in jwks["keys"].as_array().into_iter().flatten() {
        let kid = k["kid"].as_str().unwrap_or_default().to_string();
        let key = match (k["kty"].as_str(), k["crv"].as_str()) {
            (Some("RSA"), _) => {
                field(k, "n").zip(field(k, "e")).map(|(n, e)| PublicKey::Rsa { n, e })
            }
            (Some("EC"), Some(crv @ ("P-256" | "P-384"))) => {
                field(k, "x").zip(field(k, "y")).map(|(x, y)| {
                    let mut point = vec![4u8];
                    point.extend(x);
                    point.extend(y);
                    PublicKey::Ec { p384: crv == "P-384", point }
                })
            }
            _ => None,
        };
        if let Some(key) = key {
            out.push((kid, key));
        }
    }
    out
}

impl Keys {
    pub fn new(issuer: &str, keys: Vec<(String, PublicKey)>) -> Keys {
        Keys { issuer: issuer.to_string(), keys }
    }
}

/// `namespace/name` of core `resource` as a synced cache whose watch of the apiserver is live
/// holds it (`ResourceCache::view`), and that cache's encoding.
fn live_object(
    caches: &Caches,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Option<(Encoding, Arc<CachedObject>)> {
    let key = format!("{namespace}/{name}");
    let of_resource = |c: &Arc<ResourceCache>| {
        (c.info().group.as_str(), c.info().resource.as_str()) == ("", resource)
    };
    caches
        .running()
        .into_iter()
        .filter(of_resource)
        .filter(|c| c.is_synced())
        .filter(|c| matches!(c.view(HEARD_WITHIN), View::Live(_)))
        .find_map(|c| c.current().get(&key).cloned().map(|o| (c.encoding(), o)))
}

/// Whether a cached object is still what a token is bound to.
enum There {
    /// The object with the token's uid, not being deleted.
    Yes,
    /// Being deleted, less than the leeway ago (`invalidIfDeletedBefore`): still valid, for now.
    Deleting,
    /// Another object of the same name, deleted longer ago, or unreadable.
    No,
}

/// Whether the cached object is the one with `uid` (not another of the same name), and not
/// deleted more than the leeway ago (`invalidIfDeletedBefore`).
fn still_there(
    kind: &str,
    encoding: Encoding,
    object: &CachedObject,
    uid: &str,
    now: i64,
) -> There {
    let value = match encoding {
        Encoding::Json => serde_json::from_slice::<Value>(&object.body).ok(),
        Encoding::Protobuf => {
            codec::type_for("v1", kind).and_then(|t| codec::from_protobuf(t, &object.body).ok())
        }
    };
    let Some(meta) = value.as_ref().map(|v| &v["metadata"]) else { return There::No };
    if meta["uid"].as_str() != Some(uid) {
        return There::No;
    }
    match meta["deletionTimestamp"].as_str() {
        None => There::Yes,
        Some(at) => match chrono::DateTime::parse_from_rfc3339(at) {
            Ok(at) if at.timestamp() >= now - LEEWAY => There::Deleting,
            _ => There::No,
        },
    }
}

#[cfg(test)]
mod tests;
