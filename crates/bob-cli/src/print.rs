//! Printing a result: its text, or its typed JSON document (see `bob_core::output`).

use std::io::Write;

use serde::Serialize;

use bob_core::report::junit::{self, Stamp, Suite};
use bob_core::report::table::Grid;

use crate::cli::{Format, TableFormat};
use crate::error::CliError;

/// Prints `value` as pretty JSON, or `text()` as is.
pub fn result<T: Serialize>(
    format: Format,
    value: &T,
    text: impl FnOnce() -> String,
) -> Result<(), CliError> {
    match format {
        Format::Json => json(value),
        Format::Text => {
            let mut out = std::io::stdout().lock();
            out.write_all(text().as_bytes())?;
            Ok(())
        }
    }
}

/// Prints `value` as pretty JSON on one document.
pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    println!("{text}");
    Ok(())
}

/// The table in `format`.
pub fn table(grid: &Grid, format: TableFormat) -> String {
    match format {
        TableFormat::Md => grid.to_markdown(),
        TableFormat::Json => grid.to_json(),
        TableFormat::Html => grid.to_html(),
        TableFormat::Junit => junit(junit::grid_suite(grid)),
    }
}

/// `suite` as a JUnit XML document, stamped with this machine and now.
pub fn junit(suite: Suite) -> String {
    junit::render(&[suite], &Stamp::now())
}
