//! The `ferroce` command. Thin: argument parsing and printing only.

mod capture;

fn main() {}
