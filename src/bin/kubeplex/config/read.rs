//! Reading settings: the defaults, a YAML file over them, the command line over that; and
//! printing them back as a file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};

use super::error::{internal, ConfigError};
use super::settings::{camel_case, Settings};

/// The file's `apiVersion` (optional; when given it must be this one).
pub const API_VERSION: &str = "config.kubeplex.io/v1alpha1";
/// The file's `kind` (optional; when given it must be this one).
pub const KIND: &str = "KubeplexConfiguration";

/// A configuration file larger than this is refused before it is parsed (the examples are a
/// few hundred bytes; no setting needs more).
pub(super) const MAX_FILE_BYTES: u64 = 1 << 20;

impl Settings {
    /// Every default: the flags' defaults, with no variable read.
    pub fn defaults() -> Settings {
        let command = Settings::augment_args(clap::Command::new("defaults"))
            .mut_args(|a| a.env(None::<&str>));
        let matches = command.try_get_matches_from(["defaults"]);
        // The defaults are constants of this file: they parse (tests/config check it), so a
        // failure here is a bug in a default_value.
        matches
            .and_then(|m| Settings::from_arg_matches(&m))
            .unwrap_or_else(|e| panic!("a default of kubeplex's settings does not parse: {e}"))
    }

    /// A file's text over the defaults; the error starts with the line (`4: key: ...`) when
    /// known.
    pub fn from_yaml(text: &str) -> Result<Settings, ConfigError> {
        // An empty file (or one of comments) is all defaults.
        let parsed: Result<Option<Settings>, _> = serde_saphyr::from_str(text);
        match parsed {
            Ok(settings) => Ok(settings.unwrap_or_else(Settings::defaults)),
            Err(e) => Err(ConfigError(yaml_error_line(&e, text))),
        }
    }

    /// `self` with the values given as flags or variables in `matches` (the command line of
    /// `serve` or `config print`) put over it.
    /// Also returns the keys given so.
    pub fn overlay_command_line(
        self,
        matches: &ArgMatches,
    ) -> Result<(Settings, Vec<String>), ConfigError> {
        let given: Settings = Settings::from_arg_matches(matches)
            .map_err(|e| ConfigError(e.to_string().trim().to_string()))?;
        let mut base = serde_json::to_value(&self).map_err(internal)?;
        let given = serde_json::to_value(&given).map_err(internal)?;
        let (Some(base_map), Some(given_map)) = (base.as_object_mut(), given.as_object()) else {
            return Err(internal("settings are not a map"));
        };
        let mut keys = Vec::new();
        for id in Settings::ids() {
            let explicit = matches!(
                matches.value_source(&id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            );
            if explicit {
                let key = camel_case(&id);
                if let Some(v) = given_map.get(&key) {
                    base_map.insert(key.clone(), v.clone());
                    keys.push(key);
                }
            }
        }
        let settings = serde_json::from_value(base).map_err(|e| ConfigError(e.to_string()))?;
        Ok((settings, keys))
    }

    /// The clap ids of every setting (the field names).
    pub(super) fn ids() -> Vec<String> {
        Settings::augment_args(clap::Command::new("ids"))
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect()
    }

    /// The settings as a file (`config print`).
    pub fn to_yaml(&self) -> String {
        let mut printed = self.clone();
        printed.api_version = Some(API_VERSION.to_string());
        printed.kind = Some(KIND.to_string());
        serde_saphyr::to_string(&printed).unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }
}

/// A configuration file's text, kept to name the line of a key in errors.
pub struct File {
    path: PathBuf,
    text: String,
}

impl File {
    /// Reads the file (at most [`MAX_FILE_BYTES`]).
    pub fn read(path: &Path) -> Result<File, ConfigError> {
        let shown = path.display();
        let size = std::fs::metadata(path)
            .map_err(|e| ConfigError(format!("{shown}: cannot read the configuration: {e}")))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(ConfigError(format!(
                "{shown}: the configuration is {size} bytes, more than the {MAX_FILE_BYTES} allowed"
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{shown}: cannot read the configuration: {e}")))?;
        Ok(File { path: path.to_path_buf(), text })
    }

    /// The file over the defaults.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        Settings::from_yaml(&self.text)
            .map_err(|e| ConfigError(format!("{}:{}", self.path.display(), e.0)))
    }

    /// `error` (from checking settings that came from this file) with the file and the line
    /// of the key it names, when the file sets that key.
    pub fn locate(&self, error: ConfigError) -> ConfigError {
        let Some((key, _)) = error.0.split_once(':') else { return error };
        let line = self.text.lines().position(|l| {
            l.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(':'))
        });
        match line {
            Some(i) => ConfigError(format!("{}:{}: {}", self.path.display(), i + 1, error.0)),
            None => error,
        }
    }
}

/// One line from a YAML error: `LINE: KEY: message`, with "did you mean" for a misspelled key.
fn yaml_error_line(e: &serde_saphyr::Error, text: &str) -> String {
    let plain = e.without_snippet().to_string();
    // The message without the location the library appends (the line is printed first).
    let message = plain.lines().next().unwrap_or("invalid YAML").trim();
    let message = message.split(" at line ").next().unwrap_or(message).trim();
    let line = e.location().map(|at| at.line()).filter(|l| *l > 0);
    if let Some(key) = unknown_key(message) {
        let hint = match closest_key(key) {
            Some(near) => format!("did you mean {near:?}?"),
            None => "`kubeplex config print` lists every key".to_string(),
        };
        return match line {
            Some(l) => format!("{l}: unknown key {key:?} ({hint})"),
            None => format!(" unknown key {key:?} ({hint})"),
        };
    }
    // A bad value: name the key its line sets (the file is flat: one key per line).
    let key = line
        .and_then(|l| text.lines().nth(l as usize - 1))
        .and_then(|l| l.split_once(':'))
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric()));
    match (line, key) {
        (Some(l), Some(k)) => format!("{l}: {k}: {message}"),
        (Some(l), None) => format!("{l}: {message}"),
        _ => format!(" {message}"),
    }
}

/// The key of serde's "unknown field `x`, expected one of ..." message.
fn unknown_key(message: &str) -> Option<&str> {
    let rest = message.split("unknown field `").nth(1)?;
    rest.split('`').next()
}

/// The known key nearest to a misspelled one (edit distance at most 3).
pub(super) fn closest_key(key: &str) -> Option<String> {
    let known: BTreeSet<String> = serde_json::to_value(Settings::defaults())
        .ok()?
        .as_object()?
        .keys()
        .cloned()
        .chain(["apiVersion".to_string(), "kind".to_string()])
        .collect();
    known
        .into_iter()
        .map(|k| (strsim::levenshtein(&k.to_lowercase(), &key.to_lowercase()), k))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, k)| k)
}
