//! `bob table`: every configuration x property cell, printed as a table; the tables are
//! also left under `--out`, and the results document written with `--doc`.

use bob_core::report::document;
use bob_core::run::{self, TableOptions};
use workloads::Property;

use crate::cli::TableArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::options;
use crate::print;
use crate::progress::Bars;
use crate::signals::CANCEL;

/// Runs `bob table`.
pub fn run(args: TableArgs) -> Result<Conclusion, CliError> {
    let configs = if args.fs.is_empty() { bob_core::fs::all() } else { args.fs };
    let properties = if args.property.is_empty() { Property::ALL.to_vec() } else { args.property };
    let Some(first) = configs.first().cloned() else {
        return Err(crate::error::usage("bob table: no configuration"));
    };
    let explore = &args.explore;
    let cell = options::run_options(first, properties[0], explore, &args.cell, &args.schedules.0)?;
    let opts = TableOptions {
        configs,
        properties,
        cell,
        atomic_write_unit: explore.atomic_write_unit.clone(),
        fua: explore.fua.into(),
    };
    let bars = Bars::table(Bars::stderr_is_terminal(), opts.configs.len() * opts.properties.len());
    let grid = run::run_table(&opts, &bars, &CANCEL);
    bars.finish();
    let grid = grid?;
    let out = &explore.out;
    document::write_tables(out, &grid)
        .map_err(|source| CliError::Io { path: out.clone(), source })?;
    if let Some(doc) = &args.doc {
        document::write_document(doc, &grid)
            .map_err(|source| CliError::Io { path: doc.clone(), source })?;
    }
    print!("{}", print::table(&grid, args.format));
    let (explored, mounted, secs) = grid.totals();
    eprintln!(
        "bob: {} cells, {explored} states explored, {mounted} mounted, {secs:.0} s; tables in {}",
        grid.cells.len(),
        out.display()
    );
    Ok(Conclusion::of_table(&grid))
}
