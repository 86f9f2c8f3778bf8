//! The bench: each wait mode's server in a child process against a
//! client in this one, and the table of the three.

use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};

use crate::{Phase, Res, WaitMode, client};

/// Runs each wait mode's server in a child process against a client here,
/// `repeat` times (best run kept, as a busy machine only slows runs down),
/// and prints the table. A failed run is reported and not counted; a mode
/// with no run that succeeded fails the bench.
pub(crate) fn run(repeat: usize, client_ip: IpAddr, server: SocketAddr) -> Res<()> {
    let (server_ip, tcp) = (server.ip(), server.port());
    let mut best = [[0f64; 3]; 3];
    for _ in 0..repeat.max(1) {
        for (m, mode) in WaitMode::ALL.into_iter().enumerate() {
            match bench_one(server_ip, client_ip, tcp, mode) {
                Ok(phases) => {
                    for (p, phase) in phases.iter().enumerate() {
                        best[m][p] = best[m][p].max(phase.rate);
                    }
                }
                Err(e) => eprintln!("a run with the {} server failed: {e}", mode.name()),
            }
        }
    }
    if let Some(m) = (0..3).find(|&m| best[m][0] == 0.0) {
        let name = WaitMode::ALL[m].name();
        return Err(format!("every run with the {name} server failed").into());
    }
    print_table(&best);
    Ok(())
}

/// One run: a server waiting `mode` in a child process, the client here.
fn bench_one(server_ip: IpAddr, client_ip: IpAddr, tcp: u16, mode: WaitMode) -> Res<Vec<Phase>> {
    let mut child = spawn_server(server_ip, tcp, mode)?;
    let phases = client(client_ip, SocketAddr::new(server_ip, tcp));
    if phases.is_err() {
        // It would wait for the SEND until its time limit.
        let _ = child.kill();
    }
    let status = child.wait()?;
    let phases = phases?;
    if !status.success() {
        return Err(format!("the server exited with {status}").into());
    }
    Ok(phases)
}

fn spawn_server(addr: IpAddr, tcp: u16, mode: WaitMode) -> Res<Child> {
    let exe = std::env::current_exe()?;
    let child = Command::new(exe)
        .args([
            "server",
            "--addr",
            &addr.to_string(),
            "--tcp",
            &tcp.to_string(),
        ])
        .args(["--wait", mode.name()])
        .stdout(Stdio::null())
        .spawn()?;
    Ok(child)
}

/// The share of the spinning server's throughput the blocking one keeps
/// in every phase.
const BLOCK_GOAL: f64 = 0.95;

fn print_table(best: &[[f64; 3]; 3]) {
    println!(
        "{:<10} {:>14} {:>14} {:>14} {:>10} {:>10}  goal",
        "phase", "spin", "sleep (1 ms)", "block (wait)", "sleep/spin", "block/spin"
    );
    for (p, (name, unit)) in [("WRITE", "MB/s"), ("READ", "MB/s"), ("FETCH_ADD", "op/s")]
        .into_iter()
        .enumerate()
    {
        let [spin, sleep, block] = [best[0][p], best[1][p], best[2][p]];
        let ratio = block / spin;
        println!(
            "{name:<10} {:>14} {:>14} {:>14} {:>9.0}% {:>9.0}%  block >= 95% of spin: {}",
            format!("{spin:.0} {unit}"),
            format!("{sleep:.0} {unit}"),
            format!("{block:.0} {unit}"),
            sleep / spin * 100.0,
            ratio * 100.0,
            if ratio >= BLOCK_GOAL {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}
