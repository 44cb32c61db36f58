//! How a cache's first load is requested ([`FirstLoad`]): as the read that started the cache
//! would ask the upstream directly — a streaming list, a consistent paged list, a paged list at
//! `resourceVersion=0`, or that read's own answer.

/// How a cache's first load is requested: as the read that started the cache would ask it
/// directly, so that the cache costs the apiserver what that reader would, no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirstLoad {
    /// A streaming list (a WatchList reader, a configured cache): the state as watch events.
    #[default]
    Stream,
    /// A consistent paged list (a list with resourceVersion unset, `kubectl get`), then a
    /// watch: a streaming list would send the state as watch events.
    Paged,
    /// A paged list at `resourceVersion=0`, then a watch (an informer's first list, which
    /// accepts any state): the upstream answers it from its watch cache — a tier above
    /// kubeplex from its own cache, with no freshness proof — and the state is consistent for
    /// no read, so the cache's consistent reads are proven as for a quiet cache.
    PagedAnyState,
    /// The answer to the read that started the cache, an unpaged list of its whole scope
    /// ([`fed`]); should it not come whole, a paged list as for [`FirstLoad::Paged`]
    /// (`any_state`: [`FirstLoad::PagedAnyState`]).
    ///
    /// [`fed`]: super::fed
    Fed { any_state: bool },
}

impl FirstLoad {
    /// The load to make instead of [`FirstLoad::Fed`], for a cache whose starting read cannot
    /// feed it (the cache is wider than the read).
    pub fn unfed(self) -> FirstLoad {
        match self {
            FirstLoad::Fed { any_state: true } => FirstLoad::PagedAnyState,
            FirstLoad::Fed { any_state: false } => FirstLoad::Paged,
            other => other,
        }
    }

    /// Whether the first load accepts any state (`resourceVersion=0`).
    pub(super) fn any_state(self) -> bool {
        matches!(self, FirstLoad::PagedAnyState | FirstLoad::Fed { any_state: true })
    }
}
