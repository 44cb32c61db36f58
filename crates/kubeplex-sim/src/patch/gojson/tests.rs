//! Go `encoding/json` behaviour: messages as Go 1.2x's scanner words them.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

fn err(input: &[u8]) -> String {
    parse(input).expect_err("must fail")
}

#[test]
fn nesting_past_the_limit_is_refused() {
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(parse(ok.as_bytes()).is_ok());
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert_eq!(err(deep.as_bytes()), "invalid character '[' exceeded max depth");
}

#[test]
fn values_decode_as_go_does() {
    assert_eq!(
        parse(br#" {"a": [1, -2, 1.5, true, null, "x"]} "#).unwrap(),
        json!({"a": [1, -2, 1.5, true, null, "x"]})
    );
    // Integers beyond int64 become float64, as with PreserveInts.
    let big = parse(b"9223372036854775808").unwrap();
    assert_eq!(go_type(&big), GoType::Float64);
    assert_eq!(go_type(&parse(b"9223372036854775807").unwrap()), GoType::Int64);
    assert_eq!(go_type(&parse(b"1.0").unwrap()), GoType::Float64);
    assert_eq!(go_type(&parse(b"-0").unwrap()), GoType::Int64);
    assert_eq!(err(b"1e400"), "json: cannot unmarshal number 1e400 into Go value of type float64");
    // Duplicate keys: the last one wins.
    assert_eq!(parse(br#"{"a":1,"a":2}"#).unwrap(), json!({"a": 2}));
}

#[test]
fn type_errors_name_the_json_kind() {
    assert_eq!(
        type_error(&json!([1]), "map[string]interface {}"),
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    assert_eq!(
        type_error(&json!({}), "jsonpatch.Patch"),
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    );
    assert_eq!(type_error(&json!(1), "x"), "json: cannot unmarshal number into Go value of type x");
    assert_eq!(
        type_error(&json!("s"), "x"),
        "json: cannot unmarshal string into Go value of type x"
    );
    assert_eq!(
        type_error(&json!(true), "x"),
        "json: cannot unmarshal bool into Go value of type x"
    );
}

#[test]
fn fmt_verbs_print_like_go() {
    let v = json!({"name": "app", "b": 1, "a": [true, null, "x"], "m": {}});
    assert_eq!(fmt_v(&v), "map[a:[true <nil> x] b:1 m:map[] name:app]");
    assert_eq!(fmt_s(&v), "map[a:[%!s(bool=true) %!s(<nil>) x] b:%!s(int64=1) m:map[] name:app]");
    assert_eq!(fmt_s(&json!("merge")), "merge");
    assert_eq!(fmt_v(&Value::Null), "<nil>");
    let float = |f: f64| fmt_v(&json!(f));
    assert_eq!(float(1e6), "1e+06");
    assert_eq!(float(123456.0), "123456");
    assert_eq!(float(1234567.0), "1.234567e+06");
    assert_eq!(float(0.5), "0.5");
    assert_eq!(float(0.0001), "0.0001");
    assert_eq!(float(0.000015), "1.5e-05");
    assert_eq!(float(-2.5), "-2.5");
    assert_eq!(float(1e21), "1e+21");
    assert_eq!(float(0.0), "0");
    assert_eq!(type_name(&json!({})), "map[string]interface {}");
    assert_eq!(type_name(&json!([])), "[]interface {}");
    assert_eq!(type_name(&Value::Null), "%!s(<nil>)");
}

#[test]
fn go_equality_panics_on_uncomparable_values() {
    assert_eq!(go_eq(&json!(1), &json!(1)), Ok(true));
    assert_eq!(go_eq(&json!(1), &json!(1.0)), Ok(false));
    assert_eq!(go_eq(&json!("a"), &json!({})), Ok(false));
    assert!(go_eq(&json!({}), &json!({})).is_err());
    assert!(go_eq(&json!([]), &json!([1])).is_err());
}

#[test]
fn atoi_matches_strconv() {
    assert_eq!(atoi("12"), Ok(12));
    assert_eq!(atoi("+3"), Ok(3));
    assert_eq!(atoi("-1"), Ok(-1));
    assert_eq!(atoi("-"), Err("strconv.Atoi: parsing \"-\": invalid syntax".to_owned()));
    assert_eq!(atoi(""), Err("strconv.Atoi: parsing \"\": invalid syntax".to_owned()));
    assert_eq!(atoi(" 1"), Err("strconv.Atoi: parsing \" 1\": invalid syntax".to_owned()));
    assert_eq!(
        atoi("99999999999999999999"),
        Err("strconv.Atoi: parsing \"99999999999999999999\": value out of range".to_owned())
    );
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z$/]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn never_panics_on_json_like_text(text in "[\\[\\]{}:,\"\\\\ a-z0-9.eE+-]{0,40}") {
        let _ = parse(text.as_bytes());
    }

    #[test]
    fn serde_output_round_trips(value in arb_json()) {
        let bytes = serde_json::to_vec(&value).unwrap();
        prop_assert_eq!(parse(&bytes).unwrap(), value);
    }
}
