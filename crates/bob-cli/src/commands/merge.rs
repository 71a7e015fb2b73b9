//! `bob merge`: tables of CI jobs or shards merged into one.

use bob_core::report::document;
use bob_core::run::explore::merge::{merge_documents, Merged};

use crate::cli::MergeArgs;
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
            print::render(&grid, args.format)?;
            Ok(Conclusion::of_table(&grid))
        }
        Merged::Explore(merged) => {
            if args.doc.is_some() {
                return Err(usage("bob merge --doc: explore reports have no results document"));
            }
            print::render(&merged, args.format)?;
            let errors = merged.errors.len();
            Ok(Conclusion::Explored { signatures: merged.new_signatures(), errors })
        }
    }
}
