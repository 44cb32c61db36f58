//! Asking the upstream who a client is and what it may do, as kube-apiserver's webhook
//! authenticator and authorizer (and the kubelet's) do it: a `TokenReview`
//! (`authentication.k8s.io/v1`) for a bearer token, a `SubjectAccessReview`
//! (`authorization.k8s.io/v1`) for a read — including its field and label selectors, which the
//! Node authorizer decides on (1.31+ `resourceAttributes.fieldSelector/labelSelector`).
//!
//! Answers are cached, bounded in number, with short TTLs and shorter ones for refusals (the
//! webhook authorizer's rule: a grant may be used a little longer than a denial is remembered),
//! and concurrent identical reviews share one request. A remembered refusal only ever sends a
//! request to the upstream (`serve::identity`): a caller that would refuse a client on it asks
//! again ([`Reviews::authorize_afresh`]). Tokens are keyed by their SHA-256, never
//! kept. A review that fails (an unexpected answer, the upstream refusing kubeplex) is not cached
//! and is an error: the caller must then not answer from the cache (it passes the request
//! through, and the upstream decides).
//!
//! **Through upstream outages** (no connection, or 502/503/504: nothing there to decide), the
//! last answer for the same token or the same (user, read) is used instead, if it was recent
//! when the upstream last answered anything — within its TTL plus `outage_recent` (15 min) of
//! that moment, the last one at which kubeplex knows the cluster's policy — and for at most
//! `outage_grace` after it. `outage_recent` is there because agents ask rarely: an informer
//! reviews its watch when it re-establishes it, every 5 to 10 minutes, and its list only when
//! it starts, so the answer an agent restarted during an outage needs is seldom still within
//! its TTL. The reasoning: the caches stop at the moment the upstream stops answering (their
//! watches end with it), so a client sees at most the state of that moment, which it was
//! entitled to see a little earlier; without this, every node-mode read would pass through to
//! a dead upstream and fail, and the caches would serve nobody. What it costs: a revocation
//! made less than `outage_recent` before the outage, or during it (through an apiserver
//! kubeplex cannot reach), takes effect when kubeplex reaches the upstream again, or after
//! `outage_grace`. A token that is a JWT is not used past its `exp`. While the upstream is
//! unreachable, a review is tried at most once per [`RETRY_INTERVAL`], so reads do not each
//! wait for a connect timeout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
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

impl ReviewError {
    /// Nothing upstream could decide: no connection, no answer in time, or 502/503/504.
    pub fn unreachable(&self) -> bool {
        match self {
            ReviewError::Transport(_) => true,
            ReviewError::Status { status } => matches!(status, 502..=504),
            ReviewError::Decode(_) => false,
        }
    }
}

/// While the upstream is unreachable, how often a review is tried again (the other reads in
/// between use the last answers at once).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

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
    /// How long after the upstream last answered the last answers may be used while it cannot
    /// be reached; zero: never (reads then pass through, and fail as the upstream does).
    pub outage_grace: Duration,
    /// How long past its TTL, when the upstream last answered, a last answer may still stand
    /// in during an outage (see the module's documentation).
    pub outage_recent: Duration,
    /// How long a review may take before it counts as the upstream not answering.
    pub timeout: Duration,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig {
            token_ttl: Duration::from_secs(120),
            invalid_token_ttl: Duration::from_secs(10),
            allowed_ttl: Duration::from_secs(60),
            denied_ttl: Duration::from_secs(10),
            max_entries: 10_000,
            outage_grace: Duration::from_secs(24 * 3600),
            outage_recent: Duration::from_secs(15 * 60),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Review counts and latency.
#[derive(Clone)]
pub struct ReviewMetrics {
    /// By kind (`token`, `access`), result (`authenticated`, `invalid`, `allowed`, `denied`,
    /// `error`) and source (`cache`, `review`, `last_known`: an answer from before an outage).
    pub decisions: IntCounterVec,
    /// Latency of the reviews sent upstream, by kind.
    pub seconds: HistogramVec,
}

impl ReviewMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "kubeplex_auth_decisions_total",
                "Authentication (kind=token) and authorization (kind=access) decisions, by result and by source: the decision cache, a review sent to the upstream, or the last answer from before an upstream outage (last_known).",
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

/// An answer a review gives, as it is cached and counted.
trait Answer: Clone + Send + Sync + 'static {
    /// The metrics' `kind`: `token` or `access`.
    const KIND: &'static str;
    /// The metrics' `result`.
    fn result(&self) -> &'static str;
    /// How long it is used.
    fn ttl(&self, config: &ReviewConfig) -> Duration;
    /// Whether it refuses (a denial, an invalid token).
    fn refuses(&self) -> bool;
}

