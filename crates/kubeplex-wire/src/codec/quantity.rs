//! resource.Quantity: what `ParseQuantity(s).String()` gives, which is what kube-apiserver
//! writes for a quantity it was sent as `s`, in JSON and in protobuf alike.
//!
//! Go keeps the value as an int64 with a decimal scale when it fits, else as an arbitrary
//! precision decimal. Here the value is an `i128` mantissa with a decimal exponent; a quantity
//! too precise for that (about 38 significant digits after applying a binary suffix) is
//! refused with [`QuantityError::TooPrecise`] where Go would still accept it.

use thiserror::Error;

/// Why a quantity string is refused. The first three messages are the apiserver's own.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
    #[error("quantity has more precision than this codec represents")]
    TooPrecise,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// `mantissa * 10^exponent`.
#[derive(Debug, Clone, Copy)]
struct Dec {
    mantissa: i128,
    exponent: i64,
}

/// The scale Go rounds every quantity up to (nano).
const NANO: i64 = -9;
/// Go's int64 fast path holds at most this many decimal digits (`maxInt64Factors`).
const MAX_INT64_FACTORS: i64 = 18;

/// The canonical string of the quantity `s` (after trimming spaces, as UnmarshalJSON does).
pub fn canonical(s: &str) -> Result<String, QuantityError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    if s == "0" {
        return Ok(s.to_owned());
    }
    let parts = scan(s)?;
    let (base, exponent, mut format) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;

    // ParseQuantity's int64 fast path, which keeps the caller's string when it already looks
    // canonical (so "+1k" or "0003Mi" are written back as sent).
    let (num_len, denom_len) = (parts.num.len() as i64, parts.denom.len() as i64);
    let (precision, mut scale, multiplier) = match format {
        Format::DecimalExponent | Format::DecimalSI => {
            (MAX_INT64_FACTORS - (num_len + denom_len), exponent, 1i64)
        }
        Format::BinarySI if exponent >= 0 && denom_len == 0 => {
            (15 - num_len - exponent * 3 / 10 - 1, 0, 1i64 << exponent.min(62))
        }
        Format::BinarySI => (-1, 0, 1),
    };
    if precision >= 0 {
        scale -= denom_len;
        if scale >= NANO {
            let shifted = format!("{}{}", parts.num, parts.denom);
            let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
            if let Some(result) = value.checked_mul(multiplier) {
                let reuse = match format {
                    Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                if reuse {
                    return Ok(s.to_owned());
                }
                let result = if parts.positive { result } else { -result };
                let dec = Dec { mantissa: result.into(), exponent: scale };
                return render(dec, format);
            }
        }
    }

    // The arbitrary-precision path: exact value, rounded up to nano, binary capped at int64.
    let mut dec = parse_decimal(parts.value)?;
    dec.exponent = match base {
        10 => dec.exponent.checked_add(exponent).ok_or(QuantityError::TooPrecise)?,
        _ => {
            let factor = 1i128.checked_shl(u32::try_from(exponent).unwrap_or(u32::MAX));
            dec.mantissa = factor
                .and_then(|f| dec.mantissa.checked_mul(f))
                .ok_or(QuantityError::TooPrecise)?;
            dec.exponent
        }
    };
    // i128::MIN has no absolute value; it is past what this codec represents anyway.
    if dec.mantissa == i128::MIN {
        return Err(QuantityError::TooPrecise);
    }
    if dec.mantissa != 0 && dec.exponent < NANO {
        dec = round_away(dec, NANO);
    }
    let max = Dec { mantissa: i64::MAX.into(), exponent: 0 };
    if format == Format::BinarySI && cmp_abs(dec, max) == std::cmp::Ordering::Greater {
        dec = Dec { mantissa: max.mantissa * dec.mantissa.signum(), exponent: 0 };
    }
    if format == Format::BinarySI && cmp_abs(dec, Dec { mantissa: 1, exponent: 0 }).is_lt() {
        format = Format::DecimalSI;
    }
    render(dec, format)
}

struct Parts<'a> {
    positive: bool,
    /// The numeric part as written, sign included.
    value: &'a str,
    /// Integer digits without leading zeros ("0" when none are left).
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Go's `parseQuantityString`, including its quirks (".5" and "1." are numbers).
fn scan(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while b.get(pos) == Some(&b'0') {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts { positive, value: "0", num: "0", denom: "", suffix: "" });
    }
    let num_start = pos;
    while b.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    let num = match &s[num_start..pos] {
        "" => "0",
        n => n,
    };
    let mut denom = "";
    if b.get(pos) == Some(&b'.') {
        pos += 1;
        let start = pos;
        while b.get(pos).is_some_and(u8::is_ascii_digit) {
            pos += 1;
        }
        denom = &s[start..pos];
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while b.get(pos).is_some_and(|c| b"eEinumkKMGTP".contains(c)) {
        pos += 1;
    }
    if matches!(b.get(pos), Some(b'-' | b'+')) {
        pos += 1;
    }
    while b.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts { positive, value, num, denom, suffix: &s[suffix_start..] })
}

