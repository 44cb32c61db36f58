use super::*;

fn err(input: &[u8]) -> String {
    match check_valid(input, MAX_NESTING_DEPTH) {
        Ok(()) => "ok".to_owned(),
        Err(e) => e.to_string(),
    }
}

/// Messages of Go 1.2x's encoding/json v1 `checkValid` for the same bytes.
#[test]
fn syntax_errors_use_the_go_scanner_messages() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "unexpected end of JSON input"),
        (b"   ", "unexpected end of JSON input"),
        (b"{", "unexpected end of JSON input"),
        (b"{\"a\":1", "unexpected end of JSON input"),
        (b"[1,", "unexpected end of JSON input"),
        (b"\"abc", "unexpected end of JSON input"),
        (b"x", "invalid character 'x' looking for beginning of value"),
        (b"{\"a\":}", "invalid character '}' looking for beginning of value"),
        (b"{\"a\" 1}", "invalid character '1' after object key"),
        (b"{\"a\":1 \"b\":2}", "invalid character '\"' after object key:value pair"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"{a:1}", "invalid character 'a' looking for beginning of object key string"),
        (b"{1:2}", "invalid character '1' looking for beginning of object key string"),
        (b"tr", "invalid character ' ' in literal true (expecting 'u')"),
        (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
        (b"nul", "invalid character ' ' in literal null (expecting 'l')"),
        (b"nulx", "invalid character 'x' in literal null (expecting 'l')"),
        (b"fx", "invalid character 'x' in literal false (expecting 'a')"),
        (b"{\"a\":1}x", "invalid character 'x' after top-level value"),
        (b"{\"v\":\"a\"}x", "invalid character 'x' after top-level value"),
        (b"01", "invalid character '1' after top-level value"),
        (b"\"\\x\"", "invalid character 'x' in string escape code"),
        (b"\"\\u12g4\"", "invalid character 'g' in \\u hexadecimal character escape"),
        (b"-", "invalid character ' ' in numeric literal"),
        (b"-a", "invalid character 'a' in numeric literal"),
        (b"1.", "invalid character ' ' after decimal point in numeric literal"),
        (b"1.e5", "invalid character 'e' after decimal point in numeric literal"),
        (b"1e+", "invalid character ' ' in exponent of numeric literal"),
        (b"\"a\tb\"", "invalid character '\\t' in string literal"),
        (b"\"a\x01\"", "invalid character '\\x01' in string literal"),
        (b"\xc2\xa0", "invalid character '\u{c2}' looking for beginning of value"),
        (b"\xc3\xa9", "invalid character '\u{c3}' looking for beginning of value"),
        (b"\x80", "invalid character '\\u0080' looking for beginning of value"),
        (b"'", "invalid character '\\'' looking for beginning of value"),
        (b"'a'", "invalid character '\\'' looking for beginning of value"),
        (b"\\", "invalid character '\\\\' looking for beginning of value"),
        (b"[}", "invalid character '}' looking for beginning of value"),
        (b"{,}", "invalid character ',' looking for beginning of object key string"),
    ];
    for (input, message) in cases {
        assert_eq!(err(input), *message, "input {:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn nesting_is_refused_past_the_given_depth() {
    assert_eq!(check_valid(b"[{\"a\":[]}]", 3), Ok(()));
    assert_eq!(err(b"[{\"a\":[]}]"), "ok");
    assert_eq!(
        check_valid(b"[{\"a\":[]}]", 2).map_err(|e| e.to_string()),
        Err("invalid character '[' exceeded max depth".to_owned())
    );
}
