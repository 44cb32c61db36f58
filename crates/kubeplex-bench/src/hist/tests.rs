use super::*;

#[test]
fn percentiles_are_within_one_percent() {
    let mut h = Histogram::default();
    for ms in 1..=1000 {
        h.record(Duration::from_millis(ms));
    }
    let s = h.summary();
    assert_eq!(s.count, 1000);
    for (got, want) in [(s.p50_ms, 500.0), (s.p90_ms, 900.0), (s.p99_ms, 990.0)] {
        assert!((got - want).abs() / want < 0.011, "{got} vs {want}");
    }
    assert_eq!(s.max_ms, 1000.0);
    let mut other = Histogram::default();
    other.record(Duration::from_secs(7200));
    other.record(Duration::ZERO);
    h.merge(&other);
    assert_eq!(h.count(), 1002);
    assert_eq!(h.summary().max_ms, 7_200_000.0);
    assert_eq!(Histogram::default().summary(), Summary::default());
}
