//! Asking the upstream who a client is and what it may do, as kube-apiserver's webhook
//! authenticator and authorizer (and the kubelet's) do it: a `TokenReview`
//! (`authentication.k8s.io/v1`) for a bearer token, a `SubjectAccessReview`
//! (`authorization.k8s.io/v1`) for a read — including its field and label selectors, which the
//! Node authorizer decides on (1.31+ `resourceAttributes.fieldSelector/labelSelector`).
//!
//! Answers are cached, bounded in number, with short TTLs and shorter ones for refusals (the
//! webhook authorizer's rule: a grant may be used a little longer than a denial is remembered),
//! and concurrent identical reviews share one request. A remembered refusal only ever sends a
//! request to the upstream (`auth::authorize`): a caller that would refuse a client on it asks
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

//!
//! The parts: [`wire`] (the review objects), [`policy`] (TTLs and how long last answers are
//! kept), [`outage`] (when an outage began and when a review is tried), [`persist`] (the last
//! answers on disk), [`metrics`]; this file asks and caches.

pub mod metrics;
pub mod outage;
pub mod persist;
pub mod policy;
pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};

pub use self::metrics::{CacheEntries, EntryCount, ReviewMetrics};
pub use self::outage::RETRY_INTERVAL;
use self::outage::{usable, Outages};
pub use self::policy::ReviewConfig;
use self::policy::{jwt_expired, AccessKey, Answer, Grace, Known, TokenKey, Ttl};
pub use self::wire::{Decision, ResourceAttributes, ReviewError, TokenIdentity, UserInfo};
use crate::live::disk::DiskStates;
use crate::upstream::Upstream;

