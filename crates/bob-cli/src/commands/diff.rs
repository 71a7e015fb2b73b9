//! `bob diff`: the cells whose verdict changed between two tables; exits 1 when one did.

use bob_core::output::GridDiff;
use bob_core::report::diff::TableDiff;
use bob_core::report::site;

use crate::cli::DiffArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob diff`.
pub fn run(args: DiffArgs) -> Result<Conclusion, CliError> {
    let a = site::read_table(&args.a)?;
    let b = site::read_table(&args.b)?;
    let d = TableDiff::of(&args.a.display().to_string(), &a, &args.b.display().to_string(), &b);
    print::render(&GridDiff { diff: &d, a: &a, b: &b }, args.format)?;
    Ok(Conclusion::Changed(d.changed()))
}
