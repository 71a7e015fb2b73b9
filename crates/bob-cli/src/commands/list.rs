//! `bob list`: the configurations and properties.

use bob_core::output::ListReport;

use crate::cli::ListArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob list`.
pub fn run(args: ListArgs) -> Result<Conclusion, CliError> {
    let report = ListReport::gather();
    print::render(&report, args.format)?;
    Ok(Conclusion::Done)
}
