//! The last review answers on disk, next to the caches' states: after a restart during an
//! outage they stand in for reviews as they would have before it. Times are wall clock (Unix
//! milliseconds), the only clock that survives a reboot; tokens appear as their SHA-256 only.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::policy::{AccessKey, Known, TokenKey};
use super::wire::{Decision, ResourceAttributes, TokenIdentity, UserInfo};

/// The file in the state directory.
pub const DECISIONS_FILE: &str = "decisions.json";
/// Far more than 10 000 answers of each kind take.
pub const DECISIONS_MAX_BYTES: u64 = 64 << 20;

/// What [`encode`] writes: the last answers and when the upstream last answered; `None` when
/// there is nothing to save.
pub fn encode(
    answered: Option<Instant>,
    tokens: impl Iterator<Item = (TokenKey, Known<TokenIdentity>)>,
    access: impl Iterator<Item = (AccessKey, Known<Decision>)>,
) -> Option<Vec<u8>> {
    let clock = Clock::now();
    let saved = Saved {
        answered_at_ms: answered.map(|i| clock.unix_ms(i)),
        tokens: tokens
            .map(|(key, k)| SavedToken {
                sha256: hex::encode(key),
                user: match k.value {
                    TokenIdentity::User(u) => Some(u),
                    TokenIdentity::Invalid => None,
                },
                expires_at_ms: clock.unix_ms(k.expires_at),
            })
            .collect(),
        access: access
            .map(|((user, attributes), k)| SavedAccess {
                user,
                attributes,
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

/// Answers read back: when the upstream last answered, and the answers still of use.
pub struct Restored {
    pub answered: Instant,
    pub tokens: Vec<(TokenKey, Known<TokenIdentity>)>,
    pub access: Vec<(AccessKey, Known<Decision>)>,
}

/// Reads what [`encode`] wrote. Answers past their use (`keep` after their TTL) are dropped;
/// `None` when the upstream had never answered.
pub fn decode(bytes: &[u8], keep: Duration) -> Result<Option<Restored>, String> {
    let saved: Saved = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let clock = Clock::now();
    let Some(answered) = saved.answered_at_ms.and_then(|ms| clock.instant(ms)) else {
        return Ok(None);
    };
    let live = |expires_at_ms: u64| {
        clock
            .instant(expires_at_ms)
            .filter(|e| e.checked_add(keep).is_some_and(|end| end > clock.instant))
    };
    let mut restored = Restored { answered, tokens: Vec::new(), access: Vec::new() };
    for t in saved.tokens {
        let (Some(key), Some(expires_at)) = (token_key(&t.sha256), live(t.expires_at_ms)) else {
            continue;
        };
        let value = t.user.map_or(TokenIdentity::Invalid, TokenIdentity::User);
        restored.tokens.push((key, Known { value, expires_at }));
    }
    for a in saved.access {
        let Some(expires_at) = live(a.expires_at_ms) else { continue };
        let value = Decision { allowed: a.allowed, reason: a.reason };
        restored.access.push(((a.user, a.attributes), Known { value, expires_at }));
    }
    Ok(Some(restored))
}

fn token_key(sha256: &str) -> Option<TokenKey> {
    hex::decode(sha256).ok()?.try_into().ok()
}

/// The file [`encode`] writes.
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
