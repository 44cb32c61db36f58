//! Expected strings were produced by Go 1.x `encoding/json` (v1) and `encoding/base64` running
//! the apiserver's `DecodeContinue` / `EncodeContinue`.

use super::*;
use proptest::prelude::*;

const PAGE1_TOKEN: &str = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjY1LCJzdGFydCI6Ii9jbS1iXHUwMDAwIn0";

fn b64(json: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn err(token: &str) -> String {
    match decode(token) {
        Ok(t) => format!("ok {} {:?}", t.rv, t.start),
        Err(e) => e.to_string(),
    }
}

#[test]
fn fixture_page1_token_round_trips() {
    // Fixture cm-list-page1: limit=2 in namespace fx, last item cm-b, list RV 265.
    let start = start_key(Some("fx"), "cm-b", true);
    assert_eq!(start, "/cm-b\0");
    assert_eq!(encode(265, &start), PAGE1_TOKEN);
    let token = decode(PAGE1_TOKEN).unwrap();
    assert_eq!(token, ContinueToken { rv: 265, start: "/cm-b\0".into() });
    assert_eq!(token.last_returned(true), Some((None, "cm-b")));
    assert!(!token.admits(Some("fx"), "cm-a", true));
    assert!(!token.admits(Some("fx"), "cm-b", true));
    assert!(token.admits(Some("fx"), "cm-c", true));
    assert!(token.admits(Some("fx"), "kube-root-ca.crt", true));
}

#[test]
fn fixture_bad_continue() {
    // Fixture err-bad-continue: continue=garbage decodes to bytes starting 0x81.
    assert_eq!(
        err("garbage"),
        r"continue key is not valid: invalid character '\u0081' looking for beginning of value"
    );
}

#[test]
fn encode_escapes_like_go() {
    // Go escapes <, >, & and U+2028 but writes DEL (0x7f) as it is.
    let want = concat!(
        r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"/a\u003cb\u003e\u0026\"\\\b\f\n\r\t\u0001"#,
        "\u{7f}",
        r#"\u2028é"}"#
    );
    assert_eq!(encode(-1, "/a<b>&\"\\\u{8}\u{c}\n\r\t\u{1}\u{7f}\u{2028}é"), b64(want));
    assert_eq!(
        encode(7, &start_key(Some("ns-1"), "n", false)),
        b64(r#"{"v":"meta.k8s.io/v1","rv":7,"start":"/ns-1/n\u0000"}"#)
    );
}

#[test]
fn base64_errors_report_go_offsets() {
    assert_eq!(err("a"), "continue key is not valid: illegal base64 data at input byte 0");
    assert_eq!(err("abcde"), "continue key is not valid: illegal base64 data at input byte 4");
    assert_eq!(err("ab=="), "continue key is not valid: illegal base64 data at input byte 2");
    assert_eq!(err("ab+c"), "continue key is not valid: illegal base64 data at input byte 2");
    assert_eq!(
        err(&format!("{PAGE1_TOKEN}=")),
        "continue key is not valid: illegal base64 data at input byte 71"
    );
    // Go skips newlines inside base64.
    let (head, tail) = PAGE1_TOKEN.split_at(9);
    assert_eq!(err(&format!("{head}\r\n{tail}")), "ok 265 \"/cm-b\\0\"");
    assert_eq!(err(""), "continue key is not valid: unexpected end of JSON input");
}

#[test]
fn json_errors_are_go_encoding_json_v1_messages() {
    let cases = [
        // The scanner's other messages are checked in `wire::gojson`.
        ("{", "unexpected end of JSON input"),
        ("x", "invalid character 'x' looking for beginning of value"),
        ("{\"v\":\"a\"}x", "invalid character 'x' after top-level value"),
        ("true", "json: cannot unmarshal bool into Go value of type storage.continueToken"),
        ("[]", "json: cannot unmarshal array into Go value of type storage.continueToken"),
        ("{\"rv\":\"1\"}", "json: cannot unmarshal string into Go struct field continueToken.rv of type int64"),
        ("{\"rv\":1.5}", "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64"),
        ("{\"rv\":99999999999999999999}", "json: cannot unmarshal number 99999999999999999999 into Go struct field continueToken.rv of type int64"),
        ("{\"v\":1,\"rv\":[]}", "json: cannot unmarshal number into Go struct field continueToken.v of type string"),
        ("{\"start\":{\"a\":[1]}}", "json: cannot unmarshal object into Go struct field continueToken.start of type string"),
    ];
    for (json, want) in cases {
        assert_eq!(err(&b64(json)), format!("continue key is not valid: {want}"), "for {json:?}");
    }
    let deep = "[".repeat(10_001);
    assert_eq!(
        err(&b64(&deep)),
        "continue key is not valid: invalid character '[' exceeded max depth"
    );
    let nested = format!(
        "{{\"x\":{}{},\"v\":\"meta.k8s.io/v1\",\"rv\":3,\"start\":\"/a\"}}",
        "[".repeat(9_999),
        "]".repeat(9_999)
    );
    assert_eq!(err(&b64(&nested)), "ok 3 \"/a\"");
}

#[test]
fn token_checks_follow_decode_continue() {
    let t = |json: &str| err(&b64(json));
    assert_eq!(
        t("null"),
        "continue key is not valid: server does not recognize this encoded version "
    );
    assert_eq!(
        t(r#"{"v":"meta.k8s.io/v2","rv":5,"start":"/a"}"#),
        "continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2"
    );
    assert_eq!(t(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"/a"}"#), "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
    assert_eq!(
        t(r#"{"v":"meta.k8s.io/v1","rv":5,"start":""}"#),
        "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
    );
    assert_eq!(
        t(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/a/../b"}"#),
        "continue key is not valid: /a/../b"
    );
    assert_eq!(
        t(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"../b"}"#),
        "continue key is not valid: ../b"
    );
    assert_eq!(
        t(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/a/"}"#),
        "continue key is not valid: /a/"
    );
    assert_eq!(
        t(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"//a"}"#),
        "continue key is not valid: //a"
    );
    assert_eq!(t(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/"}"#), "ok 5 \"/\"");
    assert_eq!(t(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/.a/..b"}"#), "ok 5 \"/.a/..b\"");
    // A key without its leading slash gets one; field names match case-insensitively.
    assert_eq!(t(r#"{"V":"meta.k8s.io/v1","Rv":-1,"ſtart":"cm-b\u0000"}"#), "ok -1 \"/cm-b\\0\"");
    // Unknown fields are skipped; a later duplicate wins; bad UTF-8 becomes U+FFFD per byte.
    assert_eq!(
        t(r#"{"x":[{"y":"]"}],"v":"meta.k8s.io/v1","rv":1,"rv":2,"start":"/\ud800\ud83d\ude00"}"#),
        "ok 2 \"/\u{fffd}😀\""
    );
    let raw = [br#"{"v":"meta.k8s.io/v1","rv":1,"start":"/"#.as_slice(), b"\xe2\x82A\"}"].concat();
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    assert_eq!(err(&token), "ok 1 \"/\u{fffd}\u{fffd}A\"");
}

#[test]
fn keys_across_namespaces_compare_as_bytes() {
    assert_eq!(relative_key(Some("fx"), "a", false), "/fx/a");
    assert_eq!(relative_key(Some("fx"), "a", true), "/a");
    assert_eq!(relative_key(None, "node-1", false), "/node-1");
    let token = ContinueToken { rv: 9, start: start_key(Some("a"), "x", false) };
    assert_eq!(token.start, "/a/x\0");
    assert_eq!(token.last_returned(false), Some((Some("a"), "x")));
    // "a-b/..." sorts before "a/..." because '-' < '/': the apiserver's order, not (ns, name).
    assert!(!token.admits(Some("a-b"), "z", false));
    assert!(token.admits(Some("a"), "y", false));
    assert!(!token.admits(Some("a"), "x", false));
    assert!(token.admits(Some("b"), "a", false));
    assert_eq!(compare_to_start(Some("a"), "x", false, "/a/x"), Ordering::Equal);
    assert_eq!(compare_to_start(None, "n", false, "/n\0"), Ordering::Less);
    let cluster = ContinueToken { rv: 9, start: start_key(None, "node-1", false) };
    assert_eq!(cluster.last_returned(false), Some((None, "node-1")));
    let hand_made = ContinueToken { rv: 9, start: "/m".into() };
    assert_eq!(hand_made.last_returned(true), None);
    assert!(hand_made.admits(None, "m", true));
    assert!(!hand_made.admits(None, "l", true));
}

proptest! {
    #[test]
    fn encode_decode_round_trips(rv in any::<i64>().prop_filter("rv 0 is refused", |rv| *rv != 0),
                                 ns in proptest::option::of("[a-z0-9.-]{1,12}"),
                                 name in "\\PC{1,20}",
                                 across in any::<bool>()) {
        let dots = |s: &str| s == "." || s == "..";
        prop_assume!(!name.contains('/') && !dots(&name) && !ns.as_deref().is_some_and(dots));
        let start = start_key(ns.as_deref(), &name, !across);
        let token = decode(&encode(rv, &start));
        prop_assert_eq!(token.clone(), Ok(ContinueToken { rv, start: start.clone() }));
        let token = token.unwrap_or(ContinueToken { rv, start });
        let expect_ns = ns.as_deref().filter(|_| across);
        prop_assert_eq!(token.last_returned(!across), Some((expect_ns, name.as_str())));
    }

    #[test]
    fn decode_never_panics(s in "\\PC*") {
        let _ = decode(&s);
    }

    #[test]
    fn decode_never_panics_on_json_shaped_bytes(parts in proptest::collection::vec(
        prop_oneof![
            Just("{"), Just("}"), Just("["), Just("]"), Just("\""), Just(":"), Just(","),
            Just("\"v\""), Just("\"rv\""), Just("\"start\""), Just("1"), Just("-"), Just("."),
            Just("e"), Just("true"), Just("null"), Just("\\"), Just("u"), Just("\u{81}"), Just(" "),
        ], 0..16)) {
        let _ = decode(&b64(&parts.concat()));
    }
}
