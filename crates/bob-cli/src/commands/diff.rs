//! `bob diff`: the cells whose verdict changed between two tables; exits 1 when one did.

use bob_core::report::diff::TableDiff;
use bob_core::report::{junit, site};

use crate::cli::{DiffArgs, DiffFormat};
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::{color, print};

/// Runs `bob diff`.
pub fn run(args: DiffArgs) -> Result<Conclusion, CliError> {
    let a = site::read_table(&args.a)?;
    let b = site::read_table(&args.b)?;
    let d = TableDiff::of(&args.a.display().to_string(), &a, &args.b.display().to_string(), &b);
    match args.format {
        DiffFormat::Json => print::json(&d)?,
        DiffFormat::Md => print!("{}", d.to_markdown()),
        DiffFormat::Html => print!("{}", site::diff_page(&d)),
        DiffFormat::Junit => print!("{}", print::junit(junit::diff_suite(&d, &a, &b))),
        DiffFormat::Text => {
            let paint = color::Painter::stdout();
            print!("{}", d.to_text_with(&|v, t| paint.verdict(v, t)));
        }
    }
    Ok(Conclusion::Changed(d.changed()))
}
