//! `bob merge`: tables of CI jobs or shards merged into one.

use bob_core::report::table::Grid;
use bob_core::report::{document, junit};

use bob_core::output::ExploreReport;

use crate::cli::{MergeArgs, TableFormat};
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
    print!("{}", print::table(&grid, args.format));
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
    match args.format {
        TableFormat::Json => print::json(&merged)?,
        TableFormat::Md => print!("{}", merged.to_md()),
        TableFormat::Html => print!("{}", merged.to_html()),
        TableFormat::Junit => print!("{}", print::junit(junit::explore_suite(&merged))),
    }
    Ok(Conclusion::Explored { signatures: merged.new_signatures(), errors: merged.errors.len() })
}
