//! Go's `time.Duration` text, as kube-apiserver reads it (`metav1.Duration` fields, flags) and
//! kubeplex's settings take it: one parser for both.

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units ns, us (µs, μs), ms,
/// s, m, h, optionally signed; "0" alone is allowed.
pub fn parse_duration(s: &str) -> Option<i64> {
    let (negative, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.bytes().take_while(u8::is_ascii_digit).count();
                a.split_at(n)
            }
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_len = after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut frac_part: u128 = 0;
        let mut frac_scale = scale;
        for digit in frac.bytes() {
            frac_scale /= 10;
            frac_part += u128::from(digit - b'0') * frac_scale;
        }
        // frac_part < scale, so only the whole part and the running total can overflow.
        total = int.checked_mul(scale)?.checked_add(frac_part)?.checked_add(total)?;
        if total > 1u128 << 63 {
            return None;
        }
        rest = after;
    }
    match negative {
        true => 0i64.checked_sub_unsigned(u64::try_from(total).ok()?),
        false => i64::try_from(total).ok(),
    }
}
