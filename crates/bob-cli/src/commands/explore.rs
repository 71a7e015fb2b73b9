//! `bob explore`: bounded workload generation (Ace's bounds, widenable), each workload run
//! on each configuration, failures grouped into signatures with minimal witnesses; the
//! signature table printed (md, json, html) and left under `--out` with the reproducers.

use std::io::Write as _;

use bob_core::run::explore::{self, ExploreOptions, RecoveryCrashes};
use workloads::explore::Bounds;
use workloads::Guarantee;

use crate::cli::{ExploreCmdArgs, OpSet};
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::options;
use crate::print;
use crate::progress::Bars;
use crate::signals::CANCEL;

/// The bounds the arguments give: Ace's, with each list given replacing its default.
fn bounds(args: &ExploreCmdArgs) -> Result<(Bounds, bool), CliError> {
    if args.seq == 0 {
        return Err(usage("bob explore --seq: at least 1"));
    }
    let mut b = match args.op_set {
        OpSet::Ace => Bounds::ace(args.seq),
        OpSet::BeyondAce => Bounds::beyond_ace(args.seq),
        OpSet::All => Bounds::all_ops(args.seq),
    };
    if args.nested {
        b = b.nested();
    }
    macro_rules! take {
        ($field:ident) => {
            if !args.$field.is_empty() {
                b.$field = args.$field.clone();
            }
        };
    }
    take!(ops);
    take!(persist);
    take!(files);
    take!(second_files);
    take!(dirs);
    take!(second_dirs);
    take!(ranges);
    take!(direct_ranges);
    take!(falloc_modes);
    take!(truncate);
    for p in b.files.iter().chain(&b.second_files).chain(&b.dirs).chain(&b.second_dirs) {
        if !p.starts_with('/')
            || p.len() < 2
            || p.split('/').skip(1).any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(usage(format!(
                "bob explore: {p:?} is not an absolute path below the root"
            )));
        }
    }
    let mut documented = false;
    for g in &args.guarantee {
        match g.as_str() {
            "posix" => {}
            "documented" => documented = true,
            name => b.guarantees.push(name.parse::<Guarantee>().map_err(usage)?),
        }
    }
    b.guarantees.sort();
    b.guarantees.dedup();
    Ok((b, documented))
}

/// Runs `bob explore`.
pub fn run(args: ExploreCmdArgs) -> Result<Conclusion, CliError> {
    let (bounds, documented) = bounds(&args)?;
    let Some(first) = args.fs.first().cloned() else {
        return Err(usage("bob explore: no configuration"));
    };
    if let Some((c, why)) = args.fs.iter().find_map(|c| Some((c, c.runs_here().err()?))) {
        return Err(usage(format!("bob explore: {} cannot run here ({})", c.name, why.reason())));
    }
    if !args.list {
        for c in &args.fs {
            bob_core::run::environment::check(c)?;
        }
    }
    let run = options::run_options(
        first,
        workloads::Property::FsyncDurable,
        &args.explore,
        &Default::default(),
        &args.schedules.0,
    )?;
    let known = args.known.as_deref().map(explore::load_known).transpose()?.unwrap_or_default();
    let opts = ExploreOptions {
        known,
        configs: args.fs.clone(),
        bounds,
        sample: args.sample.map(|k| (k, args.explore.seed)),
        shard: args.shard.map(|s| (s.index, s.count)),
        budget: args.budget,
        resume: args.resume,
        documented,
        shrink: !args.no_shrink,
        recovery_crashes: args
            .recovery_crashes
            .filter(|&k| k > 0)
            .map(|per_run| RecoveryCrashes { per_run, max_states: args.recovery_max_states }),
        out: args.explore.out.clone(),
        run,
    };
    if args.list {
        let g = opts.bounds.generator();
        let mut n = 0u64;
        let mut stdout = std::io::stdout().lock();
        for line in explore::list(&g, &opts) {
            n += 1;
            if writeln!(stdout, "{line}").is_err() {
                break; // a closed pipe (`| head`) ends the listing
            }
        }
        eprintln!(
            "{n} workload(s) ({}; {} indices)",
            explore::describe_bounds(&opts.bounds),
            g.indices()
        );
        return Ok(Conclusion::Done);
    }
    let bars = Bars::states(Bars::stderr_is_terminal());
    let report = explore::explore(&opts, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    explore::write_reports(&report, &opts.out)?;
    if let Some(dir) = &args.export_xfstests {
        let written = explore::export_xfstests(&report, &args.fs, dir, 900)?;
        eprintln!("bob: wrote {} xfstests file(s) under {}", written.len(), dir.display());
    }
    print::render(&report, args.format)?;
    if !report.complete && CANCEL.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(CliError::Interrupted);
    }
    Ok(Conclusion::Explored { signatures: report.new_signatures(), errors: report.errors.len() })
}
