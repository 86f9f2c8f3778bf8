//! `ferroce sim` runs a shipped scenario to completion and writes its
//! outputs; a bad scenario path is refused. Binds nothing.

mod common;

use std::path::PathBuf;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ferroce-sim/scenarios")
        .join(name)
}

#[test]
fn runs_a_shipped_scenario() {
    let out_dir = std::env::temp_dir().join(format!("ferroce-sim-cli-{}", std::process::id()));
    let file = scenario("smoke.toml");
    let out = common::ferroce(&[
        "sim",
        "--congestion",
        "mlx5",
        file.to_str().expect("a UTF-8 path"),
        out_dir.to_str().expect("a UTF-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ferroce sim: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Jain's fairness index"), "{stdout}");
    let cnps = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CNPs"))
        .and_then(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .expect("a CNPs line");
    assert!(cnps > 0, "the 2:1 incast made no CNPs:\n{stdout}");
    for f in [
        "summary.txt",
        "flows.csv",
        "rates.csv",
        "cnp.csv",
        "dcqcn.csv",
        "dcqcn.svg",
        "rates.png",
    ] {
        assert!(
            out_dir.join(f).is_file(),
            "{f} missing in {}",
            out_dir.display()
        );
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn a_missing_scenario_fails() {
    let out = common::ferroce(&["sim", "/nonexistent/scenario.toml"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read /nonexistent/scenario.toml"),
        "{err}"
    );
}

#[test]
fn help_names_the_scenarios() {
    let out = common::ferroce(&["sim", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("crates/ferroce-sim/scenarios"),
        "{text}"
    );
}
