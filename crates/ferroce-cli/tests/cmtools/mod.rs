//! What the `cmatose` and `udaddy` tests share: a server and a client of
//! one tool as two `ferroce` processes on loopback, the server's lines and
//! the client's, and their exit statuses.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use super::common::{ferroce, spawn, text};

/// One side's exit code, standard output lines and standard error.
pub(crate) struct Side {
    pub(crate) code: Option<i32>,
    pub(crate) lines: Vec<String>,
    pub(crate) stderr: String,
}

impl Side {
    pub(crate) fn of(out: &Output) -> Self {
        let (stdout, stderr) = text(out);
        Self {
            code: out.status.code(),
            lines: stdout.lines().map(str::to_owned).collect(),
            stderr,
        }
    }

    /// Asserts the exit code and the exact lines, showing both on failure.
    pub(crate) fn expect(&self, who: &str, code: i32, lines: &[&str]) {
        assert_eq!(
            (self.code, &self.lines[..]),
            (
                Some(code),
                &lines.iter().map(|l| l.to_string()).collect::<Vec<_>>()[..]
            ),
            "{who}: stderr:\n{}",
            self.stderr
        );
    }
}

/// Waits until some process has UDP port 4791 bound on `ip` (a ferroce
/// device), read from `/proc/net/udp` so that the check itself binds
/// nothing, then gives the server a moment to go from its bind to its
/// listen (a REQ in between would be rejected: nothing listens yet).
pub(crate) fn wait_for_device(ip: Ipv4Addr, server: &mut Child) {
    let want = format!("{:08X}:12B7", u32::from_ne_bytes(ip.octets()));
    let start = Instant::now();
    loop {
        let table = std::fs::read_to_string("/proc/net/udp").expect("read /proc/net/udp");
        if table
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(&want))
        {
            break;
        }
        if let Ok(Some(status)) = server.try_wait() {
            panic!("the server exited before it listened: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no device on {ip} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// Runs `tool SERVER_ARGS` and, once it listens on `listen_ip`, `tool
/// CLIENT_ARGS`; returns both sides when both have exited.
pub(crate) fn run_pair(
    tool: &str,
    listen_ip: Ipv4Addr,
    server_args: &[&str],
    client_args: &[&str],
) -> (Side, Side) {
    let mut server = spawn(&[&[tool], server_args].concat());
    wait_for_device(listen_ip, &mut server);
    let client = ferroce(&[&[tool], client_args].concat());
    let server = server.wait_with_output().expect("server");
    (Side::of(&server), Side::of(&client))
}
