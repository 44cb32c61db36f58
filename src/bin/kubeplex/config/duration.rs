//! Durations as Kubernetes components write them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A duration as Kubernetes components write them (Go's `time.ParseDuration`, as in
/// metav1.Duration): `25s`, `1m30s`, `500ms`, `1.5h`. Printed in the same form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(pub std::time::Duration);

impl FromStr for Duration {
    type Err = String;

    /// Go's grammar: `0`, or one or more decimal numbers each with a unit (ns, us, µs, ms, s,
    /// m, h). No sign: kubeplex has no negative durations.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a duration (like 30s, 5m, 1h30m, 500ms)");
        if s.starts_with(['-', '+']) {
            return Err(bad());
        }
        let nanos = kubeplex::wire::gotime::parse_duration(s).ok_or_else(bad)?;
        Ok(Duration(std::time::Duration::from_nanos(nanos.unsigned_abs())))
    }
}

impl fmt::Display for Duration {
    /// The shortest form that parses back to the same value: `0s`, `25s`, `1h30m`, `1m500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let sub = self.0.subsec_nanos();
        if secs == 0 && sub == 0 {
            return f.write_str("0s");
        }
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        match sub {
            0 => Ok(()),
            n if n % 1_000_000 == 0 => write!(f, "{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => write!(f, "{}us", n / 1_000),
            n => write!(f, "{n}ns"),
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