/// The reviews of one upstream, with their caches.
pub struct Reviews {
    upstream: Arc<Upstream>,
    config: ReviewConfig,
    tokens: moka::future::Cache<TokenKey, TokenIdentity>,
    access: moka::future::Cache<AccessKey, Decision>,
    known_tokens: moka::future::Cache<TokenKey, Known<TokenIdentity>>,
    known_access: moka::future::Cache<AccessKey, Known<Decision>>,
    outages: Outages,
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
            outages: Outages::default(),
            config,
            metrics,
        }
    }

    /// Its caches' entry counts, for `kubeplex_auth_cache_entries` (the closures share the
    /// caches).
    pub fn entry_counts(&self) -> Vec<(&'static str, self::metrics::EntryCount)> {
        let (tokens, access) = (self.tokens.clone(), self.access.clone());
        let (known_tokens, known_access) = (self.known_tokens.clone(), self.known_access.clone());
        vec![
            ("tokens", Box::new(move || tokens.entry_count())),
            ("access", Box::new(move || access.entry_count())),
            ("known_tokens", Box::new(move || known_tokens.entry_count())),
            ("known_access", Box::new(move || known_access.entry_count())),
        ]
    }

    /// Remembers a token kubeplex verified itself against its live view
    /// (`auth::service_account`) as the last known answer for it: it then stands in as a
    /// reviewed token's does while the upstream does not answer (`decide`, with the same
    /// bounds), and a later review's answer (its pod deleted: invalid) replaces it. Written
    /// again only once half its TTL has passed.
    pub async fn remember_token(&self, token: &str, user: &UserInfo) {
        let key = token_key(token);
        let value = TokenIdentity::User(user.clone());
        let ttl = value.ttl(&self.config);
        let now = Instant::now();
        let fresh = |k: &Known<TokenIdentity>| k.value == value && k.expires_at > now + ttl / 2;
        if self.known_tokens.get(&key).await.is_some_and(|k| fresh(&k)) {
            return;
        }
        self.known_tokens.insert(key, Known { value, expires_at: now + ttl }).await;
    }

    /// Remembers a grant kubeplex made itself from its live view (`auth::node_rules`) as the
    /// last known answer for `user` and `attributes`: made from a view as current as a review,
    /// it stands in as a reviewed grant does while the upstream does not answer (`decide`), and
    /// for as long. Written again only once half its TTL has passed (reads are frequent).
    pub async fn remember_grant(&self, user: &UserInfo, attributes: &ResourceAttributes) {
        let key = (user.clone(), attributes.clone());
        let value = Decision { allowed: true, reason: String::new() };
        let ttl = value.ttl(&self.config);
        let now = Instant::now();
        let fresh = |k: &Known<Decision>| k.value.allowed && k.expires_at > now + ttl / 2;
        if self.known_access.get(&key).await.is_some_and(|k| fresh(&k)) {
            return;
        }
        self.known_access.insert(key, Known { value, expires_at: now + ttl }).await;
    }

    /// Counts a read granted without a review by the Node authorizer's rules
    /// (`auth::node_rules`): `kubeplex_auth_decisions_total{source="node_rules"}`.
    pub fn granted_by_node_rules(&self) {
        self.metrics.decisions.with_label_values(&["access", "allowed", "node_rules"]).inc();
    }

    /// Counts a ServiceAccount token verified by kubeplex itself (`auth::service_account`).
    pub fn verified_locally(&self) {
        self.metrics.decisions.with_label_values(&["token", "authenticated", "verified"]).inc();
    }

    /// Who a bearer token belongs to.
    pub async fn authenticate(&self, token: &str) -> Result<TokenIdentity, ReviewError> {
        let key = token_key(token);
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
            Ok(d) if d.refuses() && self.outages.in_outage() => {
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
            k.filter(|k| usable(&self.config, k.expires_at, began) && may_stand_in())
                .map(|k| k.value)
        };
        if let Some(began) = self.outages.skip_review() {
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
            Err(e) => match last_known(known.get(&key).await, self.outages.began(&e)) {
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

    /// Records how a review request went (see [`Outages::reached`]).
    fn reached(&self, answered: bool) {
        self.outages.reached(answered, self.upstream.last_answered(), &self.config);
    }

    /// The last answers and when the upstream last answered, for a kubeplex restarted during
    /// an outage ([`Reviews::import`], [`persist`]); `None` when there is nothing to save.
    pub fn export(&self) -> Option<Vec<u8>> {
        persist::encode(
            self.outages.last_answered(self.upstream.last_answered()),
            self.known_tokens.iter().map(|(key, k)| (*key, k)),
            self.known_access.iter().map(|(key, k)| ((*key).clone(), k)),
        )
    }

    /// Takes in the answers [`Reviews::export`] saved, to stand in for reviews (by the same
    /// rule) while the upstream cannot be reached after a restart. Answers past their use
    /// (`outage_recent` + `outage_grace` after their TTL) are dropped; how many were taken in.
    pub async fn import(&self, bytes: &[u8]) -> Result<usize, String> {
        let keep = self.config.outage_recent + self.config.outage_grace;
        let Some(restored) = persist::decode(bytes, keep)? else { return Ok(0) };
        let taken = restored.tokens.len() + restored.access.len();
        for (key, known) in restored.tokens {
            self.known_tokens.insert(key, known).await;
        }
        for (key, known) in restored.access {
            self.known_access.insert(key, known).await;
        }
        self.outages.restored(restored.answered);
        Ok(taken)
    }

    /// Writes the last answers to the state directory ([`persist::DECISIONS_FILE`]).
    pub async fn save(&self, disk: &Arc<DiskStates>) {
        let Some(bytes) = self.export() else { return };
        let disk = disk.clone();
        let write =
            tokio::task::spawn_blocking(move || disk.write_file(persist::DECISIONS_FILE, &bytes));
        if let Ok(Err(e)) = write.await {
            tracing::warn!(error = %e, "review answers not written");
        }
    }

    /// Reads back what [`Reviews::save`] wrote, if anything.
    pub async fn restore(&self, disk: &Arc<DiskStates>) {
        let d = disk.clone();
        let read = tokio::task::spawn_blocking(move || {
            d.read_file(persist::DECISIONS_FILE, persist::DECISIONS_MAX_BYTES)
        });
        let Ok(Some(bytes)) = read.await else { return };
        match self.import(&bytes).await {
            Ok(answers) => tracing::info!(answers, "review answers read from disk, for an outage"),
            Err(error) => tracing::warn!(%error, "review answers on disk unreadable; skipped"),
        }
    }

    fn count(&self, kind: &str, result: &str, source: &str) {
        self.metrics.decisions.with_label_values(&[kind, result, source]).inc();
    }

    async fn token_review(&self, token: &str) -> Result<TokenIdentity, ReviewError> {
        let body = wire::token_review(token);
        let answer =
            self.post("token", "/apis/authentication.k8s.io/v1/tokenreviews", &body).await?;
        Ok(wire::token_identity(answer))
    }

    async fn access_review(
        &self,
        user: &UserInfo,
        attributes: &ResourceAttributes,
    ) -> Result<Decision, ReviewError> {
        tracing::debug!(
            user = %user.username,
            extra = user.extra.len(),
            verb = %attributes.verb,
            resource = %attributes.resource,
            namespace = %attributes.namespace,
            name = %attributes.name,
            field_selector = attributes.field_selector.as_deref().unwrap_or(""),
            label_selector = attributes.label_selector.as_deref().unwrap_or(""),
            "access review"
        );
        let body = wire::access_review(user, attributes);
        let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
        Ok(wire::decision(self.post("access", path, &body).await?))
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ReviewError> {
        let started = Instant::now();
        let bytes =
            Bytes::from(serde_json::to_vec(body).map_err(|e| ReviewError::Decode(e.to_string()))?);
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        // A review is a question, safe to ask twice: one whose connection broke under it (an
        // upstream connection closed mid-request) is asked once more, on a fresh one, within
        // the same time — as client-go's review webhooks retry a failed call. A second failure
        // is the answer.
        let mut attempts = 0;
        let resp = loop {
            attempts += 1;
            let req = Request::builder()
                .method(Method::POST)
                .uri(path)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json")
                .header(header::USER_AGENT, concat!("kubeplex/", env!("CARGO_PKG_VERSION")))
                .body(Full::new(bytes.clone()).map_err(|never| match never {}).boxed())
                .map_err(|e| ReviewError::Transport(e.to_string()))?;
            match tokio::time::timeout_at(deadline, self.upstream.send(req)).await {
                Ok(Ok(resp)) => break resp,
                Ok(Err(e)) if attempts < 2 => {
                    tracing::debug!(error = %e, kind, "review request failed; asking again");
                }
                Ok(Err(e)) => {
                    self.reached(false);
                    return Err(ReviewError::Transport(e.to_string()));
                }
                Err(_) => {
                    self.reached(false);
                    return Err(ReviewError::Timeout(format!(
                        "no answer within {:?}",
                        self.config.timeout
                    )));
                }
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
            .map_err(|_| ReviewError::Timeout("the answer did not arrive in time".into()))?
            .map_err(|e| ReviewError::Transport(e.to_string()))?
            .to_bytes();
        self.metrics.seconds.with_label_values(&[kind]).observe(started.elapsed().as_secs_f64());
        serde_json::from_slice(&body).map_err(|e| ReviewError::Decode(e.to_string()))
    }
}

#[cfg(test)]
mod tests;

/// A token's key in the caches: its SHA-256 (the token itself is never kept).
fn token_key(token: &str) -> TokenKey {
    ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
        .as_ref()
        .try_into()
        .unwrap_or([0; 32])
}
