//! `bob merge`: tables of CI jobs or shards merged into one.

use bob_core::report::{document, junit};
use bob_core::run::explore::merge::{merge_documents, Merged};

use crate::cli::{MergeArgs, TableFormat};
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob merge`: of tables, or of `bob explore` reports.
pub fn run(args: MergeArgs) -> Result<Conclusion, CliError> {
    let merged = merge_documents(&args.tables).map_err(|e| usage(format!("bob merge: {e}")))?;
    match merged {
        Merged::Table(grid) => {
            if let Some(doc) = &args.doc {
                document::write_document(doc, &grid)
                    .map_err(|source| CliError::Io { path: doc.clone(), source })?;
            }
            print!("{}", print::table(&grid, args.format));
            Ok(Conclusion::of_table(&grid))
        }
        Merged::Explore(merged) => {
            if args.doc.is_some() {
                return Err(usage("bob merge --doc: explore reports have no results document"));
            }
            match args.format {
                TableFormat::Json => print::json(&merged)?,
                TableFormat::Md => print!("{}", merged.to_md()),
                TableFormat::Html => print!("{}", merged.to_html()),
                TableFormat::Junit => print!("{}", print::junit(junit::explore_suite(&merged))),
            }
            let errors = merged.errors.len();
            Ok(Conclusion::Explored { signatures: merged.new_signatures(), errors })
        }
    }
}
