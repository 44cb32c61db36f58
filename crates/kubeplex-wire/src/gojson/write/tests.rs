use super::*;
use proptest::prelude::*;
use serde_json::json;

fn s(v: &str) -> String {
    let mut out = Vec::new();
    push_string(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

fn val(v: &Value) -> String {
    String::from_utf8(to_vec(v)).unwrap_or_default()
}

#[test]
fn escapes_like_go() {
    assert_eq!(s("<none>"), r#""\u003cnone\u003e""#);
    assert_eq!(s("a&b"), r#""a\u0026b""#);
    assert_eq!(s("say \"True\"\n"), r#""say \"True\"\n""#);
    assert_eq!(s("\u{8}\u{c}\r\t\\"), r#""\b\f\r\t\\""#);
    assert_eq!(s("\u{1}\u{1f}\u{7f}"), "\"\\u0001\\u001f\u{7f}\"");
    assert_eq!(s("x\u{2028}y\u{2029}"), r#""x\u2028y\u2029""#);
    assert_eq!(s("héllo ✓ 🙂"), "\"héllo ✓ 🙂\"");
    assert_eq!(s(""), r#""""#);
    // json.Marshal("\x00\x08\x0c\n\r\t<>&\u2028\u2029\x7f\"\\é") with Go 1.27.
    assert_eq!(
        s("\u{0}\u{8}\u{c}\n\r\t<>&\u{2028}\u{2029}\u{7f}\"\\é"),
        "\"\\u0000\\b\\f\\n\\r\\t\\u003c\\u003e\\u0026\\u2028\\u2029\u{7f}\\\"\\\\é\""
    );
}

#[test]
fn values_escape_as_go_does() {
    let v =
        json!({"b": "<a href=\"x\">&amp;</a>\u{2028}\u{1}\u{8}\n", "a": [1, -2, 1.5, true, null]});
    assert_eq!(
        val(&v),
        r#"{"b":"\u003ca href=\"x\"\u003e\u0026amp;\u003c/a\u003e\u2028\u0001\b\n","a":[1,-2,1.5,true,null]}"#
    );
}

#[test]
fn numbers_like_go() {
    assert_eq!(val(&json!(1)), "1");
    assert_eq!(val(&json!(-7)), "-7");
    assert_eq!(val(&json!(u64::MAX)), "18446744073709551615");
    assert_eq!(val(&json!(1.0)), "1");
    assert_eq!(val(&json!(100.0)), "100");
    assert_eq!(val(&json!(0.5)), "0.5");
    assert_eq!(val(&json!(1e20)), "100000000000000000000");
    assert_eq!(val(&json!(1e21)), "1e+21");
    assert_eq!(val(&json!(1e-7)), "1e-7");
    assert_eq!(val(&json!(1.5e-7)), "1.5e-7");
    assert_eq!(val(&json!(1e-6)), "0.000001");
    assert_eq!(val(&json!(-2.5e300)), "-2.5e+300");
    assert_eq!(val(&json!(1.2e-100)), "1.2e-100");
}

#[test]
fn values_keep_stored_order_and_maps_sort() {
    let v = json!({"b": [true, null], "a": {"z": 1, "y": "<"}});
    assert_eq!(val(&v), r#"{"b":[true,null],"a":{"z":1,"y":"\u003c"}}"#);
    let mut out = Vec::new();
    if let Value::Object(m) = json!({"b": "1", "a": "2", "B": "3"}) {
        write_sorted_map(&m, &mut out);
    }
    assert_eq!(String::from_utf8(out).unwrap_or_default(), r#"{"B":"3","a":"2","b":"1"}"#);
}

proptest! {
    #[test]
    fn strings_round_trip(input in any::<String>()) {
        let text = s(&input);
        let back: String = serde_json::from_str(&text).unwrap_or_default();
        prop_assert_eq!(back, input);
        prop_assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
    }

    #[test]
    fn escaped_strings_round_trip(input in "\\PC*|[\\x00-\\x20<>&\u{2028}]*") {
        let bytes = to_vec(&Value::String(input.clone()));
        let back: Value = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(back, Value::String(input));
    }

    #[test]
    fn floats_round_trip(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        let text = format_float(f);
        let back: f64 = text.parse().unwrap_or(f64::NAN);
        prop_assert_eq!(back, f);
    }
}
