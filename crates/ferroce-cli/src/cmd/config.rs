//! `ferroce config`: rdma_cm's per-port RoCE settings (`default_roce_mode`,
//! `default_roce_tos`) as the kernel's configfs shows them under
//! `/sys/kernel/config/rdma_cm`, kept in ferroce's settings file
//! (`ferroce::roce_config`).
//!
//! * `ferroce config`: the tree of every device's ports with their values,
//!   then the files read;
//! * `ferroce config get ferroce0/ports/1/default_roce_tos`: the value, as
//!   `cat` on the configfs file prints it;
//! * `ferroce config set ferroce0/ports/1/default_roce_tos 32`: checks the
//!   value as configfs would (`IB/RoCE v1` or `RoCE v2`; v1 connections
//!   need the raw-Ethernet backend) and rewrites the user's settings file atomically
//!   (`--system`: /etc/ferroce/rdma_cm.conf; `FERROCE_CONFIG` names
//!   another).

use std::fmt::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use ferroce::DEVICE_NAME;
use ferroce::roce_config::{
    Attribute, Key, PORTS, RoceSettings, SETTINGS_ENV, SYSTEM_FILE, SettingsPaths, port_settings,
    write_setting,
};

use crate::error::Error;

#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Print one setting's value, as `cat` on its configfs file.
    Get {
        /// `<device>/ports/<port>/<attribute>`, e.g.
        /// ferroce0/ports/1/default_roce_mode.
        key: String,
    },
    /// Set one setting, as `echo VALUE >` its configfs file.
    Set {
        /// `<device>/ports/<port>/<attribute>`, e.g.
        /// ferroce0/ports/1/default_roce_tos.
        key: String,
        /// `RoCE v2` for default_roce_mode; 0-255 for default_roce_tos
        /// (decimal, 0x hex, 0 octal).
        value: String,
        /// Write the system's file, /etc/ferroce/rdma_cm.conf, instead of
        /// the user's.
        #[arg(long)]
        system: bool,
    },
}

pub(crate) fn run(args: &ConfigArgs) -> Result<bool, Error> {
    let paths = SettingsPaths::from_env();
    let fail = |e: ferroce::roce_config::ConfigError| Error::Usage(e.to_string());
    match &args.action {
        None => {
            let settings = RoceSettings::load_from(&paths.read).map_err(fail)?;
            print!("{}", tree(&settings, &[DEVICE_NAME]));
            print!("{}", sources(&settings));
        }
        Some(Action::Get { key }) => {
            let key: Key = key.parse().map_err(|e| Error::Usage(format!("{e}")))?;
            // What the rdma_cm layer reads for the port.
            let port = port_settings(&key.device, key.port).map_err(fail)?;
            println!("{}", key.attribute.value_in(&port));
        }
        Some(Action::Set { key, value, system }) => {
            let key: Key = key.parse().map_err(|e| Error::Usage(format!("{e}")))?;
            let path = if *system {
                PathBuf::from(SYSTEM_FILE)
            } else {
                paths.write.ok_or_else(|| {
                    Error::Usage(format!(
                        "no user settings file: HOME and XDG_CONFIG_HOME are unset; set one, \
                         name a file with {SETTINGS_ENV}, or write the system's with --system"
                    ))
                })?
            };
            write_setting(&path, &key, value).map_err(fail)?;
        }
    }
    Ok(true)
}

/// The settings of `devices` as `tree` draws configfs's `rdma_cm`
/// directory, each attribute with its value.
pub(crate) fn tree(settings: &RoceSettings, devices: &[&str]) -> String {
    let mut o = String::new();
    for dev in devices {
        let _ = writeln!(o, "{dev}");
        let _ = writeln!(o, "└── ports");
        for port in 1..=PORTS {
            let last_port = port == PORTS;
            let (branch, stem) = if last_port {
                ("└──", "    ")
            } else {
                ("├──", "│   ")
            };
            let _ = writeln!(o, "    {branch} {port}");
            let values = settings.port(dev, port);
            for (i, attr) in Attribute::ALL.iter().enumerate() {
                let leaf = if i + 1 == Attribute::ALL.len() {
                    "└──"
                } else {
                    "├──"
                };
                let _ = writeln!(
                    o,
                    "    {stem}{leaf} {}: {}",
                    attr.name(),
                    attr.value_in(&values)
                );
            }
        }
    }
    o
}

/// Which files the settings came from, after the tree.
fn sources(settings: &RoceSettings) -> String {
    let files: Vec<String> = settings
        .files()
        .iter()
        .map(|(path, there)| {
            let note = if *there { "" } else { " (not present)" };
            format!("{}{note}", path.display())
        })
        .collect();
    format!("\nsettings files, later ones win: {}\n", files.join(", "))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_tree_as_the_documents_draw_it() {
        let text = "ferroce0/ports/1/default_roce_tos = 0x20\n";
        let settings = RoceSettings::parse(text, Path::new("f")).unwrap();
        assert_eq!(
            tree(&settings, &[DEVICE_NAME]),
            "ferroce0\n\
             └── ports\n    \
                 └── 1\n        \
                     ├── default_roce_mode: RoCE v2\n        \
                     └── default_roce_tos: 32\n"
        );
        let defaults = tree(&RoceSettings::default(), &[DEVICE_NAME]);
        assert!(defaults.ends_with("default_roce_tos: 0\n"), "{defaults}");
    }

    #[test]
    fn sources_say_which_files_were_there() {
        let dir = std::env::temp_dir().join(format!("ferroce-cli-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let there = dir.join("a.conf");
        std::fs::write(&there, "").unwrap();
        let missing = dir.join("b.conf");
        let s = RoceSettings::load_from(&[there.clone(), missing.clone()]).unwrap();
        assert_eq!(
            sources(&s),
            format!(
                "\nsettings files, later ones win: {}, {} (not present)\n",
                there.display(),
                missing.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
