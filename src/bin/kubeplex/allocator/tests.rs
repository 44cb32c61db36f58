use super::*;

const MIB: u64 = 1 << 20;

#[test]
fn a_trim_waits_for_the_retained_memory_to_grow_past_its_lowest_since_the_last() {
    let mut p = Policy::default();
    // The first look sets the floor: 40 MiB retained (text, stacks) is no reason to trim.
    assert!(!p.look(140 * MIB, 100 * MIB));
    // Freed heap grows: under the margin (an eighth of 100 MiB in use is 12.5 MiB: 16 MiB
    // counts), then past it.
    assert!(!p.look(155 * MIB, 100 * MIB));
    assert!(p.look(157 * MIB, 100 * MIB));
    p.trimmed(142 * MIB, 100 * MIB);
    assert!(!p.look(142 * MIB, 100 * MIB), "nothing more to give back");
    // Free chunks used again lower the floor; freeing them again is growth from there.
    assert!(!p.look(130 * MIB, 100 * MIB));
    assert!(p.look(147 * MIB, 100 * MIB));
    // A large heap needs an eighth of itself.
    let mut p = Policy::default();
    assert!(!p.look(1_050 * MIB, 1_000 * MIB));
    assert!(!p.look(1_150 * MIB, 1_000 * MIB), "100 MiB is under an eighth of 1,000 MiB");
    assert!(p.look(1_180 * MIB, 1_000 * MIB));
    // No resident figure below what is in use confuses it.
    assert!(!Policy::default().look(10 * MIB, 20 * MIB));
}

#[test]
fn a_small_growth_that_lasts_a_minute_is_trimmed_once() {
    let mut p = Policy::default();
    assert!(!p.look(140 * MIB, 100 * MIB));
    // 3 MiB more retained: under the burst margin, so no trim at once…
    for _ in 1..DRIFT_LOOKS {
        assert!(!p.look(143 * MIB, 100 * MIB));
    }
    // …but once it has lasted a minute of looks.
    assert!(p.look(143 * MIB, 100 * MIB));
    // The trim gave back nothing (text pages, say): that is the floor now, not tried again.
    p.trimmed(143 * MIB, 100 * MIB);
    for _ in 0..3 * DRIFT_LOOKS {
        assert!(!p.look(143 * MIB, 100 * MIB));
    }
    // A growth that comes and goes within the minute is left alone.
    for _ in 0..3 {
        for _ in 1..DRIFT_LOOKS {
            assert!(!p.look(146 * MIB, 100 * MIB));
        }
        assert!(!p.look(143 * MIB, 100 * MIB));
    }
    // Under the drift margin, never.
    for _ in 0..3 * DRIFT_LOOKS {
        assert!(!p.look(143 * MIB + MIB / 2, 100 * MIB));
    }
}

/// What an operator sees: the heap a burst freed leaves the resident set once trimmed,
/// though live allocations sit between its chunks (glibc alone gives back only a heap's top).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn freed_chunks_between_live_ones_leave_the_resident_set_when_trimmed() {
    let registry = prometheus::Registry::new();
    let metrics = TrimMetrics::new(&registry).unwrap();
    let mut policy = Policy::default();
    check(&mut policy, &metrics);
    // 128 MiB in 4 KiB blocks (under any mmap threshold), written so they are resident;
    // every 32nd one kept, pinning the heap around the freed ones.
    let mut blocks: Vec<Vec<u8>> = (0..32_768).map(|i| vec![i as u8 | 1; 4096]).collect();
    let kept: Vec<Vec<u8>> = blocks.iter_mut().step_by(32).map(std::mem::take).collect();
    let before = resident_bytes().unwrap();
    drop(blocks);
    let freed = resident_bytes().unwrap();
    assert!(
        freed + 64 * MIB > before,
        "glibc kept the freed blocks resident: {} MiB before, {} MiB after the free",
        before / MIB,
        freed / MIB
    );
    check(&mut policy, &metrics);
    let after = resident_bytes().unwrap();
    assert_eq!(metrics.trims.get(), 1, "one trim");
    assert!(
        after + 96 * MIB < freed,
        "the freed 124 MiB left the resident set: {} MiB → {} MiB",
        freed / MIB,
        after / MIB
    );
    assert!(metrics.released.get() >= 96 * MIB, "released: {}", metrics.released.get());
    // Nothing more to give back: the next look does not trim.
    check(&mut policy, &metrics);
    assert_eq!(metrics.trims.get(), 1);
    assert_eq!(kept.len(), 1024);
    assert!(kept.iter().all(|b| b.len() == 4096));
}
