//! `bob explain`: a witness told in words.

use crate::cli::ExplainArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob explain`.
pub fn run(args: ExplainArgs) -> Result<Conclusion, CliError> {
    let explanation = bob_core::report::explain(&args.witness)?;
    print::render(&explanation, args.format)?;
    Ok(Conclusion::Done)
}
