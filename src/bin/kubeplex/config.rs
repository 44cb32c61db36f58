//! kubeplex's settings: one YAML file (`--config`), `KUBEPLEX_*` environment variables and
//! flags, in that order of strength (a flag beats a variable, which beats the file, which beats
//! the default), resolved and checked into one [`Config`] before any socket binds.
//!
//! There is one list of settings, [`Settings`]: a flag `--watch-queue` is the file's key
//! `watchQueue` and the variable `KUBEPLEX_WATCH_QUEUE` (the one exception: `--cache`, repeated,
//! is the list `caches`). `kubeplex config print` shows every key with its effective value, and
//! its output is itself a valid file.
//!
//! Errors are one line naming the key, and for the file its path and line, like
//! `kubeplex.yaml:4: unknown key "watchQueu" (did you mean "watchQueue"?)`.

mod duration;
mod error;
mod read;
mod resolve;
mod settings;

use std::path::Path;

use clap::{ArgMatches, Args};

pub use self::error::ConfigError;
pub use self::read::File;
pub use self::resolve::{Config, NODE_NAME_PLACEHOLDER};
use self::settings::camel_case;
pub use self::settings::{LogFormat, Settings};

/// The checked settings of a command line (`serve`, `config print`): the file named by
/// `--config` (or `KUBEPLEX_CONFIG`) over the defaults, then the variables and flags given in
/// `matches` over that. An error about a key the file set names the file and line.
pub fn load(config_file: Option<&Path>, matches: &ArgMatches) -> Result<Config, ConfigError> {
    let file = config_file.map(File::read).transpose()?;
    let base = match &file {
        Some(f) => f.settings()?,
        None => Settings::defaults(),
    };
    let (settings, given) = base.overlay_command_line(matches)?;
    settings.resolve().map_err(|e| match &file {
        // A key given as a flag or variable is not the file's.
        Some(f) if !given.iter().any(|k| e.0.starts_with(&format!("{k}:"))) => f.locate(e),
        _ => e,
    })
}

/// How a user sets the key `key` (`adminListen`): `adminListen: --admin-listen,
/// KUBEPLEX_ADMIN_LISTEN` — the file's key, and the flag and variable clap reads it from.
pub fn setting_names(key: &str) -> String {
    let command = Settings::augment_args(clap::Command::new("serve"));
    let arg = command.get_arguments().find(|a| camel_case(a.get_id().as_str()) == key);
    let flag = arg.and_then(|a| a.get_long()).map(|l| format!(", --{l}")).unwrap_or_default();
    let var = arg.and_then(|a| a.get_env()).map(|e| format!(", {}", e.to_string_lossy()));
    format!("{key}:{}{}", &flag, var.unwrap_or_default()).replacen(":,", ":", 1)
}

/// A listener that could not be bound, named as the user sets it (`names`: the file's key, the
/// flag and the variable): `cannot listen on 127.0.0.1:8001 (listen: --listen, KUBEPLEX_LISTEN):
/// Address already in use (os error 98)`.
pub fn name_the_setting(
    e: kubeplex::serve::StartError,
    names: impl Fn(&str) -> String,
) -> anyhow::Error {
    match e {
        kubeplex::serve::StartError::Bind(b) => {
            anyhow::anyhow!("cannot listen on {} ({}): {}", b.addr, names(b.setting), b.error)
        }
        e => e.into(),
    }
}

/// `kubeplex config check FILE`: the file alone (no variables or flags), checked.
pub fn check(path: &Path) -> Result<Config, ConfigError> {
    let file = File::read(path)?;
    let mut settings = file.settings()?;
    // A node's name reaches a DaemonSet's kubeplex from the downward API when it starts
    // (KUBEPLEX_NODE_NAME), never from the file: the caches that use it are checked with a
    // stand-in.
    if settings.node_name.is_none()
        && settings
            .caches
            .iter()
            .chain(&settings.cache_scopes)
            .any(|c| c.contains(NODE_NAME_PLACEHOLDER))
    {
        settings.node_name = Some(CHECK_NODE_NAME.to_string());
    }
    settings.resolve().map_err(|e| file.locate(e))
}

/// The node name `config check` puts in `{nodeName}` when the file sets none.
const CHECK_NODE_NAME: &str = "node-name";

#[cfg(test)]
mod tests;
