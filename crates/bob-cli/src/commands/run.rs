//! `bob run`: one configuration x property cell (one per disk model), end to end.

use bob_core::check::OutcomeKind;
use bob_core::device::loopdev;
use bob_core::output::Format;
use bob_core::run::{self, environment};

use crate::cli::{Backend, RunArgs};
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::options;
use crate::print;
use crate::progress::Bars;
use crate::signals::CANCEL;

/// Runs `bob run`.
pub fn run(args: RunArgs) -> Result<Conclusion, CliError> {
    let workload = args.workload.as_deref().map(run::load_workload).transpose()?;
    // With a workload file the property only fills the option's place: the cell is named
    // after the workload and judged by its own ops' promises.
    let (config, property) = (args.fs, args.property.unwrap_or(workloads::Property::FsyncDurable));
    let recorder = match args.backend {
        Backend::Fuse => bob_core::record::Recorder::Fuse,
        Backend::DmLogWrites => {
            // Only a recording needs the target: a saved trace is checked anywhere.
            if args.trace.is_none() && args.traces.is_none() {
                bob_core::record::dm_log_writes_available().map_err(CliError::Environment)?;
            }
            bob_core::record::Recorder::DmLogWrites
        }
    };
    if let Err(why) = config.runs_here() {
        let cell = run::unavailable_cell(&config, property, &why.reason());
        print::render(std::slice::from_ref(&cell), args.format)?;
        return Ok(Conclusion::Named(cell.verdict));
    }
    if !config.applies(property) {
        let cell = run::not_applicable_cell(&config, property);
        print::render(std::slice::from_ref(&cell), args.format)?;
        return Ok(Conclusion::Named(cell.verdict));
    }
    if let Some(dev) = &args.device {
        loopdev::vet_user_device(dev, args.force)?;
        if !loopdev::is_loop_device(dev) {
            return Err(usage(format!(
                "{}: bob records through a loop device over its own image, and this is not one",
                dev.display()
            )));
        }
    }
    let mut options =
        options::run_options(config, property, &args.explore, &args.cell, &args.schedules.0)?;
    options.device = args.device;
    options.recorder = recorder;
    options.workload = workload;
    options.trace = match &args.traces {
        Some(dir) => {
            let set = run::load_trace_set(dir)?;
            let (config, property) = (options.config.name, options.property.name());
            Some(run::cell_traces_in(&set, dir, config, property, &options.schedules)?)
        }
        None => args.trace,
    };
    options.save_trace = args.save_trace;
    options.validate().map_err(|e| {
        usage(format!(
            "bob run --shard: {e}; check a saved one with `--trace DIR` (from --save-trace) \
             or `--traces DIR` (from `bob table --record-only`)"
        ))
    })?;
    environment::check(&options.config)?;
    let bars = Bars::states(args.format == Format::Text && Bars::stderr_is_terminal());
    let cells = run::run_cell(&options, &bars, &CANCEL);
    bars.finish();
    let cells = cells?;
    let kernel = bob_core::host::uname_release();
    options::add_to_flip_history(&args.cell, &kernel, &cells, options.trace.is_some())?;
    print::render(&cells[..], args.format)?;
    Ok(Conclusion::Named(OutcomeKind::worst(cells.iter().map(|c| c.verdict))))
}
