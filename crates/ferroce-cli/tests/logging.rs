//! What `ferroce` logs, and where: with `FERROCE_LOG=debug` or `-vv` the
//! QP state changes reach stderr; by default a clean run writes nothing to
//! stderr; stdout carries the tool's report only; a bad filter is refused.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_ferroce");

/// How a side is started: global flags before the command, and
/// `FERROCE_LOG` (`None`: unset, whatever the test's own environment).
struct Logging<'a> {
    flags: &'a [&'a str],
    env: Option<&'a str>,
}

fn command(log: &Logging<'_>) -> Command {
    let mut c = Command::new(BIN);
    c.args(log.flags);
    match log.env {
        Some(v) => c.env("FERROCE_LOG", v),
        None => c.env_remove("FERROCE_LOG"),
    };
    c
}

/// An RC pingpong of 20 messages between two processes; returns the
/// server's and the client's output, both having succeeded.
fn pingpong(
    ips: [&str; 2],
    tcp_port: u16,
    server: Logging<'_>,
    client: Logging<'_>,
) -> [Output; 2] {
    let port = tcp_port.to_string();
    let common = ["pingpong", "-p", &port, "-n", "20"];
    let srv = command(&server)
        .args(common)
        .args(["-L", ips[0]])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let mut client_out = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let out = command(&client)
            .args(common)
            .args(["-L", ips[1], ips[0]])
            .output()
            .expect("run client");
        if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("refused") {
            continue;
        }
        client_out = Some(out);
        break;
    }
    let mut srv = srv;
    let Some(client_out) = client_out else {
        let _ = srv.kill();
        panic!("the client never connected");
    };
    if !client_out.status.success() {
        let _ = srv.kill();
    }
    let server_out = srv.wait_with_output().expect("server");
    for (who, out) in [("server", &server_out), ("client", &client_out)] {
        assert!(
            out.status.success(),
            "{who} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    [server_out, client_out]
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The report lines pingpong prints, and nothing else, on stdout.
fn assert_report_only(out: &Output) {
    let stdout = text(&out.stdout);
    assert!(stdout.contains("20 iters in"), "{stdout}");
    for line in stdout.lines() {
        assert!(
            !line.contains("DEBUG") && !line.contains("INFO") && !line.contains("WARN"),
            "a log line on stdout: {line}"
        );
    }
}

/// The state change a QP makes when it is connected.
fn has_rts_change(stderr: &str) -> bool {
    stderr
        .lines()
        .any(|l| l.contains("QP state change") && l.contains("from=Rtr") && l.contains("to=Rts"))
}

#[test]
fn debug_logs_qp_state_changes_to_stderr_and_a_default_run_logs_nothing() {
    let [server, client] = pingpong(
        ["127.0.0.61", "127.0.0.62"],
        18661,
        Logging {
            flags: &[],
            env: None,
        },
        Logging {
            flags: &[],
            env: Some("debug"),
        },
    );
    let client_err = text(&client.stderr);
    assert!(has_rts_change(&client_err), "client stderr:\n{client_err}");
    assert!(client_err.contains("qpn=0x"), "{client_err}");
    assert_eq!(
        text(&server.stderr),
        "",
        "a default run writes nothing to stderr"
    );
    assert_report_only(&server);
    assert_report_only(&client);
}

#[test]
fn verbose_flags_choose_the_level_and_quiet_silences() {
    let [server, client] = pingpong(
        ["127.0.0.63", "127.0.0.64"],
        18663,
        Logging {
            flags: &["-vv"],
            env: None,
        },
        Logging {
            flags: &["-q"],
            env: None,
        },
    );
    let server_err = text(&server.stderr);
    assert!(has_rts_change(&server_err), "server stderr:\n{server_err}");
    assert!(server_err.contains("device opened"), "{server_err}");
    assert_eq!(text(&client.stderr), "");
    assert_report_only(&server);
}

#[test]
fn a_bad_filter_is_refused_with_its_fix() {
    let out = command(&Logging {
        flags: &[],
        env: Some("ferroce_core=loud"),
    })
    .args(["sample", "/dev/null"])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("FERROCE_LOG") && err.contains("use a level"),
        "{err}"
    );
}
