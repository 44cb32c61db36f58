//! How long review answers are used: a TTL per kind of answer (a grant a little longer than a
//! denial is remembered, as the webhook authorizer does), and how long the last answers are
//! kept to stand in during an outage.

use std::time::{Duration, Instant};

use super::wire::{Decision, ResourceAttributes, TokenIdentity, UserInfo};

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

pub type TokenKey = [u8; 32];

/// An answer a review gives, as it is cached and counted.
pub trait Answer: Clone + Send + Sync + 'static {
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
pub struct Ttl(pub ReviewConfig);

impl<K, V: Answer> moka::Expiry<K, V> for Ttl {
    fn expire_after_create(&self, _: &K, v: &V, _: Instant) -> Option<Duration> {
        Some(v.ttl(&self.0))
    }
}

/// Whether `token` is a JWT whose `exp` (Unix seconds) has passed. The apiserver checks it on
/// every review; in an outage kubeplex checks it itself. A token that is not a JWT, or has no
/// `exp`, has no expiry kubeplex can see.
pub fn jwt_expired(token: &str) -> bool {
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
    exp.is_some_and(|exp| exp <= crate::cache::clock::unix_now() as f64)
}

pub type AccessKey = (UserInfo, ResourceAttributes);

/// An answer as it was last given, and until when its TTL allowed using it.
#[derive(Clone)]
pub struct Known<T> {
    pub value: T,
    pub expires_at: Instant,
}

/// The last answers are kept `outage_recent` + `outage_grace` past their TTL: as long as an
/// outage may use them.
pub struct Grace(pub Duration);

impl<K, T> moka::Expiry<K, Known<T>> for Grace {
    fn expire_after_create(&self, _: &K, v: &Known<T>, now: Instant) -> Option<Duration> {
        Some(v.expires_at.saturating_duration_since(now).saturating_add(self.0))
    }
}
