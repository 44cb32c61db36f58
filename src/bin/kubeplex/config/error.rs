//! A configuration that cannot run, as one line.

use std::fmt;

/// A configuration that cannot run: one line, naming the key (and the file and line).
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// A failure that is kubeplex's own, not the configuration's.
pub fn internal(e: impl fmt::Display) -> ConfigError {
    ConfigError(format!("internal error reading the settings: {e}"))
}
