use super::*;

#[test]
fn time_round_trips_as_go_writes_it() {
    let t = parse_rfc3339("2026-11-22T10:18:33Z").unwrap();
    assert_eq!(t, Instant { secs: 1_795_342_713, nanos: 0 });
    assert_eq!(format_time(t).as_deref(), Some("2026-11-22T10:18:33Z"));
    // Offsets are normalised to UTC and fractions dropped, as Time.MarshalJSON does.
    let t = parse_rfc3339("2026-11-22T12:18:33.5+02:00").unwrap();
    assert_eq!(format_time(t).as_deref(), Some("2026-11-22T10:18:33Z"));
    assert_eq!(format_micro_time(t).as_deref(), Some("2026-11-22T10:18:33.500000Z"));
    assert!(parse_rfc3339("0001-01-01T00:00:00Z").unwrap().is_zero());
    assert_eq!(parse_rfc3339("2026-11-22t10:18:33z"), None);
    assert_eq!(parse_rfc3339(""), None);
    assert_eq!(parse_rfc3339("2016-12-31T23:59:60Z"), None);
    assert_eq!(format_time(Instant { secs: i64::MAX, nanos: 0 }), None);
}

#[test]
fn durations_match_go_strings() {
    let cases = [
        (0, "0s"),
        (1, "1ns"),
        (1_100, "1.1µs"),
        (2_200_000, "2.2ms"),
        (1_500_000_000, "1.5s"),
        (60_000_000_000, "1m0s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_723_000_000_000, "1h2m3s"),
        (-90_000_000_000, "-1m30s"),
    ];
    for (d, s) in cases {
        assert_eq!(format_duration(d), s);
        assert_eq!(parse_duration(s), Some(d), "{s}");
    }
    assert_eq!(parse_duration("1.5h"), Some(5_400_000_000_000));
    assert_eq!(parse_duration("0"), Some(0));
    assert_eq!(parse_duration(""), None);
    assert_eq!(parse_duration("1"), None);
    assert_eq!(parse_duration("1x"), None);
    assert_eq!(parse_duration("9999999999h"), None);
}

#[test]
fn base64_is_go_std_encoding() {
    assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
    assert_eq!(base64_decode("aGVs\nbG8=").as_deref(), Some(&b"hello"[..]));
    assert_eq!(base64_decode("aGVsbG8"), None);
}

proptest::proptest! {
    #[test]
    fn duration_round_trips(d in proptest::num::i64::ANY) {
        proptest::prop_assert_eq!(parse_duration(&format_duration(d)), Some(d));
    }

    #[test]
    fn duration_parse_never_panics(s in "\\PC{0,30}") {
        let _ = parse_duration(&s);
    }
}
