use super::*;

#[test]
fn canonical_forms_match_go() {
    // Expected values from resource.Quantity's own tests (quantity_test.go) and kubectl.
    let cases = [
        ("0", "0"),
        ("00", "0"),
        ("-0", "0"),
        ("1", "1"),
        ("100m", "100m"),
        ("0.1", "100m"),
        ("1000m", "1"),
        ("1500m", "1500m"),
        ("1.5", "1500m"),
        ("1k", "1k"),
        ("1000", "1k"),
        ("1024", "1024"),
        ("1Ki", "1Ki"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("3Mi", "3Mi"),
        ("1.5Gi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("0.5Ki", "512"),
        ("1.1Ki", "1126400m"),
        ("1e3", "1e3"),
        ("1E3", "1E3"),
        ("1e-3", "1e-3"),
        ("100e-3", "100e-3"),
        ("12e4", "120e3"),
        ("1.0001n", "2n"),
        ("0.1n", "1n"),
        ("+1k", "+1k"),
        ("0003Mi", "0003Mi"),
        ("-5", "-5"),
        ("-1.5", "-1500m"),
        ("1000E", "1"),
        (" 2Gi ", "2Gi"),
        (".5", "500m"),
        ("123456789012345678901234567890", "123456789012345678901234567890"),
        ("8Ei", "9223372036854775807"),
    ];
    for (input, want) in cases {
        assert_eq!(canonical(input).as_deref(), Ok(want), "input {input:?}");
    }
}

/// TestQuantityString and TestQuantityParseEmit of k8s.io/apimachinery: canonical strings
/// parse to themselves; alternates parse to the canonical string.
#[test]
fn go_quantity_test_tables() {
    let canonical_alternates = [
        ("1Gi", "1024Mi"),
        ("300Mi", "307200Ki"),
        ("6Ki", ""),
        ("1001Gi", "1025024Mi"),
        ("1Ti", "1024Gi"),
        ("5", "5000m"),
        ("500m", "0.5"),
        ("1G", "1000M"),
        ("1G", "0.001T"),
        ("1m", "1000u"),
        ("80m", ""),
        ("1080m", "1.08"),
        ("1080m", "1080000000n"),
        ("300M", ""),
        ("1T", ""),
        ("1234567M", ""),
        ("1234567m", ""),
        ("3k", ""),
        ("1025", ""),
        ("1e9", ".001e12"),
        ("1e-3", "0.001e0"),
        ("1e-9", "1000e-12"),
        ("80e-3", ""),
        ("300e6", ""),
        ("1e12", ""),
        ("3e3", ""),
        ("0", "00"),
        ("1n", ""),
        ("1080n", ""),
        ("1u", ""),
        ("1080u", ""),
    ];
    for (expect, alternate) in canonical_alternates {
        assert_eq!(canonical(expect).as_deref(), Ok(expect));
        if !alternate.is_empty() {
            assert_eq!(canonical(alternate).as_deref(), Ok(expect), "{alternate}");
        }
    }
    let parse_emit = [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ];
    for (input, expect) in parse_emit {
        assert_eq!(canonical(input).as_deref(), Ok(expect), "{input}");
        let negative = format!("-{expect}");
        assert_eq!(canonical(&format!("-{input}")), Ok(negative), "-{input}");
    }
}

#[test]
fn malformed_quantities_are_refused_with_go_errors() {
    assert_eq!(canonical(""), Err(QuantityError::FormatWrong));
    assert_eq!(canonical("1.5.5"), Err(QuantityError::FormatWrong));
    assert_eq!(canonical("abc"), Err(QuantityError::FormatWrong));
    assert_eq!(canonical("1Q"), Err(QuantityError::FormatWrong));
    assert_eq!(canonical("1kk"), Err(QuantityError::Suffix));
    assert_eq!(canonical("1e"), Err(QuantityError::Suffix));
    assert_eq!(QuantityError::Suffix.to_string(), "unable to parse quantity's suffix");
}

proptest::proptest! {
    #[test]
    fn never_panics(s in "\\PC{0,40}") {
        let _ = canonical(&s);
    }

    #[test]
    fn never_panics_on_extreme_numbers(
        s in "[+-]?[0-9]{0,45}(\\.[0-9]{0,45})?(Ki|Ei|E|n|e-?[0-9]{1,11})?"
    ) {
        let _ = canonical(&s);
    }

    #[test]
    fn canonical_is_stable(s in "[+-]?[0-9]{0,20}(\\.[0-9]{0,12})?(|m|k|M|G|Ki|Mi|Gi|e-?[0-9]{1,2})") {
        if let Ok(first) = canonical(&s) {
            proptest::prop_assert_eq!(canonical(&first), Ok(first.clone()));
        }
    }
}
