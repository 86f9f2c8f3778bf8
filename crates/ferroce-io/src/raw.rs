mod filter;
pub mod frame;
