//! Reading the settings files ([`RoceSettings`]) and rewriting one value
//! of one ([`write_setting`]), and which files those are
//! ([`SettingsPaths`]).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::{FILE_NAME, Key, PortSettings, SETTINGS_ENV, SYSTEM_FILE, SettingError};

/// Which settings files are read, in order (a later file's settings win,
/// key by key), and which one `ferroce config set` writes.
///
/// * `$FERROCE_CONFIG` set (not empty): that file alone, read and written.
/// * Otherwise: `/etc/ferroce/rdma_cm.conf` (the system's), then the
///   user's `$XDG_CONFIG_HOME/ferroce/rdma_cm.conf`, or
///   `~/.config/ferroce/rdma_cm.conf` without `XDG_CONFIG_HOME`; the
///   user's is written (`--system` writes the system's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsPaths {
    /// Read in this order; missing files are skipped.
    pub read: Vec<PathBuf>,
    /// Written by `set`; `None` when there is no home directory to put it
    /// in (no `HOME` nor `XDG_CONFIG_HOME`).
    pub write: Option<PathBuf>,
}

impl SettingsPaths {
    /// The files the environment chooses (see the type's documentation),
    /// as [`crate::env::Env`] read it.
    pub fn from_env() -> Self {
        let env = crate::env::Env::get();
        Self::from_vars(
            env.config.clone(),
            env.xdg_config_home.clone(),
            env.home.clone(),
        )
    }

    /// [`from_env`](Self::from_env) for given values of `FERROCE_CONFIG`,
    /// `XDG_CONFIG_HOME` and `HOME`.
    pub fn from_vars(
        explicit: Option<PathBuf>,
        xdg_config_home: Option<PathBuf>,
        home: Option<PathBuf>,
    ) -> Self {
        if let Some(file) = explicit {
            return Self {
                read: vec![file.clone()],
                write: Some(file),
            };
        }
        // The XDG base directory rules: a relative XDG_CONFIG_HOME is
        // invalid and ignored.
        let config = xdg_config_home
            .filter(|p| p.is_absolute())
            .or_else(|| home.map(|h| h.join(".config")));
        let user = config.map(|c| c.join("ferroce").join(FILE_NAME));
        let mut read = vec![PathBuf::from(SYSTEM_FILE)];
        read.extend(user.clone());
        Self { read, write: user }
    }
}

/// The settings of every port some file names; the others have the
/// defaults (RoCE v2, ToS 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoceSettings {
    ports: BTreeMap<(String, u8), PortSettings>,
    /// Each file looked at, and whether it was there.
    files: Vec<(PathBuf, bool)>,
}

impl RoceSettings {
    /// Reads the files the environment names ([`SettingsPaths::from_env`]).
    pub fn load() -> Result<Self, ConfigError> {
        Self::load_from(&SettingsPaths::from_env().read)
    }

    /// Reads `files` in order, a later one's settings over an earlier
    /// one's; a file that does not exist, or that this user may not read,
    /// is skipped.
    pub fn load_from(files: &[PathBuf]) -> Result<Self, ConfigError> {
        let mut settings = Self::default();
        for path in files {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    settings.apply(path, &text)?;
                    settings.files.push((path.clone(), true));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    settings.files.push((path.clone(), false));
                }
                // As git does with its config files: a file this user may
                // not read is skipped with a warning. The common case is a
                // program run under another uid that keeps the caller's
                // HOME (`setpriv`, `sudo -u`), whose ~/.config is not its
                // to read; failing every rdma_cm call for it helps no one.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    tracing::warn!(file = %path.display(), "settings file skipped: permission denied");
                    settings.files.push((path.clone(), false));
                }
                Err(source) => return Err(ConfigError::io("reading", path, source)),
            }
        }
        Ok(settings)
    }

    /// The settings of one file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut settings = Self::default();
        settings.apply(path, text)?;
        Ok(settings)
    }

    fn apply(&mut self, path: &Path, text: &str) -> Result<(), ConfigError> {
        for (line, key, value) in parse_lines(text, path)? {
            let port = self
                .ports
                .entry((key.device.clone(), key.port))
                .or_default();
            key.attribute
                .set_in(port, value)
                .map_err(|error| ConfigError::at(path, line, error))?;
        }
        Ok(())
    }

    /// The settings of `port` of `device`: what the files say, else the
    /// defaults (RoCE v2, ToS 0).
    pub fn port(&self, device: &str, port: u8) -> PortSettings {
        self.ports
            .get(&(device.to_owned(), port))
            .copied()
            .unwrap_or_default()
    }

    /// The files looked at, in order, and whether each was there.
    pub fn files(&self) -> &[(PathBuf, bool)] {
        &self.files
    }
}

