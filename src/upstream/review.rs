//! Asking the upstream who a client is and what it may do, as kube-apiserver's webhook
//! authenticator and authorizer (and the kubelet's) do it: a `TokenReview`
//! (`authentication.k8s.io/v1`) for a bearer token, a `SubjectAccessReview`
//! (`authorization.k8s.io/v1`) for a read — including its field and label selectors, which the
//! Node authorizer decides on (1.31+ `resourceAttributes.fieldSelector/labelSelector`).
//!
//! Answers are cached, bounded in number, with short TTLs and shorter ones for refusals (the
//! webhook authorizer's rule: a grant may be used a little longer than a denial is remembered),
//! and concurrent identical reviews share one request. Tokens are keyed by their SHA-256, never
//! kept. A review that fails (upstream unreachable, an unexpected answer) is not cached and is an
//! error: the caller must then not answer from the cache (it passes the request through, and the
//! upstream decides).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use serde::{Deserialize, Serialize};

use super::Upstream;

/// Who a client is (`authentication/v1.UserInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A request without credentials, as the apiserver's anonymous authenticator names it.
    pub fn anonymous() -> Self {
        UserInfo {
            username: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..UserInfo::default()
        }
    }
}

/// What a bearer token turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenIdentity {
    User(UserInfo),
    /// `authenticated: false`: the apiserver answers such a request 401.
    Invalid,
}

/// The read a client asks for (`authorization/v1.ResourceAttributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ResourceAttributes {
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The request's `fieldSelector` as sent (`rawSelector`), if any.
    pub field_selector: Option<String>,
    /// The request's `labelSelector` as sent, if any.
    pub label_selector: Option<String>,
}

/// An authorization decision and the authorizers' reason (appended to a 403's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// A review that could not be done.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    #[error("review request failed: {0}")]
    Transport(String),
    #[error("upstream answered the review {status}")]
    Status { status: u16 },
    #[error("malformed review answer: {0}")]
    Decode(String),
}

/// How long answers are kept, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewConfig {
    /// A valid token's identity (the apiserver's `--authentication-token-webhook-cache-ttl`
    /// default: 2 min).
    pub token_ttl: Duration,
    /// An invalid token.
    pub invalid_token_ttl: Duration,
    /// A grant.
    pub allowed_ttl: Duration,
    /// A denial: short, so that a new RoleBinding takes effect quickly.
    pub denied_ttl: Duration,
    /// Entries per cache.
    pub max_entries: u64,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig {
            token_ttl: Duration::from_secs(120),
            invalid_token_ttl: Duration::from_secs(10),
            allowed_ttl: Duration::from_secs(60),
            denied_ttl: Duration::from_secs(10),
            max_entries: 10_000,
        }
    }
}

/// Review counts and latency.
#[derive(Clone)]
pub struct ReviewMetrics {
    /// By kind (`token`, `access`), result (`authenticated`, `invalid`, `allowed`, `denied`,
    /// `error`) and source (`cache`, `review`).
    pub decisions: IntCounterVec,
    /// Latency of the reviews sent upstream, by kind.
    pub seconds: HistogramVec,
}

impl ReviewMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "kubeplex_auth_decisions_total",
                "Authentication (kind=token) and authorization (kind=access) decisions, by result and by source: the decision cache, or a review sent to the upstream.",
            ),
            &["kind", "result", "source"],
        )?;
        let seconds = HistogramVec::new(
            HistogramOpts::new(
                "kubeplex_auth_review_seconds",
                "Latency of the TokenReviews and SubjectAccessReviews sent to the upstream.",
            )
            .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
            &["kind"],
        )?;
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(seconds.clone()))?;
        Ok(ReviewMetrics { decisions, seconds })
    }
}

type TokenKey = [u8; 32];

/// Which TTL an answer gets.
struct Ttl(ReviewConfig);

impl moka::Expiry<TokenKey, TokenIdentity> for Ttl {
    fn expire_after_create(&self, _: &TokenKey, v: &TokenIdentity, _: Instant) -> Option<Duration> {
        Some(match v {
            TokenIdentity::User(_) => self.0.token_ttl,
            TokenIdentity::Invalid => self.0.invalid_token_ttl,
        })
    }
}

impl moka::Expiry<AccessKey, Decision> for Ttl {
    fn expire_after_create(&self, _: &AccessKey, v: &Decision, _: Instant) -> Option<Duration> {
        Some(if v.allowed { self.0.allowed_ttl } else { self.0.denied_ttl })
    }
}

type AccessKey = (UserInfo, ResourceAttributes);

/// The reviews of one upstream, with their caches.
pub struct Reviews {
    upstream: Arc<Upstream>,
    tokens: moka::future::Cache<TokenKey, TokenIdentity>,
    access: moka::future::Cache<AccessKey, Decision>,
    metrics: ReviewMetrics,
}

impl Reviews {
    pub fn new(upstream: Arc<Upstream>, config: ReviewConfig, metrics: ReviewMetrics) -> Self {
        Reviews {
            upstream,
            tokens: moka::future::Cache::builder()
                .max_capacity(config.max_entries)
                .expire_after(Ttl(config))
                .build(),
            access: moka::future::Cache::builder()
                .max_capacity(config.max_entries)
                .expire_after(Ttl(config))
                .build(),
            metrics,
        }
    }