/// The suffixer's `interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E']).filter(|r| !r.is_empty())?;
            // Go parses an int64 and keeps its low 32 bits; an exponent outside i32 is refused.
            let e: i32 = rest.parse().ok()?;
            Some((10, e.into(), Format::DecimalExponent))
        }
    }
}

/// inf.Dec's `SetString` of the numeric part.
fn parse_decimal(value: &str) -> Result<Dec, QuantityError> {
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(QuantityError::Numeric);
    }
    let mut mantissa: i128 = 0;
    for c in int.bytes().chain(frac.bytes()) {
        let digit = i128::from(c.wrapping_sub(b'0'));
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(digit))
            .ok_or(QuantityError::TooPrecise)?;
    }
    let exponent = -(frac.len() as i64);
    Ok(Dec { mantissa: if negative { -mantissa } else { mantissa }, exponent })
}

fn pow10(n: i64) -> Option<i128> {
    10i128.checked_pow(u32::try_from(n).ok()?)
}

/// Rounds `d` to `exponent` (greater than its own), away from zero (inf.RoundUp).
fn round_away(d: Dec, exponent: i64) -> Dec {
    let sign = d.mantissa.signum();
    let magnitude = match pow10(exponent - d.exponent) {
        Some(div) => {
            let q = d.mantissa.abs() / div;
            if d.mantissa.abs() % div == 0 {
                q
            } else {
                q + 1
            }
        }
        // Dividing by more than 10^38 leaves only the rounding.
        None => 1,
    };
    Dec { mantissa: sign * magnitude, exponent }
}

/// Compares |a| with |b|; a value too large to line up counts as the larger.
fn cmp_abs(a: Dec, b: Dec) -> std::cmp::Ordering {
    let (a_m, b_m) = (a.mantissa.abs(), b.mantissa.abs());
    if a.exponent >= b.exponent {
        match pow10(a.exponent - b.exponent).and_then(|p| a_m.checked_mul(p)) {
            Some(a_m) => a_m.cmp(&b_m),
            None => std::cmp::Ordering::Greater,
        }
    } else {
        match pow10(b.exponent - a.exponent).and_then(|p| b_m.checked_mul(p)) {
            Some(b_m) => a_m.cmp(&b_m),
            None => std::cmp::Ordering::Less,
        }
    }
}

/// Go's `CanonicalizeBytes`.
fn render(d: Dec, format: Format) -> Result<String, QuantityError> {
    if d.mantissa == 0 {
        return Ok("0".to_owned());
    }
    let mut format = format;
    let mut rounded = d;
    if format == Format::BinarySI {
        if cmp_abs(d, Dec { mantissa: 1024, exponent: 0 }).is_lt() {
            format = Format::DecimalSI;
        } else if d.exponent < 0 {
            rounded = round_away(d, 0);
            if cmp_abs(rounded, d).is_ne() {
                // Showing a rounded binary value would lose precision.
                format = Format::DecimalSI;
            }
        }
    }
    if format == Format::BinarySI {
        let mut amount = rounded.mantissa;
        if rounded.exponent > 0 {
            amount = pow10(rounded.exponent)
                .and_then(|p| amount.checked_mul(p))
                .ok_or(QuantityError::TooPrecise)?;
        }
        let mut exp = 0;
        while amount % 1024 == 0 {
            amount /= 1024;
            exp += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].get(exp).copied().unwrap_or("");
        return Ok(format!("{amount}{suffix}"));
    }
    let (mut amount, mut exp) = (d.mantissa, d.exponent);
    while amount % 10 == 0 {
        amount /= 10;
        exp += 1;
    }
    while exp % 3 != 0 {
        amount = amount.checked_mul(10).ok_or(QuantityError::TooPrecise)?;
        exp -= 1;
    }
    let suffix = match format {
        // An exponent with no SI suffix (beyond E) gets none at all, as in Go.
        Format::DecimalSI => match exp {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => "",
        }
        .to_owned(),
        _ if exp == 0 => String::new(),
        _ => format!("e{exp}"),
    };
    Ok(format!("{amount}{suffix}"))
}

#[cfg(test)]
mod tests;