impl Answer for TokenIdentity {
    const KIND: &'static str = "token";

    fn result(&self) -> &'static str {
        match self {
            TokenIdentity::User(_) => "authenticated",
            TokenIdentity::Invalid => "invalid",
        }
    }

    fn ttl(&self, config: &ReviewConfig) -> Duration {
        match self {
            TokenIdentity::User(_) => config.token_ttl,
            TokenIdentity::Invalid => config.invalid_token_ttl,
        }
    }

    fn refuses(&self) -> bool {
        matches!(self, TokenIdentity::Invalid)
    }
}

impl Answer for Decision {
    const KIND: &'static str = "access";

    fn result(&self) -> &'static str {
        if self.allowed {
            "allowed"
        } else {
            "denied"
        }
    }

    fn ttl(&self, config: &ReviewConfig) -> Duration {
        if self.allowed {
            config.allowed_ttl
        } else {
            config.denied_ttl
        }
    }

    fn refuses(&self) -> bool {
        !self.allowed
    }
}

/// Each answer gets its TTL.
struct Ttl(ReviewConfig);

impl<K, V: Answer> moka::Expiry<K, V> for Ttl {
    fn expire_after_create(&self, _: &K, v: &V, _: Instant) -> Option<Duration> {
        Some(v.ttl(&self.0))
    }
}

/// Whether `token` is a JWT whose `exp` (Unix seconds) has passed. The apiserver checks it on
/// every review; in an outage kubeplex checks it itself. A token that is not a JWT, or has no
/// `exp`, has no expiry kubeplex can see.
fn jwt_expired(token: &str) -> bool {
    use base64::Engine;
    let mut parts = token.split('.');
    let (Some(_), Some(claims), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Ok(claims) =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims.trim_end_matches('='))
    else {
        return false;
    };
    let exp = serde_json::from_slice::<serde_json::Value>(&claims)
        .ok()
        .and_then(|c| c.get("exp").and_then(serde_json::Value::as_f64));
    exp.is_some_and(|exp| exp <= crate::cache::resource::unix_now() as f64)
}

type AccessKey = (UserInfo, ResourceAttributes);

/// An answer as it was last given, and until when its TTL allowed using it.
#[derive(Clone)]
struct Known<T> {
    value: T,
    expires_at: Instant,
}

/// The last answers are kept `outage_recent` + `outage_grace` past their TTL: as long as an
/// outage may use them.
struct Grace(Duration);

impl<K, T> moka::Expiry<K, Known<T>> for Grace {
    fn expire_after_create(&self, _: &K, v: &Known<T>, now: Instant) -> Option<Duration> {
        Some(v.expires_at.saturating_duration_since(now).saturating_add(self.0))
    }
}

/// An outage of the upstream as the reviews see it.
#[derive(Clone, Copy)]
struct Outage {
    /// When the upstream last answered anything before it: the policy the last answers
    /// reflect. `None`: it never answered since kubeplex started.
    began: Option<Instant>,
    /// When a review was last tried.
    tried: Instant,
}

/// The reviews of one upstream, with their caches.
pub struct Reviews {
    upstream: Arc<Upstream>,
    config: ReviewConfig,
    tokens: moka::future::Cache<TokenKey, TokenIdentity>,
    access: moka::future::Cache<AccessKey, Decision>,
    known_tokens: moka::future::Cache<TokenKey, Known<TokenIdentity>>,
    known_access: moka::future::Cache<AccessKey, Known<Decision>>,
    outage: Mutex<Option<Outage>>,
    /// Whether `outage` is `Some`: read without the lock by every decision.
    in_outage: AtomicBool,
    /// When the upstream last answered before the restart whose saved answers were imported.
    restored_answer: Mutex<Option<Instant>>,
    metrics: ReviewMetrics,
}

