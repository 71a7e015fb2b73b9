//! `bob table`: every configuration x property cell, printed as a table; the tables are
//! also left under `--out`, and the results document written with `--doc`. With
//! `--record-only` it records the cells' traces as a trace set instead, and with
//! `--traces` it checks such a set's recordings rather than recording.

use bob_core::output::Format;
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
    // A trace set names the cells it recorded; they are the default table.
    let set = args.traces.as_deref().map(run::load_trace_set).transpose()?;
    let configs = match (&set, args.fs.is_empty()) {
        (_, false) => args.fs,
        (Some(set), true) => named(&set.configs, bob_core::fs::by_name, "configuration")?,
        (None, true) => bob_core::fs::all(),
    };
    let properties = match (&set, args.property.is_empty()) {
        (_, false) => args.property,
        (Some(set), true) => named(&set.properties, |n| n.parse().ok(), "property")?,
        (None, true) => Property::ALL.to_vec(),
    };
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
        traces: args.traces,
    };
    opts.validate().map_err(|e| {
        crate::error::usage(format!(
            "bob table --shard: {e}; record once with `bob table --record-only --out DIR` \
             and check each shard with `--traces DIR --shard I/N`"
        ))
    })?;
    if args.record_only {
        let bars = Bars::table(Bars::stderr_is_terminal(), cells_of(&opts));
        let set = run::record_table(&opts, &explore.out, &bars, &CANCEL);
        bars.finish();
        let set = set?;
        // The table's formats other than JSON show the set as text.
        let format = if args.format == Format::Json { Format::Json } else { Format::Text };
        print::render(&set, format)?;
        eprintln!("bob: traces of {} cells in {}", set.cells.len(), explore.out.display());
        return Ok(Conclusion::Done);
    }
    let bars = Bars::table(Bars::stderr_is_terminal(), cells_of(&opts));
    let grid = run::run_table(&opts, &bars, &CANCEL);
    bars.finish();
    let grid = grid?;
    options::add_to_flip_history(&args.cell, &grid.kernel, &grid.cells, opts.traces.is_some())?;
    let out = &explore.out;
    document::write_tables(out, &grid)
        .map_err(|source| CliError::Io { path: out.clone(), source })?;
    if let Some(doc) = &args.doc {
        document::write_document(doc, &grid)
            .map_err(|source| CliError::Io { path: doc.clone(), source })?;
    }
    if let Some(site) = &args.html_site {
        let report = bob_core::report::site::build(out, site, None)?;
        eprint!("bob: {}", report.to_text());
    }
    print::render(&grid, args.format)?;
    let (explored, mounted, secs) = grid.totals();
    eprintln!(
        "bob: {} cells, {explored} states explored, {mounted} mounted, {secs:.0} s; tables in {}",
        grid.cells.len(),
        out.display()
    );
    Ok(Conclusion::of_table(&grid))
}

/// Cells of the table (configurations x properties).
fn cells_of(opts: &TableOptions) -> usize {
    opts.configs.len() * opts.properties.len()
}

/// The configurations or properties a trace set names, as this bob knows them.
fn named<T>(
    names: &[String],
    find: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Result<Vec<T>, CliError> {
    names
        .iter()
        .map(|n| {
            find(n).ok_or_else(|| {
                crate::error::usage(format!("--traces: the set names an unknown {what} {n:?}"))
            })
        })
        .collect()
}
