//! `ferroce sim`: a deterministic discrete-event simulator of a RoCE
//! fabric whose hosts run ferroce's real engine ([`ferroce_core::Endpoint`],
//! the same sans-IO core that runs on the wire).
//!
//! A [`Scenario`] (TOML) names the links (rate, propagation delay), the
//! switches (shared buffer, RED/ECN at egress, PFC at ingress), the
//! topology (N:1 incast, dumbbell, two-tier leaf-spine with ECMP on the UDP
//! source port) and the flows (RC QP pairs carrying RDMA WRITEs: long, or
//! starting and stopping, of a mix of message sizes). [`run`] gives a
//! [`Report`]: per-flow figures, Jain's fairness index, the 99th-percentile
//! queue, PFC pause time, and the time series, which
//! [`Report::write_csv`] and [`plot::write`] turn into files.
//!
//! The contract: the same scenario (seed included) gives the same report
//! and the same files, byte for byte. Time is kept in picoseconds; the
//! engines see it in nanoseconds through `poll_timeout`/`handle_timeout`.
//!
//! | where | what |
//! |---|---|
//! | [`scenario`] | the scenario file and its defaults |
//! | [`congestion`] | its `[congestion]` table: ECN, CNPs, DCQCN |
//! | `topology` | wiring and shortest-path next hops |
//! | `port` | serialization, PFC pause state |
//! | `switch` | shared buffer, RED/ECN, PFC books, ECMP |
//! | `host` | endpoints, QPs, the workload, [`deliver`] |
//! | `sim` | the event heap |
//! | `series`, [`report`], `window`, [`plot`] | outputs; figures over a window of time |
//! | [`cli`] | the command line (`ferroce-sim`, `ferroce sim`) |

#![forbid(unsafe_code)]

pub mod cli;
pub mod congestion;
mod host;
pub mod plot;
mod port;
pub mod report;
pub mod scenario;
mod series;
mod sim;
mod switch;
mod topology;
mod window;

#[cfg(test)]
mod tests;

pub use host::deliver;
pub use port::FRAME_OVERHEAD;
pub use report::{FlowReport, Report};
pub use scenario::{Scenario, ScenarioError};
pub use series::Series;

/// Runs `scenario` to its end and reports.
pub fn run(scenario: Scenario) -> Result<Report, ScenarioError> {
    let mut sim = sim::Sim::new(scenario)?;
    sim.run();
    Ok(Report::from_sim(&sim))
}
