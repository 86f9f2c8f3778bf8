//! The settings' parsers against what Linux 6.1's configfs takes and
//! refuses (observed in the rxe rig), the file's errors, layering and
//! rewriting.

use std::path::{Path, PathBuf};

use super::*;

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ferroce-roce-config-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn key(s: &str) -> Key {
    s.parse().unwrap()
}

#[test]
fn modes_read_and_print_as_configfs() {
    for mode in [RoceMode::V1, RoceMode::V2] {
        assert_eq!(RoceMode::parse(mode.as_configfs()), Ok(mode));
        assert_eq!(mode.to_string().parse::<RoceMode>(), Ok(mode));
    }
    assert_eq!(RoceMode::parse("RoCE v2\n"), Ok(RoceMode::V2));
    // The documents' spelling of v1 (the kernel knows only "IB/RoCE v1").
    assert_eq!(RoceMode::parse("RoCE v1"), Ok(RoceMode::V1));
    // configfs refused each of these with EINVAL.
    for bad in [
        "roce v2",
        "RoCE v2 ",
        " RoCE v2",
        "v2",
        "RoCE v",
        "",
        "RoCE v2\n\n",
    ] {
        assert_eq!(
            RoceMode::parse(bad),
            Err(SettingError::BadMode(bad.into())),
            "{bad:?}"
        );
    }
    assert_eq!(RoceMode::default(), RoceMode::V2);
}

#[test]
fn tos_reads_as_kstrtou8_base_0() {
    for (text, tos) in [
        ("32", 32),
        ("0x20", 32),
        ("0X20", 32),
        ("040", 32),
        ("255", 255),
        ("0", 0),
        ("+7", 7),
        ("32\n", 32),
        ("0xff", 255),
    ] {
        assert_eq!(parse_tos(text), Ok(tos), "{text:?}");
    }
    for tos in 0..=u8::MAX {
        assert_eq!(parse_tos(&tos.to_string()), Ok(tos));
    }
    // configfs: ERANGE for 256, EINVAL for the rest.
    for big in ["256", "0x100", "0400", "99999999999999999999999"] {
        assert_eq!(parse_tos(big), Err(SettingError::TosOutOfRange(big.into())));
    }
    for bad in ["-1", " 5", "5 ", "abc", "", "0x", "08", "++1", "1.5", "\n"] {
        assert_eq!(
            parse_tos(bad),
            Err(SettingError::BadTos(bad.into())),
            "{bad:?}"
        );
    }
}

#[test]
fn keys_are_configfs_paths_of_ferroces_ports() {
    for text in [
        "ferroce0/ports/1/default_roce_mode",
        "ferroce0/ports/1/default_roce_tos",
    ] {
        assert_eq!(key(text).to_string(), text);
    }
    let k = key("ferroce0/ports/1/default_roce_tos");
    assert_eq!((k.device.as_str(), k.port), (DEVICE_NAME, 1));
    assert_eq!(k.attribute, Attribute::DefaultRoceTos);
    let err = |s: &str| s.parse::<Key>().unwrap_err();
    assert!(matches!(
        err("ferroce0/ports/2/default_roce_tos"),
        SettingError::NoSuchPort { .. }
    ));
    assert!(matches!(
        err("ferroce0/ports/x/default_roce_tos"),
        SettingError::NoSuchPort { .. }
    ));
    assert!(matches!(
        err("rxe0/ports/1/default_roce_tos"),
        SettingError::UnknownDevice(_)
    ));
    assert!(matches!(
        err("ferroce0/ports/1/roce_tos"),
        SettingError::UnknownAttribute(_)
    ));
    assert!(matches!(
        err("ferroce0/port/1/default_roce_tos"),
        SettingError::BadKey(_)
    ));
    assert!(matches!(err("default_roce_tos"), SettingError::BadKey(_)));
    let msg = err("rxe0/ports/1/default_roce_tos").to_string();
    assert!(
        msg.contains("ferroce0") && msg.contains("ibstat -l"),
        "{msg}"
    );
}

