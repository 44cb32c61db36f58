use super::samples::Window;

/// Samples every 10 s for 100 s; disruptions (after the warm-up) at 35 s and 65 s.
fn times() -> Vec<f64> {
    (0..=10).map(|i| f64::from(i) * 10.0).collect()
}

#[test]
fn whole_cycles_start_at_the_first_disruption_after_the_warm_up() {
    let picked = Window::cycles(&[35.0, 65.0], 20.0).select(&times());
    assert_eq!(picked, (4..=10).collect::<Vec<_>>());
    // No disruption after the warm-up: from the warm-up's end.
    assert_eq!(Window::cycles(&[], 20.0).select(&times()), (2..=10).collect::<Vec<_>>());
}

#[test]
fn settled_levels_are_the_samples_before_each_disruption_and_the_last() {
    let picked = Window::settled(&[35.0, 65.0]).select(&times());
    assert_eq!(picked, [3, 6, 10]);
    // A disruption right after another, no sample between: one level, not two.
    assert_eq!(Window::settled(&[35.0, 38.0]).select(&times()), [3, 10]);
    assert!(Window::settled(&[35.0]).select(&[]).is_empty());
}
