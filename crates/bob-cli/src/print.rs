//! Printing a result: the one path from a rendered document (`bob_core::output::Render`)
//! to stdout, with verdicts in the terminal's colours.

use std::io::Write;

use bob_core::output::{Format, Render};

use crate::color::Painter;
use crate::error::{usage, CliError};

/// Prints `doc` in `format`; a format the document has not is a usage error (clap offers
/// only a command's formats, so this is the backstop for a command with several
/// documents).
pub fn render<D: Render + ?Sized>(doc: &D, format: Format) -> Result<(), CliError> {
    let paint = Painter::stdout();
    let text = doc.render(format, &|v, t| paint.verdict(v, t)).map_err(|e| usage(e.to_string()))?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}
