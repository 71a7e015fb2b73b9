//! `bob bench`: bob's engine against the naive per-state pipeline and the mount floor on
//! one list of crash states, plus the recorder's overhead (see `bob_core::bench`).
//! Exit 0 when both pipelines reach the same verdict on every state, 2 otherwise.
//! `bob bench --table`: a whole table with the engine's shortcuts on against all off
//! (exit 0 when both tables ran; differing verdicts are reported, not failed).
//! `bob bench --stream-states N`: N crash states of one recording generated and deduped
//! without mounting, with the process's memory after the first and last tenth.
//! `bob bench --recall`: the recall catalog's expressible entries run on this kernel,
//! found or missed where the catalog knows the kernel buggy, held or falsely alarmed where
//! it knows it fixed (`bob_core::bench::recall`); other kernels come through `guest.rs`.

use bob_core::bench::{self, BenchOptions};
use bob_core::run::{environment, TableOptions};
use workloads::{Property, Schedule};

use crate::cli::BenchArgs;
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::options;
use crate::print;
use crate::progress::Bars;
use crate::signals::CANCEL;

/// Runs `bob bench`.
pub fn run(args: BenchArgs) -> Result<Conclusion, CliError> {
    if args.recall {
        return run_recall(args);
    }
    if args.format == bob_core::output::Format::Md {
        return Err(usage(
            "bob bench: --format md goes with --recall (the others print text or json)",
        ));
    }
    if args.table {
        return run_table(args);
    }
    if let Some(latency) = args.latency {
        return run_latency(&args, latency);
    }
    if let Some(n) = args.stream_states {
        return run_stream(args, n);
    }
    let (fs, property) = one_cell(&args)?;
    environment::check_runnable(&fs)?;
    let mut opts = BenchOptions::new(fs, property);
    opts.multi_block_bytes = args.multi_block_bytes.map(|b| b.0);
    opts.naive_sample = args.naive_sample.map(|n| n as usize);
    opts.floor_runs = args.floor_runs as usize;
    if let Some(j) = args.jobs {
        opts.jobs = j;
    }
    opts.recorder_bytes = args
        .recorder_mib
        .checked_shl(20)
        .filter(|v| v >> 20 == args.recorder_mib)
        .ok_or_else(|| usage("--recorder-mib is too large"))?;
    opts.timeouts = options::timeouts(args.recovery_timeout);
    opts.scratch = args.scratch;

    let bars = Bars::phases(Bars::stderr_is_terminal());
    let report = bench::run(&opts, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    print::render(&report, args.format)?;
    if let Some(d) = &report.first_disagreement {
        return Err(CliError::BenchDisagreement {
            count: report.disagreements,
            state: d.state.clone(),
            index: d.index,
            naive: d.naive.to_string(),
            engine: d.engine.to_string(),
        });
    }
    Ok(Conclusion::Done)
}

/// `bob bench --fs CONFIGS --latency MODEL`: the benchmark that measures the
/// configurations named ([`bench::LatencyBench`]).
fn run_latency(
    args: &BenchArgs,
    latency: bob_core::record::latency::Latency,
) -> Result<Conclusion, CliError> {
    let which = bench::LatencyBench::of(&args.fs)
        .map_err(|e| usage(format!("bob bench --latency: {e}")))?;
    let env = |e: bench::FsBenchError| CliError::Environment(e.to_string());
    match which {
        bench::LatencyBench::Conquest => {
            let report = bench::run_conquest_bench(latency, bench::CONQUEST_FILES).map_err(env)?;
            print::render(&report, args.format)?;
        }
        bench::LatencyBench::Metadata(designs) => {
            let report =
                bench::run_meta_bench(&designs, latency, bench::META_FILES).map_err(env)?;
            print::render(&report, args.format)?;
        }
        bench::LatencyBench::Valor => {
            let report = bench::run_valor_bench(latency, bench::VALOR_PAGES).map_err(env)?;
            print::render(&report, args.format)?;
        }
        bench::LatencyBench::Journaling => {
            let postmark = bench::Postmark::default();
            let report = bench::run_fs_bench(latency, bench::ITERATIONS, &postmark).map_err(env)?;
            print::render(&report, args.format)?;
        }
    }
    Ok(Conclusion::Done)
}

/// `bob bench --stream-states N`: N states of one recording generated and deduped
/// without mounting.
fn run_stream(args: BenchArgs, n: u64) -> Result<Conclusion, CliError> {
    let (fs, property) = one_cell(&args)?;
    environment::check_runnable(&fs)?;
    let opts = bench::StreamOptions {
        config: fs,
        property,
        states: usize::try_from(n).map_err(|_| usage("--stream-states is too large"))?,
        multi_block_bytes: args.multi_block_bytes.map(|b| b.0),
        timeouts: options::timeouts(args.recovery_timeout),
        scratch: args.scratch,
    };
    let bars = Bars::phases(Bars::stderr_is_terminal());
    let report = bench::run_stream_bench(&opts, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    print::render(&report, args.format)?;
    Ok(Conclusion::Done)
}

/// The one configuration and property of `bob bench` without `--table`.
fn one_cell(args: &BenchArgs) -> Result<(bob_core::fs::FsConfig, Property), CliError> {
    Ok(match (&args.fs[..], &args.property[..]) {
        ([], []) => (default_config()?, Property::SingleBlockAppend),
        ([fs], []) => (fs.clone(), Property::SingleBlockAppend),
        ([], [p]) => (default_config()?, *p),
        ([fs], [p]) => (fs.clone(), *p),
        _ => return Err(usage("bob bench: one --fs and one --property (several need --table)")),
    })
}

/// The configuration `bob bench` measures unless told otherwise.
fn default_config() -> Result<bob_core::fs::FsConfig, CliError> {
    bob_core::fs::by_name("ext4-ordered").ok_or_else(|| usage("ext4-ordered is not known"))
}

/// `bob bench --table`: the table of `--fs` x `--property` (default: all of each), every
/// drain schedule, the default disk model and strategies, timed both ways.
fn run_table(args: BenchArgs) -> Result<Conclusion, CliError> {
    let configs = if args.fs.is_empty() { bob_core::fs::all() } else { args.fs.clone() };
    let properties = if args.property.is_empty() { Property::ALL.to_vec() } else { args.property };
    let Some(first) = configs.first().cloned() else {
        return Err(usage("bob bench --table: no configuration"));
    };
    let explore = crate::cli::ExploreArgs {
        max_states: args.max_states,
        jobs: args.jobs,
        recovery_timeout: args.recovery_timeout,
        scratch: args.scratch,
        ..crate::cli::ExploreArgs::defaults()
    };
    let cell = options::run_options(
        first,
        properties[0],
        &explore,
        &crate::cli::CellArgs::default(),
        Schedule::ALL,
    )?;
    let table = TableOptions {
        configs,
        properties,
        cell,
        atomic_write_unit: explore.atomic_write_unit.clone(),
        fua: explore.fua.into(),
        traces: None,
    };
    if args.full {
        return run_full_table(table, args.sample_every as usize, args.format);
    }
    let bars = Bars::phases(Bars::stderr_is_terminal());
    let report = bench::run_table_bench(&table, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    print::render(&report, args.format)?;
    Ok(Conclusion::Done)
}

/// `bob bench --table --full`: the table `bob table --atomic-write-unit 512,4096` makes
/// (narrowed by `--fs` and `--property` if given), less the configurations this kernel
/// cannot run, which are named in the report.
fn run_full_table(
    mut table: TableOptions,
    sample_every: usize,
    format: bob_core::output::Format,
) -> Result<Conclusion, CliError> {
    let mut skipped = Vec::new();
    table.configs.retain(|c| match environment::unavailable_here(c) {
        Some(why) => {
            skipped.push(format!("{}: {why}", c.name));
            false
        }
        None => true,
    });
    let Some(first) = table.configs.first() else {
        return Err(usage(format!(
            "bob bench --table --full: no configuration runs on this kernel ({})",
            skipped.join("; ")
        )));
    };
    table.cell.config = first.clone();
    table.atomic_write_unit = "512,4096".parse().map_err(usage)?;
    let opts = bench::FullTableOptions { table, skipped, sample_every };
    let bars = Bars::phases(Bars::stderr_is_terminal());
    let report = bench::run_full_table_bench(&opts, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    print::render(&report, format)?;
    Ok(Conclusion::Done)
}

/// `bob bench --recall` on this machine's kernel: the options of each entry's cell, the
/// run, the report; its conclusion for the exit code.
fn run_recall(args: BenchArgs) -> Result<Conclusion, CliError> {
    use bob_core::bench::recall::{self, Catalog, RecallOptions};
    let catalog = Catalog::load(&args.catalog).map_err(recall::RecallError::from)?;
    let explore = crate::cli::ExploreArgs {
        jobs: args.jobs,
        recovery_timeout: args.recovery_timeout,
        scratch: args.scratch.clone(),
        out: args.out.clone(),
        ..crate::cli::ExploreArgs::defaults()
    };
    let any = default_config()?;
    let cell = options::run_options(
        any,
        Property::FsyncDurable,
        &explore,
        &crate::cli::CellArgs { recordings: args.recordings, ..Default::default() },
        &args.schedules.0,
    )?;
    let opts = RecallOptions {
        entries: args.entry.clone(),
        known_only: args.known_only,
        cell,
        atomic_write_unit: explore.atomic_write_unit.clone(),
        fua: explore.fua.into(),
        catalog,
    };
    let runnable = opts.catalog.select(&opts.entries).map_err(recall::RecallError::from)?;
    let count = runnable.iter().filter(|e| e.expressible).count();
    let bars = Bars::table(Bars::stderr_is_terminal(), count);
    let report = recall::run_recall(&opts, "host", &bars, &CANCEL);
    bars.finish();
    let report = report?;
    print::render(&report, args.format)?;
    let (misses, errors) = report.misses_and_errors();
    Ok(Conclusion::Recall { misses, errors })
}
