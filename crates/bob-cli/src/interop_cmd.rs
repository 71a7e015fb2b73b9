//! Interop commands: `bob import`, `bob log`, `bob record`, `bob mark`, `bob check` (in progress).

use std::process::ExitCode;

/// `bob import` arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {}
/// `bob log` arguments.
#[derive(Debug, clap::Args)]
pub struct LogArgs {}
/// `bob record` arguments.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {}
/// `bob mark` arguments.
#[derive(Debug, clap::Args)]
pub struct MarkArgs {}
/// `bob check` arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {}

type Result = std::result::Result<ExitCode, Box<dyn std::error::Error>>;

/// `bob import`.
pub fn import(_args: ImportArgs) -> Result {
    Err("not implemented yet".into())
}
/// `bob log`.
pub fn log(_args: LogArgs) -> Result {
    Err("not implemented yet".into())
}
/// `bob record`.
pub fn record(_args: RecordArgs) -> Result {
    Err("not implemented yet".into())
}
/// `bob mark`.
pub fn mark(_args: MarkArgs) -> Result {
    Err("not implemented yet".into())
}
/// `bob check`.
pub fn check(_args: CheckArgs) -> Result {
    Err("not implemented yet".into())
}
