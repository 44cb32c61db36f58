use super::*;

#[test]
fn quote_matches_strconv_quote() {
    assert_eq!(quote("a-b"), r#""a-b""#);
    assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
    assert_eq!(quote("\u{0}\u{7}\t\u{7f}"), r#""\x00\a\t\x7f""#);
    assert_eq!(quote("é\u{81}\u{a0}\u{ad}"), r#""é\u0081\u00a0\u00ad""#);
    assert_eq!(quote("日本\u{200b}\u{e000}"), r#""日本\u200b\ue000""#);
    assert_eq!(quote("\u{f0000}😀"), r#""\U000f0000😀""#);
}
