//! `bob log`: xfstests' replay-log on a dm-log-writes log (bob_core::trace::replay_log),
//! plus bob's `--list`. Its exit statuses are replay-log's (the documented exception to
//! bob's exit codes), so that scripts written for replay-log see the same answers; so
//! does bob run under the name `replay-log`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use bob_core::crash::compare::compare;
use bob_core::output::{Format, LogEntryRow, NamedComparison};
use bob_core::trace::log::{read_log_file, LogReader};
use bob_core::trace::{replay_log, TraceDir};

use crate::cli::LogArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::print;

type Result = std::result::Result<Conclusion, CliError>;

fn log_path(p: &Path) -> PathBuf {
    if p.is_dir() {
        TraceDir::log_path(p)
    } else {
        p.to_owned()
    }
}

/// `bob log`: `--list` is bob's; everything else is replay-log's (its exit codes too).
pub fn run(args: LogArgs) -> Result {
    let given = args.log.as_deref().or(args.log_file.as_deref()).unwrap_or(Path::new(""));
    let path = log_path(given);
    if args.list {
        return as_replay_log(list_log(&path, args.format));
    }
    if let Some(other) = &args.compare {
        return as_replay_log(compare_logs(&path, &log_path(other), args.format));
    }
    let opts = match replay_log::parse_args("bob log", replay_log_argv(&args, &path)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bob log: {}", e.reason());
            return Ok(Conclusion::ReplayLog(replay_log::EXIT_FAILED));
        }
    };
    let rule = replay_log::TargetRule::LoopOnly { force: args.force };
    let cancel: &AtomicBool = &crate::signals::CANCEL;
    let outcome = replay_log::run(&opts, rule, Some(cancel), &mut std::io::stdout().lock());
    Ok(Conclusion::ReplayLog(print_replay_log("bob log", outcome, args.format)))
}

/// bob's own `bob log` answers (`--list`, `--compare`) end as replay-log's do: a log
/// that cannot be read (missing, truncated, malformed) is replay-log's failure, exit 1 in
/// one line, as docs/replay-log.md promises for every `bob log`; an interrupt stays one.
fn as_replay_log(end: Result) -> Result {
    match end {
        Err(CliError::Interrupted) => Err(CliError::Interrupted),
        Err(e) => {
            eprintln!("bob log: {e}");
            Ok(Conclusion::ReplayLog(replay_log::EXIT_FAILED))
        }
        done => done,
    }
}

/// bob invoked as `replay-log` (argv[0]): replay-log's command line, output and exit
/// status; the target may be any device the caller names, as long as it is not mounted.
pub fn replay_log_main() -> ExitCode {
    let mut argv = std::env::args_os();
    let prog = argv.next().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let opts = match replay_log::parse_args(&prog, argv) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(replay_log::EXIT_FAILED);
        }
    };
    let outcome = replay_log::run(
        &opts,
        replay_log::TargetRule::AnyUnmounted,
        None,
        &mut std::io::stdout().lock(),
    );
    ExitCode::from(print_replay_log(&prog, outcome, Format::Text))
}

/// Prints replay-log's answer (or its error) and returns its exit status.
fn print_replay_log(prog: &str, outcome: replay_log::Outcome, format: Format) -> u8 {
    match (&outcome.result, format) {
        (Ok(answer), Format::Json) => match serde_json::to_string(answer) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("{prog}: the answer does not serialize as JSON: {e}");
                return replay_log::EXIT_FAILED;
            }
        },
        (Ok(answer), _) => print!("{answer}"),
        // replay-log prints its usage; `bob log` says why in one line.
        (Err(replay_log::Error::Usage(e)), _) if prog == "bob log" => {
            eprintln!("bob log: {}", e.reason())
        }
        (Err(replay_log::Error::Usage(e)), _) => eprintln!("{e}"),
        (Err(e), _) => eprintln!("{prog}: {e}"),
    }
    outcome.exit_status
}

fn list_log(path: &Path, format: Format) -> Result {
    let reader = LogReader::open(path)?;
    let mut out = std::io::stdout().lock();
    let mut json = Vec::new();
    for (i, e) in reader.enumerate() {
        let row = LogEntryRow::of(i, &e?);
        match format {
            Format::Json => json.push(row),
            _ => {
                let _ = writeln!(out, "{row}");
            }
        }
    }
    if format == Format::Json {
        let text = bob_core::output::json(&json).map_err(std::io::Error::other)?;
        out.write_all(text.as_bytes())?;
    }
    Ok(Conclusion::ReplayLog(0))
}

/// `--compare`: the two recordings side by side (bob_core::crash::compare).
fn compare_logs(a: &Path, b: &Path, format: Format) -> Result {
    use bob_core::crash::{DiskModel, Limits, Strategy};
    let (ta, tb) = (read_log_file(a)?, read_log_file(b)?);
    let c = compare(&ta, &tb, &DiskModel::default(), Strategy::DEFAULT, &Limits::default());
    let (a, b) = (short_name(a), short_name(b));
    print::render(&NamedComparison { comparison: &c, a: &a, b: &b }, format)?;
    Ok(Conclusion::ReplayLog(0))
}

/// A column head for a log: its trace directory's name, else its file name.
fn short_name(log: &Path) -> String {
    let named = if log.file_name().is_some_and(|n| n == "trace.log") { log.parent() } else { None };
    let name = named.unwrap_or(log).file_name().unwrap_or(log.as_os_str());
    let name = name.to_string_lossy();
    // The column is 24 wide: keep the end, which tells recordings apart.
    match name.char_indices().rev().nth(23) {
        Some((at, _)) => format!("..{}", &name[at + 2..]),
        None => name.into_owned(),
    }
}

/// The equivalent replay-log command line, for replay-log's own parser.
fn replay_log_argv(args: &LogArgs, log: &Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec!["--log".into(), log.into()];
    let mut opt = |name: &str, value: Option<&std::ffi::OsStr>| {
        if let Some(value) = value {
            v.push(format!("--{name}").into());
            v.push(value.to_owned());
        }
    };
    opt("replay", args.replay.as_deref().map(Path::as_os_str));
    opt("limit", args.limit.as_deref().map(std::ffi::OsStr::new));
    opt("start-entry", args.start_entry.as_deref().map(std::ffi::OsStr::new));
    opt("start-mark", args.start_mark.as_deref());
    opt("end-mark", args.end_mark.as_deref());
    opt("fsck", args.fsck.as_deref());
    opt("check", args.check.as_deref().map(std::ffi::OsStr::new));
    opt("start-sector", args.start_sector.as_deref().map(std::ffi::OsStr::new));
    opt("end-sector", args.end_sector.as_deref().map(std::ffi::OsStr::new));
    for (on, name) in [
        (args.num_entries, "--num-entries"),
        (args.find, "--find"),
        (args.next_flush, "--next-flush"),
        (args.next_fua, "--next-fua"),
        (args.no_discard, "--no-discard"),
    ] {
        if on {
            v.push(name.into());
        }
    }
    v.extend((0..args.verbose).map(|_| "-v".into()));
    v
}
