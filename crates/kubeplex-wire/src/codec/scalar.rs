//! The leaf types with hand-written marshalling: metav1.Time, metav1.MicroTime,
//! metav1.Duration and `[]byte`.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use chrono::{DateTime, Datelike};

/// Seconds since the Unix epoch of Go's zero `time.Time` (0001-01-01T00:00:00Z), which
/// metav1.Time writes as JSON `null` and as an empty protobuf message.
pub const ZERO_TIME_SECS: i64 = -62_135_596_800;

/// A point in time as Go holds it: seconds since the epoch and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    pub secs: i64,
    pub nanos: u32,
}

impl Instant {
    pub const ZERO: Instant = Instant { secs: ZERO_TIME_SECS, nanos: 0 };

    pub fn is_zero(self) -> bool {
        self == Self::ZERO
    }
}

/// Parses what `time.Parse(time.RFC3339, s)` accepts: an upper-case `T` and `Z`, optional
/// fractional seconds, and a numeric offset.
pub fn parse_rfc3339(s: &str) -> Option<Instant> {
    if s.contains(['t', 'z', ' ']) {
        return None;
    }
    let t = DateTime::parse_from_rfc3339(s).ok()?;
    // chrono reads a leap second ("…:60") as nanos past 1e9; Go refuses it.
    let nanos = t.timestamp_subsec_nanos();
    (nanos < 1_000_000_000).then_some(Instant { secs: t.timestamp(), nanos })
}

/// metav1.Time's JSON form: UTC, whole seconds. `None` for a year Go's RFC 3339 layout cannot
/// write back (outside 0000–9999).
pub fn format_time(t: Instant) -> Option<String> {
    let dt = DateTime::from_timestamp(t.secs, 0)?;
    (0..=9999).contains(&dt.year()).then(|| dt.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// metav1.MicroTime's JSON form: UTC with exactly six fractional digits.
pub fn format_micro_time(t: Instant) -> Option<String> {
    let dt = DateTime::from_timestamp(t.secs, t.nanos - t.nanos % 1000)?;
    (0..=9999).contains(&dt.year()).then(|| dt.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
}

/// Go's `time.Duration.String()`, e.g. "1h2m3.5s", "1.5ms", "0s".
pub fn format_duration(d: i64) -> String {
    let u = d.unsigned_abs();
    let sign = if d < 0 { "-" } else { "" };
    if u == 0 {
        return "0s".to_owned();
    }
    if u < 1_000_000_000 {
        let (prec, unit) = match u {
            0..1_000 => (0, "ns"),
            1_000..1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        return format!("{sign}{}{unit}", fraction(u, prec));
    }
    let whole = u / 1_000_000_000;
    let frac = fraction(u % 1_000_000_000, 9);
    // `fraction` of a value below one second reads "0.5" or "0"; keep only the ".5".
    let secs = format!("{}{}", whole % 60, frac.trim_start_matches('0'));
    let (minutes, hours) = (whole / 60 % 60, whole / 3600);
    match (hours, minutes) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

/// `v / 10^prec` with the fraction's trailing zeros (and a bare point) dropped.
fn fraction(v: u64, prec: u32) -> String {
    let div = 10u64.pow(prec);
    let (int, frac) = (v / div, v % div);
    if frac == 0 {
        return int.to_string();
    }
    let digits = format!("{frac:0width$}", width = prec as usize);
    format!("{int}.{}", digits.trim_end_matches('0'))
}

pub use crate::gotime::parse_duration;

/// Go's base64.StdEncoding as encoding/json uses it for `[]byte`: padded, and lenient about
/// the unused bits of the last character.
const GO_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

pub fn base64_encode(bytes: &[u8]) -> String {
    GO_BASE64.encode(bytes)
}

/// Decodes a JSON `[]byte` string; Go's decoder skips `\r` and `\n`.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    if s.contains(['\r', '\n']) {
        let cleaned: String = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        return GO_BASE64.decode(cleaned).ok();
    }
    GO_BASE64.decode(s).ok()
}

#[cfg(test)]
mod tests;
