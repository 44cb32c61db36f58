//! The wall clock, as the caches' states and the reviews' answers carry it across restarts.

/// Now, in Unix seconds (0 on a clock before 1970).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