impl Reviews {
    pub fn new(upstream: Arc<Upstream>, config: ReviewConfig, metrics: ReviewMetrics) -> Self {
        fn cache<K, V, E>(config: &ReviewConfig, expiry: E) -> moka::future::Cache<K, V>
        where
            K: std::hash::Hash + Eq + Send + Sync + 'static,
            V: Clone + Send + Sync + 'static,
            E: moka::Expiry<K, V> + Send + Sync + 'static,
        {
            moka::future::Cache::builder()
                .max_capacity(config.max_entries)
                .expire_after(expiry)
                .build()
        }
        Reviews {
            upstream,
            tokens: cache(&config, Ttl(config)),
            access: cache(&config, Ttl(config)),
            known_tokens: cache(&config, Grace(config.outage_recent + config.outage_grace)),
            known_access: cache(&config, Grace(config.outage_recent + config.outage_grace)),
            outage: Mutex::new(None),
            in_outage: AtomicBool::new(false),
            restored_answer: Mutex::new(None),
            config,
            metrics,
        }
    }

    /// Who a bearer token belongs to.
    pub async fn authenticate(&self, token: &str) -> Result<TokenIdentity, ReviewError> {
        let key: TokenKey = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        let review = self.token_review(token);
        self.decide(&self.tokens, &self.known_tokens, key, || !jwt_expired(token), review).await
    }

    /// Whether `user` may do `attributes`.
    pub async fn authorize(
        &self,
        user: &UserInfo,
        attributes: &ResourceAttributes,
    ) -> Result<Decision, ReviewError> {
        let key = (user.clone(), attributes.clone());
        let review = self.access_review(user, attributes);
        self.decide(&self.access, &self.known_access, key, || true, review).await
    }

    /// Forgets a denial remembered for `user` and `attributes`, once the upstream has shown it
    /// out of date (it answered the same read with success): the next read is reviewed again.
    pub async fn forget_denial(&self, user: &UserInfo, attributes: &ResourceAttributes) {
        let key = (user.clone(), attributes.clone());
        if self.access.get(&key).await.is_some_and(|d| d.refuses()) {
            self.access.invalidate(&key).await;
        }
    }

    /// [`Reviews::authorize`] for a caller that refuses the client on a denial: a remembered
    /// grant is used, but a remembered denial is not — the upstream is asked again, so that a
    /// refusal never outlives the upstream's own (and in an outage, only a grant stands in).
    pub async fn authorize_afresh(
        &self,
        user: &UserInfo,
        attributes: &ResourceAttributes,
    ) -> Result<Decision, ReviewError> {
        self.forget_denial(user, attributes).await;
        let key = (user.clone(), attributes.clone());
        let review = self.access_review(user, attributes);
        match self.decide(&self.access, &self.known_access, key, || true, review).await {
            // A last answer standing in through an outage is a remembered one too.
            Ok(d) if d.refuses() && self.in_outage.load(Ordering::Acquire) => {
                Err(ReviewError::Transport("the upstream cannot be reached".into()))
            }
            answered => answered,
        }
    }

    /// The answer for `key`: from `current` while within its TTL, else from `review` (one at
    /// a time per key), kept in `known` too; when the upstream cannot be reached, the last
    /// answer from `known` if it may stand in (the module's rule, and `may_stand_in`).
    async fn decide<K, V>(
        &self,
        current: &moka::future::Cache<K, V>,
        known: &moka::future::Cache<K, Known<V>>,
        key: K,
        may_stand_in: impl Fn() -> bool,
        review: impl std::future::Future<Output = Result<V, ReviewError>>,
    ) -> Result<V, ReviewError>
    where
        K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
        V: Answer,
    {
        let last_known = |k: Option<Known<V>>, began| {
            k.filter(|k| self.usable(k.expires_at, began) && may_stand_in()).map(|k| k.value)
        };
        if let Some(began) = self.skip_review() {
            if let Some(answer) = current.get(&key).await {
                self.count(V::KIND, answer.result(), "cache");
                return Ok(answer);
            }
            if let Some(answer) = last_known(known.get(&key).await, began) {
                self.count(V::KIND, answer.result(), "last_known");
                return Ok(answer);
            }
        }
        let reviewed = AtomicBool::new(false);
        let answer = current
            .try_get_with(key.clone(), async {
                reviewed.store(true, Ordering::Relaxed);
                let answer = review.await?;
                let expires_at = Instant::now() + answer.ttl(&self.config);
                known.insert(key.clone(), Known { value: answer.clone(), expires_at }).await;
                Ok(answer)
            })
            .await
            .map_err(|e: Arc<ReviewError>| (*e).clone());
        let source = if reviewed.load(Ordering::Relaxed) { "review" } else { "cache" };
        match answer {
            Ok(answer) => {
                self.count(V::KIND, answer.result(), source);
                Ok(answer)
            }
            Err(e) => match last_known(known.get(&key).await, self.began(&e)) {
                Some(answer) => {
                    self.count(V::KIND, answer.result(), "last_known");
                    Ok(answer)
                }
                None => {
                    self.count(V::KIND, "error", source);
                    Err(e)
                }
            },
        }
    }

