//! `ferroce config` and `ferroce ibstat` as a user runs them: the settings
//! written, read back and drawn, the refusals with their exit status, and
//! ibstat's forms on loopback. Binds nothing; the settings go to a file of
//! the test's own (`FERROCE_CONFIG`).

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

/// `ferroce ARGS` with `FERROCE_CONFIG` naming `file`.
fn with_file(file: &Path, args: &[&str]) -> Output {
    common::ferroce_cmd()
        .env("FERROCE_CONFIG", file)
        .args(args)
        .output()
        .expect("run ferroce")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A settings file path in a fresh directory; the directory is removed on
/// drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ferroce-config-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
    fn file(&self) -> PathBuf {
        self.0.join("rdma_cm.conf")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const TOS: &str = "ferroce0/ports/1/default_roce_tos";
const MODE: &str = "ferroce0/ports/1/default_roce_mode";

#[test]
fn set_get_and_the_tree() {
    let s = Scratch::new("set");
    let f = s.file();
    assert_eq!(stdout(&with_file(&f, &["config", "get", TOS])), "0\n");
    assert_eq!(
        stdout(&with_file(&f, &["config", "get", MODE])),
        "RoCE v2\n"
    );
    assert_eq!(stdout(&with_file(&f, &["config", "set", TOS, "0x60"])), "");
    assert_eq!(stdout(&with_file(&f, &["config", "get", TOS])), "96\n");
    let tree = stdout(&with_file(&f, &["config"]));
    let want = format!(
        "ferroce0\n└── ports\n    └── 1\n        ├── default_roce_mode: RoCE v2\n        \
         └── default_roce_tos: 96\n\nsettings files, later ones win: {}\n",
        f.display()
    );
    assert_eq!(tree, want);
}

#[test]
fn refusals_name_the_cause_and_change_nothing() {
    let s = Scratch::new("refuse");
    let f = s.file();
    stdout(&with_file(&f, &["config", "set", TOS, "32"]));
    let before = std::fs::read_to_string(&f).unwrap();
    for (args, says) in [
        (
            vec!["config", "set", MODE, "RoCE v3"],
            "`IB/RoCE v1` (exactly",
        ),
        (vec!["config", "set", MODE, "roce v2"], "is not a RoCE mode"),
        (vec!["config", "set", TOS, "256"], "0 to 255"),
        (
            vec!["config", "set", "ferroce0/ports/2/default_roce_tos", "1"],
            "only port is 1",
        ),
        (
            vec!["config", "get", "mlx5_0/ports/1/default_roce_tos"],
            "ferroce0",
        ),
    ] {
        let out = with_file(&f, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&f).unwrap(), before);
    // A malformed file is an error naming its line, for every command.
    std::fs::write(&f, format!("{before}{MODE} = RoCE v3\n")).unwrap();
    let out = with_file(&f, &["config"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:3: `RoCE v3` is not a RoCE mode", f.display())),
        "{err}"
    );
}

#[test]
fn ibstat_forms_on_loopback() {
    let ibstat = |args: &[&str]| {
        stdout(&common::ferroce(
            &[&["ibstat", "--local", "127.0.0.1"], args].concat(),
        ))
    };
    let full = ibstat(&[]);
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(lines[0], "CA 'ferroce0'");
    assert_eq!(lines.len(), 17, "{full}");
    // lo has no MAC: GUIDs from the pseudo-MAC 02:00:7f:00:00:01; the port
    // GUID is GID 0's interface ID, ::ffff:127.0.0.1's.
    assert_eq!(lines[5], "\tNode GUID: 0x00007ffffe000001");
    assert_eq!(lines[15], "\t\tPort GUID: 0x0000ffff7f000001");
    assert_eq!(lines[16], "\t\tLink layer: Ethernet");
    assert_eq!(ibstat(&["-l"]), "ferroce0\n");
    assert_eq!(ibstat(&["-p"]), "0x0000ffff7f000001\n");
    assert_eq!(ibstat(&["-s"]), lines[..7].join("\n") + "\n");
    let port = ibstat(&["ferroce0", "1"]);
    assert!(
        port.starts_with("CA: 'ferroce0'\nPort 1:\nState: "),
        "{port}"
    );
    let out = common::ferroce(&["ibstat", "--local", "127.0.0.1", "rxe0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'rxe0' IB device can't be found"));
}

/// Without `FERROCE_CONFIG`, `set` writes the user's file under
/// `XDG_CONFIG_HOME` (else `~/.config`), which wins over the system's.
#[test]
fn the_users_file_by_default() {
    let s = Scratch::new("home");
    let run = |env: &[(&str, &Path)], args: &[&str]| {
        let mut cmd = common::ferroce_cmd();
        cmd.env_remove("FERROCE_CONFIG")
            .env_remove("XDG_CONFIG_HOME");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.args(args).output().expect("run ferroce")
    };
    let home = [("HOME", s.0.as_path())];
    stdout(&run(&home, &["config", "set", TOS, "40"]));
    let user = s.0.join(".config/ferroce/rdma_cm.conf");
    let text = std::fs::read_to_string(&user).unwrap();
    assert!(text.ends_with(&format!("\n{TOS} = 40\n")), "{text}");
    assert_eq!(stdout(&run(&home, &["config", "get", TOS])), "40\n");
    let tree = stdout(&run(&home, &["config"]));
    assert!(tree.contains("└── default_roce_tos: 40\n"), "{tree}");
    assert!(
        tree.ends_with(&format!("{}\n", user.display())),
        "the user's file last: {tree}"
    );
    let xdg = s.0.join("xdg");
    let both = [("HOME", s.0.as_path()), ("XDG_CONFIG_HOME", xdg.as_path())];
    stdout(&run(&both, &["config", "set", TOS, "8"]));
    assert!(xdg.join("ferroce/rdma_cm.conf").exists());
    assert_eq!(stdout(&run(&both, &["config", "get", TOS])), "8\n");
}
