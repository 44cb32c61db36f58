use super::*;

#[test]
fn strings_decode_as_go_does() {
    let s = |input: &[u8]| unquote(input).0;
    assert_eq!(s(br#""\ud83d\ude00""#), "\u{1f600}");
    assert_eq!(s(br#""\ud83d x""#), "\u{fffd} x");
    assert_eq!(s(br#""\udc00\ud83d\ude00""#), "\u{fffd}\u{1f600}");
    assert_eq!(s(br#""\ud83d\u0041""#), "\u{fffd}A");
    assert_eq!(s(br#""\n\t\/\\\"\b\f\r""#), "\n\t/\\\"\u{8}\u{c}\r");
    // Every invalid byte is its own replacement character.
    assert_eq!(s(b"\"a\xff\xfeb\""), "a\u{fffd}\u{fffd}b");
    assert_eq!(s(b"\"\xe2\x82\""), "\u{fffd}\u{fffd}");
    assert_eq!(s("\"h\u{e9}llo\"".as_bytes()), "h\u{e9}llo");
}
