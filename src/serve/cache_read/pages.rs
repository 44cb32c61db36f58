//! Compressed large list bodies kept for reuse.

/// Compressed list bodies, by what produced them: a popular large list (every kubelet's pods
/// at resourceVersion=0, say) is gzipped once per state, not once per client. Bounded by bytes.
pub type PageCache = moka::sync::Cache<String, bytes::Bytes>;

/// A page cache holding at most `max_bytes` of compressed bodies.
pub fn page_cache(max_bytes: u64) -> PageCache {
    moka::sync::Cache::builder()
        .weigher(|k: &String, v: &bytes::Bytes| {
            u32::try_from(k.len() + v.len()).unwrap_or(u32::MAX)
        })
        .max_capacity(max_bytes)
        .build()
}
