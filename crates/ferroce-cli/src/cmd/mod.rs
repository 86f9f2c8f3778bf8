//! One module per subcommand.

pub(crate) mod backend;
pub(crate) mod bench;
pub(crate) mod cmatose;
pub(crate) mod config;
pub(crate) mod devinfo;
pub(crate) mod dump;
pub(crate) mod exchange;
pub(crate) mod exec;
pub(crate) mod ibstat;
pub(crate) mod limits;
pub(crate) mod manpages;
pub(crate) mod mckey;
pub(crate) mod perf;
pub(crate) mod pingpong;
pub(crate) mod qos;
pub(crate) mod rdma_cm;
pub(crate) mod rdma_example;
pub(crate) mod rping;
pub(crate) mod sample;
pub(crate) mod tcp;
pub(crate) mod udaddy;
