//! Age cells: apimachinery's `duration.HumanDuration` applied to `now - timestamp`, as the
//! printers' `translateTimestampSince` does.

use chrono::{DateTime, Utc};
use serde_json::Value;

const SECOND: i64 = 1_000_000_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
/// Unix seconds of Go's zero `time.Time`, January 1, year 1, 00:00:00 UTC.
const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// `duration.HumanDuration` (k8s.io/apimachinery/pkg/util/duration) for a Go `time.Duration`
/// given in nanoseconds. Go truncates toward zero in every division, as Rust's `/` does.
pub fn human_duration(d: i64) -> String {
    // Allow deviation no more than 2 seconds (excluded) to tolerate machine time
    // inconsistence: such a small negative age is "almost now".
    let seconds = d / SECOND;
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d / MINUTE;
    if minutes < 10 {
        let s = (d / SECOND) % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d / HOUR;
    if hours < 8 {
        let m = (d / MINUTE) % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{}h", hours / 24, h);
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{}d", hours / 24 / 365, dy);
    }
    format!("{}y", hours / 24 / 365)
}

/// `time.Parse(time.RFC3339, text)`: `Err` when unparseable, `Ok(None)` for Go's zero time
/// (0001-01-01T00:00:00Z), which `metav1.Time.IsZero()` treats as unset.
pub fn parse_rfc3339(text: &str) -> Result<Option<DateTime<Utc>>, chrono::ParseError> {
    let t = DateTime::parse_from_rfc3339(text)?.with_timezone(&Utc);
    if t.timestamp() == GO_ZERO_TIME_UNIX && t.timestamp_subsec_nanos() == 0 {
        return Ok(None);
    }
    Ok(Some(t))
}

/// A `metav1.Time` / `metav1.MicroTime` as stored; `None` is the zero time: absent, null,
/// empty or zero. (Unparseable text cannot be stored: Go fails to decode the object.)
pub fn parse_time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    parse_rfc3339(v?.as_str()?).ok().flatten()
}

/// `now.Sub(t)` in nanoseconds, saturating like Go's `Time.Sub`.
pub fn since(now: DateTime<Utc>, t: DateTime<Utc>) -> i64 {
    match now.signed_duration_since(t).num_nanoseconds() {
        Some(n) => n,
        None if now >= t => i64::MAX,
        None => i64::MIN,
    }
}

/// `translateTimestampSince`: "<unknown>" for the zero time, else the human duration.
pub fn translate_since(v: Option<&Value>, now: DateTime<Utc>) -> String {
    match parse_time(v) {
        Some(t) => human_duration(since(now, t)),
        None => "<unknown>".to_string(),
    }
}

#[cfg(test)]
mod tests;