    /// Whether a last answer valid until `expires_at` may stand in for a review in an outage
    /// that `began` (see the module's documentation).
    fn usable(&self, expires_at: Instant, began: Option<Instant>) -> bool {
        let Some(began) = began else { return false };
        !self.config.outage_grace.is_zero()
            && expires_at + self.config.outage_recent >= began
            && began.elapsed() <= self.config.outage_grace
    }

    /// In an outage where a review was tried less than [`RETRY_INTERVAL`] ago: when the
    /// upstream last answered (no review is sent). Otherwise `None`, and a review may be tried
    /// (the next [`RETRY_INTERVAL`] of reads will not).
    fn skip_review(&self) -> Option<Option<Instant>> {
        if !self.in_outage.load(Ordering::Acquire) {
            return None;
        }
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        let o = outage.as_mut()?;
        if o.tried.elapsed() < RETRY_INTERVAL {
            return Some(o.began);
        }
        o.tried = Instant::now();
        None
    }

    /// After a failed review: if the upstream was unreachable, when it last answered.
    fn began(&self, e: &ReviewError) -> Option<Instant> {
        if !e.unreachable() {
            return None;
        }
        let outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        outage.and_then(|o| o.began)
    }

    /// Records how a review request went: unreachable (the outage begins or goes on) or
    /// answered (it ends).
    fn reached(&self, answered: bool) {
        if answered && !self.in_outage.load(Ordering::Acquire) {
            return;
        }
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        match (answered, outage.as_mut()) {
            (true, Some(_)) => {
                *outage = None;
                self.in_outage.store(false, Ordering::Release);
                tracing::info!("reviews reach the upstream again");
            }
            (true, None) => {}
            (false, Some(o)) => o.tried = Instant::now(),
            (false, None) => {
                let began = self.last_answered();
                *outage = Some(Outage { began, tried: Instant::now() });
                self.in_outage.store(true, Ordering::Release);
                tracing::warn!(
                    last_answered_seconds_ago = began.map(|b| b.elapsed().as_secs()),
                    grace_seconds = self.config.outage_grace.as_secs(),
                    "the upstream cannot be reached for reviews; using the answers that were current when it last answered"
                );
            }
        }
    }

    /// When the upstream last answered: in this process, or before the restart whose answers
    /// were imported.
    fn last_answered(&self) -> Option<Instant> {
        let restored = *self.restored_answer.lock().unwrap_or_else(PoisonError::into_inner);
        self.upstream.last_answered().or(restored)
    }

    /// The last answers and when the upstream last answered, for a kubeplex restarted during
    /// an outage ([`Reviews::import`]); `None` when there is nothing to save. Times are wall
    /// clock (Unix milliseconds), the only clock that survives a reboot. Tokens appear as
    /// their SHA-256 only.
    pub fn export(&self) -> Option<Vec<u8>> {
        let clock = Clock::now();
        let saved = Saved {
            answered_at_ms: self.last_answered().map(|i| clock.unix_ms(i)),
            tokens: self
                .known_tokens
                .iter()
                .map(|(key, k)| SavedToken {
                    sha256: hex(key.as_ref()),
                    user: match k.value {
                        TokenIdentity::User(u) => Some(u),
                        TokenIdentity::Invalid => None,
                    },
                    expires_at_ms: clock.unix_ms(k.expires_at),
                })
                .collect(),
            access: self
                .known_access
                .iter()
                .map(|(key, k)| SavedAccess {
                    user: key.0.clone(),
                    attributes: key.1.clone(),
                    allowed: k.value.allowed,
                    reason: k.value.reason,
                    expires_at_ms: clock.unix_ms(k.expires_at),
                })
                .collect(),
        };
        if saved.answered_at_ms.is_none() || (saved.tokens.is_empty() && saved.access.is_empty()) {
            return None;
        }
        serde_json::to_vec(&saved).ok()
    }