    /// Who a bearer token belongs to.
    pub async fn authenticate(&self, token: &str) -> Result<TokenIdentity, ReviewError> {
        let key: TokenKey = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        let reviewed = AtomicBool::new(false);
        let answer = self
            .tokens
            .try_get_with(key, async {
                reviewed.store(true, Ordering::Relaxed);
                self.token_review(token).await
            })
            .await
            .map_err(|e: Arc<ReviewError>| (*e).clone());
        let result = match &answer {
            Ok(TokenIdentity::User(_)) => "authenticated",
            Ok(TokenIdentity::Invalid) => "invalid",
            Err(_) => "error",
        };
        self.count("token", result, reviewed.load(Ordering::Relaxed));
        answer
    }

    /// Whether `user` may do `attributes`.
    pub async fn authorize(
        &self,
        user: &UserInfo,
        attributes: &ResourceAttributes,
    ) -> Result<Decision, ReviewError> {
        let reviewed = AtomicBool::new(false);
        let answer = self
            .access
            .try_get_with((user.clone(), attributes.clone()), async {
                reviewed.store(true, Ordering::Relaxed);
                self.access_review(user, attributes).await
            })
            .await
            .map_err(|e: Arc<ReviewError>| (*e).clone());
        let result = match &answer {
            Ok(d) if d.allowed => "allowed",
            Ok(_) => "denied",
            Err(_) => "error",
        };
        self.count("access", result, reviewed.load(Ordering::Relaxed));
        answer
    }

    fn count(&self, kind: &str, result: &str, reviewed: bool) {
        let source = if reviewed { "review" } else { "cache" };
        self.metrics.decisions.with_label_values(&[kind, result, source]).inc();
    }

    async fn token_review(&self, token: &str) -> Result<TokenIdentity, ReviewError> {
        let body = serde_json::json!({
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "spec": {"token": token},
        });
        let answer: TokenReview =
            self.post("token", "/apis/authentication.k8s.io/v1/tokenreviews", &body).await?;
        Ok(match answer.status {
            Some(TokenReviewStatus { authenticated: true, user: Some(user), .. }) => {
                TokenIdentity::User(user)
            }
            _ => TokenIdentity::Invalid,
        })
    }

    async fn access_review(
        &self,
        user: &UserInfo,
        a: &ResourceAttributes,
    ) -> Result<Decision, ReviewError> {
        let mut attributes = serde_json::json!({
            "verb": a.verb,
            "group": a.group,
            "version": a.version,
            "resource": a.resource,
        });
        for (key, value) in
            [("namespace", &a.namespace), ("name", &a.name), ("subresource", &a.subresource)]
        {
            if !value.is_empty() {
                attributes[key] = serde_json::json!(value);
            }
        }
        if let Some(s) = &a.field_selector {
            attributes["fieldSelector"] = serde_json::json!({"rawSelector": s});
        }
        if let Some(s) = &a.label_selector {
            attributes["labelSelector"] = serde_json::json!({"rawSelector": s});
        }
        let mut spec = serde_json::json!({"resourceAttributes": attributes, "user": user.username});
        if !user.uid.is_empty() {
            spec["uid"] = serde_json::json!(user.uid);
        }
        if !user.groups.is_empty() {
            spec["groups"] = serde_json::json!(user.groups);
        }
        if !user.extra.is_empty() {
            spec["extra"] = serde_json::json!(user.extra);
        }
        let body = serde_json::json!({
            "kind": "SubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "spec": spec,
        });
        let answer: AccessReview = self
            .post("access", "/apis/authorization.k8s.io/v1/subjectaccessreviews", &body)
            .await?;
        let status = answer.status.unwrap_or_default();
        // `denied` is an explicit refusal; not allowed and not denied is "no opinion", which
        // the apiserver (with no authorizer left to ask) refuses too.
        Ok(Decision { allowed: status.allowed && !status.denied, reason: status.reason })
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ReviewError> {
        let started = Instant::now();
        let bytes = serde_json::to_vec(body).map_err(|e| ReviewError::Decode(e.to_string()))?;
        let req = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, concat!("kubeplex/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(Bytes::from(bytes)).map_err(|never| match never {}).boxed())
            .map_err(|e| ReviewError::Transport(e.to_string()))?;
        let resp =
            self.upstream.send(req).await.map_err(|e| ReviewError::Transport(e.to_string()))?;
        let status = resp.status().as_u16();
        // A review is created: 201 (200 from older servers).
        if status != 201 && status != 200 {
            return Err(ReviewError::Status { status });
        }
        let body = http_body_util::Limited::new(resp.into_body(), 1024 * 1024)
            .collect()
            .await
            .map_err(|e| ReviewError::Transport(e.to_string()))?
            .to_bytes();
        self.metrics.seconds.with_label_values(&[kind]).observe(started.elapsed().as_secs_f64());
        serde_json::from_slice(&body).map_err(|e| ReviewError::Decode(e.to_string()))
    }
}

#[derive(Deserialize)]
struct TokenReview {
    status: Option<TokenReviewStatus>,
}

#[derive(Deserialize)]
struct TokenReviewStatus {
    #[serde(default)]
    authenticated: bool,
    user: Option<UserInfo>,
}

#[derive(Deserialize)]
struct AccessReview {
    status: Option<AccessReviewStatus>,
}

#[derive(Deserialize, Default)]
struct AccessReviewStatus {
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    denied: bool,
    #[serde(default)]
    reason: String,
}

#[cfg(test)]
mod tests;