#[test]
fn a_file_sets_its_ports_and_leaves_the_rest_default() {
    let text = "# a comment\n\n  ferroce0/ports/1/default_roce_tos = 0x60 \n\
                ferroce0/ports/1/default_roce_mode=RoCE v2\n";
    let s = RoceSettings::parse(text, Path::new("t.conf")).unwrap();
    let want = PortSettings {
        mode: RoceMode::V2,
        tos: 0x60,
    };
    assert_eq!(s.port(DEVICE_NAME, 1), want);
    assert_eq!(s.port("other0", 1), PortSettings::default());
    assert_eq!(
        RoceSettings::parse("", Path::new("t"))
            .unwrap()
            .port(DEVICE_NAME, 1),
        PortSettings {
            mode: RoceMode::V2,
            tos: 0
        }
    );
}

/// Each malformed line is an error naming the file, the line and the fix.
#[test]
fn a_malformed_file_names_file_line_and_fix() {
    let cases: [(&str, &str); 7] = [
        ("ferroce0/ports/1/default_roce_tos 32", "make it a comment"),
        ("ferroce0/ports/1/default_roce_tos = 256", "0 to 255"),
        ("ferroce0/ports/1/default_roce_tos = high", "0 to 255"),
        (
            "ferroce0/ports/1/default_roce_mode = RoCE v3",
            "write `RoCE v2`",
        ),
        ("ferroce0/ports/7/default_roce_tos = 1", "only port is 1"),
        ("mlx5_0/ports/1/default_roce_tos = 1", "ferroce ibstat -l"),
        (
            "ferroce0/ports/1/default_roce_ttl = 1",
            "default_roce_mode and default_roce_tos",
        ),
    ];
    for (line, fix) in cases {
        let text = format!("# settings\n\n{line}\n");
        let err = RoceSettings::parse(&text, Path::new("/x/rdma_cm.conf")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("/x/rdma_cm.conf:3: "), "{msg}");
        assert!(msg.contains(fix), "{line}: {msg}");
    }
    let twice = "ferroce0/ports/1/default_roce_tos = 1\nferroce0/ports/1/default_roce_tos = 2\n";
    let err = RoceSettings::parse(twice, Path::new("f")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "f:2: {}",
            SettingError::Duplicate {
                key: "ferroce0/ports/1/default_roce_tos".into(),
                first_line: 1
            }
        )
    );
}

#[test]
fn roce_v1_is_taken_in_both_spellings_and_written_as_configfs_prints_it() {
    for v1 in ["RoCE v1", "IB/RoCE v1"] {
        let text = format!("ferroce0/ports/1/default_roce_mode = {v1}\n");
        let settings = RoceSettings::parse(&text, Path::new("f")).unwrap();
        assert_eq!(settings.port("ferroce0", 1).mode, RoceMode::V1, "{v1}");
    }
    let dir = TempDir::new("v1");
    let path = dir.0.join(FILE_NAME);
    let k = key("ferroce0/ports/1/default_roce_mode");
    write_setting(&path, &k, "RoCE v1").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("ferroce0/ports/1/default_roce_mode = IB/RoCE v1\n"),
        "{text}"
    );
    let back = RoceSettings::load_from(std::slice::from_ref(&path)).unwrap();
    assert_eq!(back.port("ferroce0", 1).mode, RoceMode::V1);
}

#[test]
fn roce_v1_on_the_udp_backend_names_the_raw_backend_and_the_fix() {
    let msg = SettingError::RoceV1OnUdp.to_string();
    assert!(msg.contains("UDP backend"), "{msg}");
    assert!(msg.contains("`--raw`"), "{msg}");
    assert!(msg.contains("'RoCE v2'"), "{msg}");
}

