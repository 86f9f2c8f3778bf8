//! `ferroce manpages DIR`: writes the man pages of `ferroce` and of each of
//! its commands (`ferroce.1`, `ferroce-perf.1`, ...), made from the same
//! clap definitions as `--help`, so the two never disagree.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Command};

use crate::error::Error;

/// Arguments of `ferroce manpages`.
#[derive(Debug, Args)]
pub(crate) struct ManpagesArgs {
    /// The directory to write into (made if missing).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub(crate) fn run(args: &ManpagesArgs, cli: Command) -> Result<bool, Error> {
    let written = write_all(cli, &args.dir)?;
    let mut out = std::io::stdout().lock();
    for p in &written {
        // A closed pipe (`| head`) is no failure: the pages are written.
        let _ = writeln!(out, "{}", p.display());
    }
    Ok(true)
}

/// Writes the page of `cli` and of each visible subcommand into `dir`;
/// returns the files written.
fn write_all(cli: Command, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    std::fs::create_dir_all(dir)?;
    let mut cli = cli;
    cli.build();
    let mut written = vec![write_page(&cli, "ferroce", dir)?];
    // clap adds `help` when it builds the command; `--help` serves there.
    let pages = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help");
    for sub in pages {
        let name = format!("ferroce-{}", sub.get_name());
        // The page's title and synopsis name the whole command.
        let page = sub
            .clone()
            .name(name.clone())
            .display_name(name.clone())
            .version(env!("CARGO_PKG_VERSION"));
        written.push(write_page(&page, &name, dir)?);
    }
    Ok(written)
}

/// Renders one page as `dir/NAME.1`.
fn write_page(cmd: &Command, name: &str, dir: &Path) -> Result<PathBuf, Error> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, out)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_page_for_the_command_and_each_visible_subcommand() {
        let dir = std::env::temp_dir().join(format!("ferroce-man-{}", std::process::id()));
        let cli = crate::Cli::command();
        let visible: Vec<String> = cli
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_string())
            .collect();
        let written = write_all(cli, &dir).unwrap();
        assert_eq!(written.len(), visible.len() + 1);
        let perf = std::fs::read_to_string(dir.join("ferroce-perf.1")).unwrap();
        assert!(perf.contains(".TH ferroce-perf 1"), "{perf}");
        assert!(perf.contains("\\fBferroce perf\\fR"), "{perf}");
        assert!(perf.contains("\\-\\-lat"), "every option: {perf}");
        assert!(
            !dir.join("ferroce-udp-peer.1").exists(),
            "hidden commands get no page"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
