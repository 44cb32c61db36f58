use super::*;
use proptest::prelude::*;
use serde_json::json;

fn hd(secs: i64) -> String {
    human_duration(secs * SECOND)
}

#[test]
fn human_duration_boundaries() {
    // Cases from apimachinery's duration_test.go plus every branch edge.
    assert_eq!(human_duration(-2 * SECOND), "<invalid>");
    assert_eq!(human_duration(-2 * SECOND + 1), "0s");
    assert_eq!(human_duration(-SECOND), "0s");
    assert_eq!(human_duration(-1), "0s");
    assert_eq!(human_duration(0), "0s");
    assert_eq!(human_duration(SECOND - 1), "0s");
    assert_eq!(hd(1), "1s");
    assert_eq!(hd(119), "119s");
    assert_eq!(human_duration(120 * SECOND - 1), "119s");
    assert_eq!(hd(120), "2m");
    assert_eq!(hd(121), "2m1s");
    assert_eq!(hd(9 * 60 + 59), "9m59s");
    assert_eq!(hd(10 * 60), "10m");
    assert_eq!(hd(10 * 60 + 59), "10m");
    assert_eq!(hd(3 * 3600 - 1), "179m");
    assert_eq!(hd(3 * 3600), "3h");
    assert_eq!(hd(3 * 3600 + 60), "3h1m");
    assert_eq!(hd(8 * 3600 - 1), "7h59m");
    assert_eq!(hd(8 * 3600), "8h");
    assert_eq!(hd(48 * 3600 - 1), "47h");
    assert_eq!(hd(48 * 3600), "2d");
    assert_eq!(hd(49 * 3600), "2d1h");
    assert_eq!(hd(8 * 86400 - 1), "7d23h");
    assert_eq!(hd(8 * 86400), "8d");
    assert_eq!(hd(2 * 365 * 86400 - 1), "729d");
    assert_eq!(hd(2 * 365 * 86400), "2y");
    assert_eq!(hd(2 * 365 * 86400 + 86400), "2y1d");
    assert_eq!(hd(8 * 365 * 86400 - 1), "7y364d");
    assert_eq!(hd(8 * 365 * 86400), "8y");
    assert_eq!(human_duration(i64::MAX), "292y");
    assert_eq!(human_duration(i64::MIN), "<invalid>");
}

#[test]
fn timestamps() {
    let now = DateTime::parse_from_rfc3339("2026-11-22T10:19:10.5Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default();
    assert_eq!(translate_since(Some(&json!("2026-11-22T10:19:09Z")), now), "1s");
    assert_eq!(translate_since(Some(&json!("2026-11-22T10:19:12Z")), now), "0s");
    assert_eq!(translate_since(Some(&json!("2026-11-22T10:19:13Z")), now), "<invalid>");
    assert_eq!(translate_since(Some(&json!("2026-11-22T11:19:09+01:00")), now), "1s");
    assert_eq!(translate_since(Some(&json!("2016-11-22T10:19:10Z")), now), "10y");
    assert_eq!(translate_since(None, now), "<unknown>");
    assert_eq!(translate_since(Some(&Value::Null), now), "<unknown>");
    assert_eq!(translate_since(Some(&json!("")), now), "<unknown>");
    assert_eq!(translate_since(Some(&json!("0001-01-01T00:00:00Z")), now), "<unknown>");
    assert_eq!(translate_since(Some(&json!("0001-01-01T01:00:00+01:00")), now), "<unknown>");
    assert_eq!(translate_since(Some(&json!("0001-01-01T00:00:01Z")), now), "292y");
    assert_eq!(translate_since(Some(&json!("yesterday")), now), "<unknown>");
    let ancient = DateTime::<Utc>::MIN_UTC;
    assert_eq!(since(now, ancient), i64::MAX);
    assert_eq!(since(ancient, now), i64::MIN);
}

proptest! {
    #[test]
    fn never_panics(d in any::<i64>()) {
        let s = human_duration(d);
        prop_assert!(!s.is_empty());
    }
}