#[test]
fn later_files_win_key_by_key_and_missing_ones_are_skipped() {
    let dir = TempDir::new("layers");
    let system = dir.file(
        "system.conf",
        "ferroce0/ports/1/default_roce_tos = 32\nferroce0/ports/1/default_roce_mode = RoCE v2\n",
    );
    let user = dir.file("user.conf", "ferroce0/ports/1/default_roce_tos = 64\n");
    let missing = dir.0.join("missing.conf");
    let s = RoceSettings::load_from(&[system.clone(), missing.clone(), user.clone()]).unwrap();
    assert_eq!(s.port(DEVICE_NAME, 1).tos, 64);
    assert_eq!(
        s.files(),
        &[(system.clone(), true), (missing, false), (user, true)]
    );
    let only_system = RoceSettings::load_from(&[system]).unwrap();
    assert_eq!(only_system.port(DEVICE_NAME, 1).tos, 32);
    // A directory where a file should be is an error, not "missing".
    let err = RoceSettings::load_from(std::slice::from_ref(&dir.0)).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
}

#[test]
fn writing_replaces_one_line_and_keeps_the_rest() {
    let dir = TempDir::new("write");
    let path = dir.0.join("sub").join(FILE_NAME);
    let tos = key("ferroce0/ports/1/default_roce_tos");
    let mode = key("ferroce0/ports/1/default_roce_mode");
    write_setting(&path, &tos, "0x20").unwrap();
    let first = std::fs::read_to_string(&path).unwrap();
    assert!(first.starts_with("# ferroce rdma_cm settings"), "{first}");
    assert!(
        first.ends_with("\nferroce0/ports/1/default_roce_tos = 32\n"),
        "{first}"
    );
    // A comment of the user's, then a second key, then the first again.
    std::fs::write(&path, format!("{first}# keep me\n")).unwrap();
    write_setting(&path, &mode, "RoCE v2\n").unwrap();
    write_setting(&path, &tos, "255").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1..],
        [
            "ferroce0/ports/1/default_roce_tos = 255",
            "# keep me",
            "ferroce0/ports/1/default_roce_mode = RoCE v2"
        ]
    );
    let s = RoceSettings::load_from(std::slice::from_ref(&path)).unwrap();
    assert_eq!(
        s.port(DEVICE_NAME, 1),
        PortSettings {
            mode: RoceMode::V2,
            tos: 255
        }
    );
    // Nothing left beside it.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1);
    // A malformed file is reported and left as it was.
    std::fs::write(&path, "garbage\n").unwrap();
    let err = write_setting(&path, &tos, "1").unwrap_err();
    assert!(err.to_string().contains(":1: `garbage`"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "garbage\n");
    // A bad value never reaches the file.
    let err = write_setting(&dir.0.join("other.conf"), &tos, "300").unwrap_err();
    assert!(matches!(
        err,
        ConfigError::Setting(SettingError::TosOutOfRange(_))
    ));
}

#[test]
fn paths_follow_the_environment() {
    let p = |s: &str| PathBuf::from(s);
    let explicit = SettingsPaths::from_vars(Some(p("/tmp/x.conf")), Some(p("/c")), Some(p("/h")));
    assert_eq!(explicit.read, [p("/tmp/x.conf")]);
    assert_eq!(explicit.write, Some(p("/tmp/x.conf")));
    let xdg = SettingsPaths::from_vars(None, Some(p("/c")), Some(p("/h")));
    assert_eq!(xdg.read, [p(SYSTEM_FILE), p("/c/ferroce/rdma_cm.conf")]);
    assert_eq!(xdg.write, Some(p("/c/ferroce/rdma_cm.conf")));
    // A relative XDG_CONFIG_HOME is ignored (XDG base directories).
    let home = SettingsPaths::from_vars(None, Some(p("rel")), Some(p("/h")));
    assert_eq!(home.write, Some(p("/h/.config/ferroce/rdma_cm.conf")));
    let nothing = SettingsPaths::from_vars(None, None, None);
    assert_eq!((nothing.read, nothing.write), (vec![p(SYSTEM_FILE)], None));
}
