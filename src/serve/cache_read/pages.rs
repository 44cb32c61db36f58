//! Compressed large list bodies kept for reuse.

use std::time::Duration;

/// Compressed list bodies, by what produced them: a popular large list (every kubelet's pods
/// at resourceVersion=0, say) is gzipped once per state, not once per client. Bounded by bytes,
/// and by time: a page is keyed by its cache's state (`page_key|resourceVersion`), so once the
/// cache moves on no client asks for it again, and one not asked for within [`PAGE_IDLE`] is
/// dropped rather than held until the byte bound pushes it out (under churn every state makes
/// a page of its own).
pub type PageCache = moka::sync::Cache<String, bytes::Bytes>;

/// A page not asked for within this long is dropped: long enough for a burst of clients
/// listing the same state, short against a state's life under churn.
pub const PAGE_IDLE: Duration = Duration::from_secs(30);

/// A page cache holding at most `max_bytes` of compressed bodies, each for at most `idle`
/// since it was last asked for.
pub fn page_cache(max_bytes: u64, idle: Duration) -> PageCache {
    moka::sync::Cache::builder()
        .weigher(|k: &String, v: &bytes::Bytes| {
            u32::try_from(k.len() + v.len()).unwrap_or(u32::MAX)
        })
        .max_capacity(max_bytes)
        .time_to_idle(idle)
        .build()
}

/// `kubeplex_page_cache_bytes`: the compressed pages' bytes, read from the cache at each scrape.
struct PageBytes {
    gauge: prometheus::IntGauge,
    pages: PageCache,
}

impl prometheus::core::Collector for PageBytes {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.pages.run_pending_tasks();
        self.gauge.set(i64::try_from(self.pages.weighted_size()).unwrap_or(i64::MAX));
        self.gauge.collect()
    }
}

/// Exposes the cache's bytes; a second registration on the same registry (tests that start
/// two proxies) keeps the first.
pub fn register(pages: &PageCache, registry: &prometheus::Registry) -> prometheus::Result<()> {
    let gauge = prometheus::IntGauge::new(
        "kubeplex_page_cache_bytes",
        "Compressed list bodies kept for reuse (keys and bodies), bytes.",
    )?;
    let _ = registry.register(Box::new(PageBytes { gauge, pages: pages.clone() }));
    Ok(())
}

#[cfg(test)]
mod tests;
