//! One module per subcommand.

pub(crate) mod dump;
pub(crate) mod sample;
