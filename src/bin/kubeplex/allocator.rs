//! The C allocator's settings for a cache-heavy process: glibc's malloc, as the binary is built
//! on a glibc host and the container image ships it so (a static musl build has none of these
//! settings, and measured 1.58× / 1.52× where glibc with them gave 1.35× / 1.36×).
//!
//! glibc adapts its thresholds to what the process frees: once a large block it had `mmap`ed is
//! freed — a cache's first load (the gunzipped answer to a list of 100,000 ConfigMaps is 135 MB)
//! — it raises the `mmap` threshold up to 32 MiB and the trim threshold to twice that, so
//! afterwards up to 64 MiB of freed heap stays resident, and every thread that allocated gets
//! an arena of its own whose free space is not shared. Fixed thresholds and two arenas, measured
//! against kube-apiserver 1.36 with 100,000 ConfigMaps of ~1 KB (`scripts/realcluster/memory.sh`,
//! RSS above idle over the bytes the caches hold): JSON cache 1.51× → 1.36–1.40×, JSON and
//! protobuf caches 1.46× → 1.36× (as `GLIBC_TUNABLES`: thresholds alone 1.40×, two arenas alone
//! 1.48× / 1.44×; BENCHMARKS.md "The C allocator's settings").

/// Sets them; a setting glibc refuses is left at its default (nothing else depends on it).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn tune() {
    const MMAP_THRESHOLD: libc::c_int = 256 * 1024;
    const TRIM_THRESHOLD: libc::c_int = 128 * 1024;
    const ARENAS: libc::c_int = 2;
    for (param, value) in [
        (libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (libc::M_ARENA_MAX, ARENAS),
    ] {
        // SAFETY: `mallopt` only changes malloc's parameters; it is called before any other
        // thread exists (first thing in `main`), and with parameters glibc documents.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(param, value);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune() {}

/// Gives the heap that was freed back to the system, from a thread of its own.
///
/// glibc returns freed memory to the system only from the top of a heap (`M_TRIM_THRESHOLD`);
/// a free chunk below a live one stays resident until `malloc_trim` releases its pages. A pool
/// replica's start-up is all such bursts — a thousand node tiers' initial events serialized
/// into their connections' buffers, then freed between the watches' lasting allocations — and
/// measured under the fake apiserver with 250 node tiers (`kubeplex-bench scale --sim --mode
/// pool --nodes 500 --cni`), 152 of its 282 MB resident were free chunks: one
/// `malloc_trim(0)` brought it to 146 MB (BENCHMARKS.md "What a pool replica's memory is at
/// N = 2,000": 2–4 trims a run there, 0.1 s in all).
///
/// The check reads the resident set (`/proc/self/statm`) and what malloc has handed out
/// (`mallinfo2`); what is resident beyond that — the program's text, stacks, and free chunks'
/// pages — is the *retained* figure. It trims when the retained figure has grown by
/// [`TRIM_MARGIN`] or an eighth of the heap in use (whichever is larger) over the lowest seen
/// since the last trim: freed memory comes back within [`CHECK_EVERY`], and a heap whose free
/// chunks are already released (or in use again) is not walked again. A smaller growth that
/// lasts — [`DRIFT_MARGIN`] or more at every look for [`DRIFT_LOOKS`] looks — is trimmed too:
/// a process living for months under churn frees a little at a time (a soak's pool replica
/// held 6 MiB/h more with its heap in use falling, issue 47), which a burst's margin would
/// keep resident for hours; text pages a trim cannot give back raise the floor once, so it
/// is not tried again for them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn start_trimmer(registry: &prometheus::Registry) -> anyhow::Result<()> {
    let metrics = TrimMetrics::new(registry)?;
    std::thread::Builder::new().name("kubeplex-trim".into()).spawn(move || {
        let mut policy = Policy::default();
        loop {
            std::thread::sleep(CHECK_EVERY);
            check(&mut policy, &metrics);
        }
    })?;
    Ok(())
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn start_trimmer(_registry: &prometheus::Registry) -> anyhow::Result<()> {
    Ok(())
}

/// How often the trimmer looks (a `mallinfo2`, which walks the arenas' free lists under their
/// locks, as a trim does — a trim at N = 2,000 took ~30 ms — and a read of `/proc/self/statm`).
pub const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// The least growth of retained memory worth a trim at once.
pub const TRIM_MARGIN: u64 = 16 << 20;
/// The least growth of retained memory worth a trim once it has lasted [`DRIFT_LOOKS`] looks.
pub const DRIFT_MARGIN: u64 = 1 << 20;
/// A minute of looks.
pub const DRIFT_LOOKS: u32 = 12;

/// When to trim, from the resident and in-use figures (apart from glibc, for its tests).
#[derive(Debug, Default)]
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
struct Policy {
    /// The lowest retained figure since the last trim (none before the first look).
    floor: Option<u64>,
    /// Looks in a row that found the retained figure [`DRIFT_MARGIN`] or more above the floor.
    drifted: u32,
}

#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
impl Policy {
    /// Whether to trim now, given the resident set and malloc's bytes in use.
    fn look(&mut self, resident: u64, in_use: u64) -> bool {
        let retained = resident.saturating_sub(in_use);
        let floor = self.floor.map_or(retained, |f| f.min(retained));
        self.floor = Some(floor);
        self.drifted = match retained >= floor + DRIFT_MARGIN {
            true => self.drifted.saturating_add(1),
            false => 0,
        };
        retained >= floor + TRIM_MARGIN.max(in_use / 8) || self.drifted >= DRIFT_LOOKS
    }

    /// After a trim: the retained figure it left is the new floor.
    fn trimmed(&mut self, resident: u64, in_use: u64) {
        self.floor = Some(resident.saturating_sub(in_use));
        self.drifted = 0;
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
struct TrimMetrics {
    trims: prometheus::IntCounter,
    seconds: prometheus::Counter,
    released: prometheus::IntCounter,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
impl TrimMetrics {
    fn new(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        use prometheus::{Counter, IntCounter, IntGaugeVec, Opts};
        let heap = HeapCollector(IntGaugeVec::new(
            Opts::new(
                "kubeplex_allocator_heap_bytes",
                "The C allocator's heap: in_use (handed out), free (free chunks, resident or released to the system).",
            ),
            &["state"],
        )?);
        registry.register(Box::new(heap))?;
        let m = TrimMetrics {
            trims: IntCounter::new(
                "kubeplex_allocator_trims_total",
                "Times freed heap was given back to the system (malloc_trim).",
            )?,
            seconds: Counter::new(
                "kubeplex_allocator_trim_seconds_total",
                "Time spent giving freed heap back to the system.",
            )?,
            released: IntCounter::new(
                "kubeplex_allocator_released_bytes_total",
                "The resident set's drop across each trim.",
            )?,
        };
        registry.register(Box::new(m.trims.clone()))?;
        registry.register(Box::new(m.seconds.clone()))?;
        registry.register(Box::new(m.released.clone()))?;
        Ok(m)
    }
}

/// One look, and a trim if the policy says so.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn check(policy: &mut Policy, metrics: &TrimMetrics) {
    let Some(resident) = resident_bytes() else { return };
    let (in_use, _) = heap();
    if !policy.look(resident, in_use) {
        return;
    }
    let started = std::time::Instant::now();
    trim();
    metrics.seconds.inc_by(started.elapsed().as_secs_f64());
    metrics.trims.inc();
    let after = resident_bytes().unwrap_or(resident);
    metrics.released.inc_by(resident.saturating_sub(after));
    policy.trimmed(after, heap().0);
}

/// The heap's figures, read when scraped.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
struct HeapCollector(prometheus::IntGaugeVec);

#[cfg(all(target_os = "linux", target_env = "gnu"))]
impl prometheus::core::Collector for HeapCollector {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let (in_use, free) = heap();
        self.0.with_label_values(&["in_use"]).set(saturating_i64(in_use));
        self.0.with_label_values(&["free"]).set(saturating_i64(free));
        self.0.collect()
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// malloc's bytes handed out (from its arenas and `mmap`ed on their own) and its free chunks'.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap() -> (u64, u64) {
    // SAFETY: `mallinfo2` (glibc ≥ 2.33) only reads the allocator's statistics, under its locks.
    #[allow(unsafe_code)]
    let info = unsafe { libc::mallinfo2() };
    let in_use = (info.uordblks as u64).saturating_add(info.hblkhd as u64);
    (in_use, info.fordblks as u64)
}

/// Releases the pages of every free chunk in every arena.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` is thread-safe (it takes each arena's lock in turn).
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The process's resident set, from `/proc/self/statm` (its second field, in pages).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: `sysconf` reads a constant of the system.
    #[allow(unsafe_code)]
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages.saturating_mul(u64::try_from(page).ok()?))
}

#[cfg(test)]
mod tests;
