//! `bob report`: the static HTML site of a `bob table --out` directory.

use bob_core::report::site;

use crate::cli::ReportArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob report`.
pub fn run(args: ReportArgs) -> Result<Conclusion, CliError> {
    let other = args.diff.as_deref().map(site::read_table).transpose()?;
    let name = args.diff.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let report = site::build(&args.out, &args.to, other.as_ref().map(|g| (name.as_str(), g)))?;
    print::render(&report, args.format)?;
    Ok(Conclusion::Done)
}
