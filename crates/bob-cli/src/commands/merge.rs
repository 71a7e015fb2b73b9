//! `bob merge`: tables of CI jobs or shards merged into one.

use bob_core::report::document;
use bob_core::report::table::Grid;

use bob_core::output::ExploreReport;

use crate::cli::MergeArgs;
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob merge`: of tables, or of `bob explore` reports (JSON with `signatures`).
pub fn run(args: MergeArgs) -> Result<Conclusion, CliError> {
    let explore = match args.tables.first() {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("{}: {e}", path.display())))?;
            serde_json::from_str::<serde_json::Value>(&text)
                .map(|v| v.get("signatures").is_some())
                .unwrap_or(false)
        }
        None => false,
    };
    if explore {
        return merge_explore(&args);
    }
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
    print::render(&grid, args.format)?;
    Ok(Conclusion::of_table(&grid))
}

/// `bob merge` of explore reports (shards or runs of the same bounds).
fn merge_explore(args: &MergeArgs) -> Result<Conclusion, CliError> {
    let mut reports = Vec::new();
    for path in &args.tables {
        let text =
            std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        let r: ExploreReport = serde_json::from_str(&text)
            .map_err(|e| usage(format!("{}: not a bob explore report: {e}", path.display())))?;
        reports.push(r);
    }
    if args.doc.is_some() {
        return Err(usage("bob merge --doc: explore reports have no results document"));
    }
    let merged = ExploreReport::merge(reports).map_err(|e| usage(format!("bob merge: {e}")))?;
    print::render(&merged, args.format)?;
    Ok(Conclusion::Explored { signatures: merged.new_signatures(), errors: merged.errors.len() })
}
