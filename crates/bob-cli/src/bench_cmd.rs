//! `bob bench` (in progress).

use std::process::ExitCode;

/// `bob bench` arguments.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs `bob bench`.
pub fn run(_args: BenchArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    Err("bob bench is not implemented yet".into())
}
