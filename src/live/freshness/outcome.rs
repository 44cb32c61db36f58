//! What a freshness proof concluded: how a read was shown fresh ([`Proof`]) and at which of
//! the upstream's RVs ([`Proven`]) — the state a consistent read is answered at — or why it was
//! not ([`NotProven`]).

/// How a read was shown to be fresh, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// The cache's state comes from a load requested after the read arrived.
    Load,
    /// The cache was already at the upstream's current RV.
    Cache,
    /// The cache's own watch brought it there.
    Watch,
    /// A probe showed no event between the cache's RV and the upstream's.
    Probe,
    /// The cache was reloaded for it.
    Reload,
    /// A metadata list of the cache's scope showed it holds the upstream's state.
    Listed,
}

impl Proof {
    pub fn as_str(self) -> &'static str {
        match self {
            Proof::Load => "load",
            Proof::Cache => "cache",
            Proof::Watch => "watch",
            Proof::Probe => "probe",
            Proof::Reload => "reload",
            Proof::Listed => "listed",
        }
    }
}

/// A consistent read shown fresh: how, and the upstream's RV it was shown at — the state a
/// consistent read is answered at, so that a watch's initial state and its later events split
/// where the apiserver splits them (`None`: the cache's state was loaded after the read
/// arrived, and is that state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proven {
    pub proof: Proof,
    pub at: Option<u64>,
    /// Set when the cache is behind `at` but was shown to hold the state the upstream had at
    /// `at` (a metadata list, [`Freshness::consistent_listed`]): the cache's RV then. Events
    /// between the two change nothing that state shows (an object created and deleted).
    ///
    /// [`Freshness::consistent_listed`]: super::Freshness::consistent_listed
    pub cache_at: Option<u64>,
}

impl Proven {
    /// The cache's state comes from a load requested after the read arrived: that state.
    pub(super) fn loaded() -> Self {
        Proven { proof: Proof::Load, at: None, cache_at: None }
    }

    /// The cache is at `rv` or past it, shown so by `proof`.
    pub(super) fn at(proof: Proof, rv: u64) -> Self {
        Proven { proof, at: Some(rv), cache_at: None }
    }
}

/// Why a read was not shown fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotProven {
    /// Not within the budget (or the upstream could not be asked).
    Timeout,
    /// A probe would be needed and the caller judged passing through cheaper (a small list).
    Declined,
    /// The upstream did not answer the list that would prove it, and answered the cache's
    /// proofs 429, 503 or 504, or not in time, a moment ago: it is overloaded.
    Overloaded,
}

impl NotProven {
    pub fn as_str(self) -> &'static str {
        match self {
            NotProven::Timeout => "timeout",
            NotProven::Declined => "declined",
            NotProven::Overloaded => "overloaded",
        }
    }
}
