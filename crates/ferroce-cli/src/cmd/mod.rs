//! One module per subcommand.

pub(crate) mod dump;
