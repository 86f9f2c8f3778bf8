//! The CM on a simulated network (see `sim`): connection set-up and
//! teardown, loss of each message, duplicates, MRA, stale connections,
//! TimeWait, SIDR, many connections, random links, and hostile input.

mod basic;
mod capture;
mod giveup;
mod hostile;
mod lossy;
mod rdma_cm;
mod rdma_cm_capture;
mod roce_version;
mod sim;
mod strays;
