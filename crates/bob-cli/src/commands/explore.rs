//! `bob explore`: bounded workload generation (Ace's bounds, widenable), each workload run
//! on each configuration, failures grouped into signatures with minimal witnesses; the
//! signature table printed (md, json, html) and left under `--out` with the reproducers.

use std::io::Write as _;

use bob_core::run::explore::{self, ExploreOptions, RecoveryCrashes};
use workloads::enumerate::Bounds;
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
    b.deps_in_ops = args.deps == "ops";
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

/// `bob explore --list`: each selected workload printed as enumeration finds it, progress
/// on stderr while it skips, SIGINT/SIGTERM honoured between indices, and a last line
/// that never calls a listing cut short (a closed pipe, an interrupt) a total.
fn list(
    g: &workloads::enumerate::Generator,
    opts: &ExploreOptions,
) -> Result<Conclusion, CliError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};
    let started = Instant::now();
    // Progress at most every 2 s, and only after 2 s without a line.
    let last_report = AtomicU64::new(0);
    let last_line = AtomicU64::new(0);
    let report = |scanned: u64, indices: u64| {
        let now = started.elapsed().as_millis() as u64;
        let quiet = now.saturating_sub(last_line.load(Ordering::Relaxed));
        if quiet >= 2000 && now.saturating_sub(last_report.load(Ordering::Relaxed)) >= 2000 {
            last_report.store(now, Ordering::Relaxed);
            eprintln!(
                "bob explore: looked at {scanned} of {indices} indices ({:.2}%), {:.0} s",
                scanned as f64 * 100.0 / indices.max(1) as f64,
                Duration::from_millis(now).as_secs_f64()
            );
        }
    };
    let scan = explore::Scan { cancel: &CANCEL, progress: &report };
    let mut n = 0u64;
    let mut closed = false;
    let mut stdout = std::io::stdout().lock();
    for line in explore::list(g, opts, scan) {
        if writeln!(stdout, "{line}").and_then(|_| stdout.flush()).is_err() {
            closed = true; // a closed pipe (`| head`) ends the listing
            break;
        }
        n += 1;
        last_line.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    if CANCEL.load(Ordering::Relaxed) {
        eprintln!("bob explore: interrupted after {n} workload(s); the listing is not complete");
        return Err(CliError::Interrupted);
    }
    if closed {
        eprintln!(
            "bob explore: stopped after {n} workload(s): the output was closed (not a total; \
             the space has {} indices)",
            g.indices()
        );
    } else {
        eprintln!(
            "{n} workload(s) ({}; {} indices)",
            explore::describe_bounds(&opts.bounds),
            g.indices()
        );
    }
    Ok(Conclusion::Done)
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
    let g = opts.bounds.generator();
    // What a bound means, before any of it is spent: the space's size (and a refusal of
    // one too large to enumerate).
    explore::check_space(&g, &opts)?;
    eprintln!(
        "bob explore: {} indices to look at ({}); {}",
        g.indices(),
        explore::describe_bounds(&opts.bounds),
        match opts.sample {
            Some((k, _)) => format!("drawing {k} workload(s) from them"),
            None => "most make no workload and are skipped".to_owned(),
        }
    );
    if args.list {
        return list(&g, &opts);
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
