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
