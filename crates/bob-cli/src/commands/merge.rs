//! `bob merge`: tables of CI jobs or shards merged into one.

use bob_core::report::document;
use bob_core::report::table::Grid;

use crate::cli::MergeArgs;
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob merge`.
pub fn run(args: MergeArgs) -> Result<Conclusion, CliError> {
    let mut grids = Vec::new();
    for path in &args.tables {
        let text =
            std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        let grid: Grid = serde_json::from_str(&text)
            .map_err(|e| usage(format!("{}: not a bob table: {e}", path.display())))?;
        grids.push(grid);
    }
    let grid = Grid::merge(grids).map_err(|e| usage(e.to_string()))?;
    if let Some(doc) = &args.doc {
        document::write_document(doc, &grid)
            .map_err(|source| CliError::Io { path: doc.clone(), source })?;
    }
    print!("{}", print::table(&grid, args.format));
    Ok(Conclusion::of_table(&grid))
}
