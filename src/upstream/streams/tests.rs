use super::*;

#[test]
fn a_full_connection_makes_another_and_a_freed_slot_is_used_again() {
    let made = Arc::new(AtomicUsize::new(0));
    let counter = made.clone();
    let spread = Spread::new(move || counter.fetch_add(1, Ordering::Relaxed));
    let mut slots: Vec<(usize, Slot)> =
        (0..STREAMS_PER_CONNECTION + 1).map(|_| spread.pick()).collect();
    assert_eq!(slots.iter().filter(|(c, _)| *c == 0).count(), STREAMS_PER_CONNECTION);
    assert_eq!(
        slots.last().map(|(c, _)| *c),
        Some(1),
        "the 97th request opens a second connection"
    );
    assert_eq!(spread.connections(), 2);
    // One of the first connection's requests ends: the next goes there again.
    slots.swap_remove(0);
    assert_eq!(spread.pick().0, 0);
    assert_eq!(spread.connections(), 2);
}

#[test]
fn past_the_most_connections_the_least_busy_takes_more() {
    let n = AtomicUsize::new(0);
    let spread = Spread::new(move || n.fetch_add(1, Ordering::Relaxed));
    let mut slots: Vec<(usize, Slot)> =
        (0..STREAMS_PER_CONNECTION * MAX_CONNECTIONS).map(|_| spread.pick()).collect();
    assert_eq!(spread.connections(), MAX_CONNECTIONS);
    // Free two on connection 5: the next two go there.
    let at: Vec<usize> =
        slots.iter().enumerate().filter(|(_, (c, _))| *c == 5).map(|(i, _)| i).take(2).collect();
    slots.remove(at[1]);
    slots.remove(at[0]);
    let (first, _one) = spread.pick();
    let (second, _two) = spread.pick();
    assert_eq!((first, second), (5, 5));
    assert_eq!(spread.connections(), MAX_CONNECTIONS);
}