/// The settings lines of a file: (line number, key, value), in order. Keys
/// are checked here, values by the caller; a key twice is an error.
fn parse_lines<'t>(text: &'t str, path: &Path) -> Result<Vec<(usize, Key, &'t str)>, ConfigError> {
    let mut out: Vec<(usize, Key, &str)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let at = |error| ConfigError::at(path, line, error);
        let Some((key, value)) = trimmed.split_once('=') else {
            return Err(at(SettingError::NotKeyValue(trimmed.to_owned())));
        };
        let key: Key = key.trim().parse().map_err(at)?;
        if let Some((first, ..)) = out.iter().find(|(_, k, _)| *k == key) {
            let key = key.to_string();
            return Err(at(SettingError::Duplicate {
                key,
                first_line: *first,
            }));
        }
        out.push((line, key, value.trim()));
    }
    Ok(out)
}

/// Sets `key` to `value` in the file at `path`: checks both as configfs
/// would, then rewrites that key's line, or adds one,
/// leaving every other line as it was. The file is replaced atomically (a
/// new file beside it, then a rename), its directory created if need be.
/// A malformed file is left alone and reported.
pub fn write_setting(path: &Path, key: &Key, value: &str) -> Result<(), ConfigError> {
    let mut port = PortSettings::default();
    key.attribute
        .set_in(&mut port, value)
        .map_err(ConfigError::Setting)?;
    let canonical = key.attribute.value_in(&port);
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(ConfigError::io("reading", path, source)),
    };
    RoceSettings::parse(&old, path)?;
    let at = parse_lines(&old, path)?
        .into_iter()
        .find(|(_, k, _)| k == key)
        .map(|(line, ..)| line);
    let mut lines: Vec<String> = old.lines().map(str::to_owned).collect();
    let new_line = format!("{key} = {canonical}");
    match at {
        Some(line) => lines[line - 1] = new_line,
        None => {
            if lines.is_empty() {
                lines.push(format!("# {HEADER}"));
            }
            lines.push(new_line);
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    replace_file(path, &text)
}

/// The first line of a file `write_setting` creates.
const HEADER: &str = "ferroce rdma_cm settings: `<device>/ports/<port>/<attribute> = <value>`, \
                      as /sys/kernel/config/rdma_cm/<device>/ports/<port>/<attribute>";

/// Writes `text` to a new file beside `path` and renames it over `path`,
/// so that a reader sees the old file or the new one, never half of one.
fn replace_file(path: &Path, text: &str) -> Result<(), ConfigError> {
    use std::io::Write;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|e| ConfigError::io("creating", dir, e))?;
    }
    let name = path
        .file_name()
        .map_or_else(|| FILE_NAME.into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ConfigError::io("writing", path, e)
    })
}

/// A settings file that cannot be read or written, or a setting that is
/// wrong.
#[derive(Debug)]
pub enum ConfigError {
    /// A line of a settings file is wrong.
    File {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        error: SettingError,
    },
    /// A setting given to [`write_setting`] is wrong.
    Setting(SettingError),
    /// The file system refused.
    Io {
        /// What was being done: "reading", "writing", "creating".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
}

impl ConfigError {
    fn at(path: &Path, line: usize, error: SettingError) -> Self {
        Self::File {
            path: path.to_owned(),
            line,
            error,
        }
    }

    fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        Self::Io {
            action,
            path: path.to_owned(),
            source,
        }
    }

    /// What is wrong with the setting, if that is the error.
    pub fn setting(&self) -> Option<&SettingError> {
        match self {
            Self::File { error, .. } | Self::Setting(error) => Some(error),
            Self::Io { .. } => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { path, line, error } => write!(f, "{}:{line}: {error}", path.display()),
            Self::Setting(error) => error.fmt(f),
            Self::Io {
                action,
                path,
                source,
            } => write!(
                f,
                "{action} {}: {source} (name another settings file with {SETTINGS_ENV})",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::File { error, .. } | Self::Setting(error) => Some(error),
            Self::Io { source, .. } => Some(source),
        }
    }
}