    /// Takes in the answers [`Reviews::export`] saved, to stand in for reviews (by the same
    /// rule) while the upstream cannot be reached after a restart. Answers past their use
    /// (`outage_recent` + `outage_grace` after their TTL) are dropped; how many were taken in.
    pub async fn import(&self, bytes: &[u8]) -> Result<usize, String> {
        let saved: Saved = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let clock = Clock::now();
        let Some(answered) = saved.answered_at_ms.and_then(|ms| clock.instant(ms)) else {
            return Ok(0);
        };
        let live = |expires_at_ms: u64| {
            clock.instant(expires_at_ms).filter(|e| {
                e.checked_add(self.config.outage_recent + self.config.outage_grace)
                    .is_some_and(|end| end > clock.instant)
            })
        };
        let mut taken = 0;
        for t in saved.tokens {
            let (Some(key), Some(expires_at)) = (unhex(&t.sha256), live(t.expires_at_ms)) else {
                continue;
            };
            let value = t.user.map_or(TokenIdentity::Invalid, TokenIdentity::User);
            self.known_tokens.insert(key, Known { value, expires_at }).await;
            taken += 1;
        }
        for a in saved.access {
            let Some(expires_at) = live(a.expires_at_ms) else { continue };
            let value = Decision { allowed: a.allowed, reason: a.reason };
            self.known_access.insert((a.user, a.attributes), Known { value, expires_at }).await;
            taken += 1;
        }
        *self.restored_answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answered);
        // An outage already under way that had no answer to date from now has this one.
        if let Some(o) = self.outage.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            o.began = o.began.or(Some(answered));
        }
        Ok(taken)
    }

    fn count(&self, kind: &str, result: &str, source: &str) {
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
        let sent = tokio::time::timeout(self.config.timeout, self.upstream.send(req)).await;
        let resp = match sent {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                self.reached(false);
                return Err(ReviewError::Transport(e.to_string()));
            }
            Err(_) => {
                self.reached(false);
                return Err(ReviewError::Transport(format!(
                    "no answer within {:?}",
                    self.config.timeout
                )));
            }
        };
        self.reached(!matches!(resp.status().as_u16(), 502..=504));
        let status = resp.status().as_u16();
        // A review is created: 201 (200 from older servers).
        if status != 201 && status != 200 {
            return Err(ReviewError::Status { status });
        }
        let body = http_body_util::Limited::new(resp.into_body(), 1024 * 1024).collect();
        let body = tokio::time::timeout(self.config.timeout, body)
            .await
            .map_err(|_| ReviewError::Transport("the answer did not arrive in time".into()))?
            .map_err(|e| ReviewError::Transport(e.to_string()))?
            .to_bytes();
        self.metrics.seconds.with_label_values(&[kind]).observe(started.elapsed().as_secs_f64());
        serde_json::from_slice(&body).map_err(|e| ReviewError::Decode(e.to_string()))
    }
}

/// The file [`Reviews::export`] writes.
#[derive(Serialize, Deserialize)]
struct Saved {
    answered_at_ms: Option<u64>,
    tokens: Vec<SavedToken>,
    access: Vec<SavedAccess>,
}

#[derive(Serialize, Deserialize)]
struct SavedToken {
    sha256: String,
    /// `None`: the token was invalid.
    user: Option<UserInfo>,
    expires_at_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct SavedAccess {
    user: UserInfo,
    attributes: ResourceAttributes,
    allowed: bool,
    reason: String,
    expires_at_ms: u64,
}

/// One reading of both clocks, to carry an `Instant` across a restart as Unix time.
struct Clock {
    instant: Instant,
    unix_ms: u64,
}

impl Clock {
    fn now() -> Clock {
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Clock { instant: Instant::now(), unix_ms }
    }

    fn unix_ms(&self, at: Instant) -> u64 {
        if at >= self.instant {
            self.unix_ms.saturating_add(at.duration_since(self.instant).as_millis() as u64)
        } else {
            self.unix_ms.saturating_sub(self.instant.duration_since(at).as_millis() as u64)
        }
    }

    /// `None` when the time cannot be an `Instant` here (before the machine's boot).
    fn instant(&self, unix_ms: u64) -> Option<Instant> {
        if unix_ms >= self.unix_ms {
            self.instant.checked_add(Duration::from_millis(unix_ms - self.unix_ms))
        } else {
            self.instant.checked_sub(Duration::from_millis(self.unix_ms - unix_ms))
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<TokenKey> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
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
