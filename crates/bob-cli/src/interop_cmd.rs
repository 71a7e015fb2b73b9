//! Interop commands: `bob import` (dm-log-writes logs, blktrace and blkparse output),
//! `bob log` (xfstests replay-log's verbs), `bob record` and `bob mark` (bring your own
//! workload), `bob check` (explore a recorded trace with your own checker).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bob_core::check::{self, EngineOptions, Judge, UserChecker};
use bob_core::crash::{self, Limits};
use bob_core::fs::Timeouts;
use bob_core::record::custom::{self, Annotate, Backend, CommandRequest};
use bob_core::report::{witness, Cell};
use bob_core::run::WorkDir;
use bob_core::trace::blktrace::{self, BlockRequest};
use bob_core::trace::log::{read_log_file, write_log_file, LogReader};
use bob_core::trace::replay_log;
use bob_core::trace::sidecar::{BaseImageInfo, Sidecar, SIDECAR_FORMAT};
use bob_core::trace::{flags, Entry, EntryKind, Trace, TraceDir};

use crate::cli::{ExploreArgs, Format};
use crate::commands::{check_environment, config_named, exit_for, parse_strategies, usage, Bar};
use crate::exit;
use crate::signals::CANCEL;

type Result = std::result::Result<ExitCode, Box<dyn std::error::Error>>;

/// `bob import` arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A dm-log-writes log (from the kernel target, xfstests, or bob).
    #[arg(required_unless_present = "blktrace", conflicts_with = "blktrace")]
    pub log: Option<PathBuf>,
    /// Instead: blktrace output to decode into block-request annotations: a directory of
    /// per-CPU files (`<dev>.blktrace.<cpu>`), one such file, or blkparse's text output.
    #[arg(long)]
    pub blktrace: Option<PathBuf>,
    /// Trace directory to write (log import), or whose trace to annotate (blktrace).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The image the log applies to (copied into the trace directory as base.img).
    #[arg(long, conflicts_with = "blktrace")]
    pub base: Option<PathBuf>,
    /// Configuration the log was recorded on (see `bob list`), needed by `bob check`.
    #[arg(long = "fs", conflicts_with = "blktrace")]
    pub fs: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `bob log` arguments: every xfstests replay-log option, with replay-log's meaning,
/// output and exit status (bob_core::trace::replay_log), plus bob's `--list`, `--format`
/// and `--force`. Numbers stay strings here: replay-log's own parser reads them (hex,
/// octal, its error messages), so that both command lines accept the same values.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The log (a dm-log-writes log file or device, or a trace directory holding
    /// trace.log); or give it with --log.
    #[arg(required_unless_present = "log_file", conflicts_with = "log_file")]
    pub log: Option<PathBuf>,
    /// The log, as replay-log takes it.
    #[arg(long = "log", value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// Print every entry: index, sector, sectors (512-byte units), flags, mark text.
    #[arg(long)]
    pub list: bool,
    /// Print the number of entries.
    #[arg(long)]
    pub num_entries: bool,
    /// Print ENTRY@SECTOR of the entry found by --end-mark, --next-fua, --next-flush or
    /// --limit (SECTOR: the log position after it).
    #[arg(long)]
    pub find: bool,
    /// Replay onto this image file or device (it must exist). bob refuses a mounted
    /// device, and a block device that is not a loop device unless --force.
    #[arg(long, value_name = "DEV_OR_IMAGE")]
    pub replay: Option<PathBuf>,
    /// Stop after this many entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<String>,
    /// Stop at (find) the next entry with FLUSH.
    #[arg(long)]
    pub next_flush: bool,
    /// Stop at (find) the next entry with FUA.
    #[arg(long)]
    pub next_fua: bool,
    /// Start at this entry.
    #[arg(long, value_name = "N")]
    pub start_entry: Option<String>,
    /// Start after this mark.
    #[arg(long, value_name = "TEXT")]
    pub start_mark: Option<std::ffi::OsString>,
    /// Stop at (find) this mark (the mark is replayed; it carries no data).
    #[arg(long, visible_alias = "mark", value_name = "TEXT")]
    pub end_mark: Option<std::ffi::OsString>,
    /// Do not replay discards.
    #[arg(long)]
    pub no_discard: bool,
    /// Shell command to run at the --check points (after an fsync of the target).
    #[arg(long, value_name = "CMD")]
    pub fsck: Option<std::ffi::OsString>,
    /// When to run --fsck: every N entries, or after each flush, fua or discard.
    #[arg(long, value_name = "N|flush|fua|discard")]
    pub check: Option<String>,
    /// Skip writes that end at or before this sector (log sectors).
    #[arg(long, value_name = "SECTOR")]
    pub start_sector: Option<String>,
    /// Skip writes that start after this sector (log sectors).
    #[arg(long, value_name = "SECTOR")]
    pub end_sector: Option<String>,
    /// Print replayed entries; twice, also skipped and seeked-over ones.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Replay onto a block device that is not a loop device.
    #[arg(long)]
    pub force: bool,
    /// Output format (json: the answer as one object).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

impl LogArgs {
    /// The equivalent replay-log command line, for replay-log's own parser.
    fn replay_log_argv(&self, log: &Path) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = vec!["--log".into(), log.into()];
        let mut opt = |name: &str, value: Option<&std::ffi::OsStr>| {
            if let Some(value) = value {
                v.push(format!("--{name}").into());
                v.push(value.to_owned());
            }
        };
        opt("replay", self.replay.as_deref().map(Path::as_os_str));
        opt("limit", self.limit.as_deref().map(std::ffi::OsStr::new));
        opt("start-entry", self.start_entry.as_deref().map(std::ffi::OsStr::new));
        opt("start-mark", self.start_mark.as_deref());
        opt("end-mark", self.end_mark.as_deref());
        opt("fsck", self.fsck.as_deref());
        opt("check", self.check.as_deref().map(std::ffi::OsStr::new));
        opt("start-sector", self.start_sector.as_deref().map(std::ffi::OsStr::new));
        opt("end-sector", self.end_sector.as_deref().map(std::ffi::OsStr::new));
        for (on, name) in [
            (self.num_entries, "--num-entries"),
            (self.find, "--find"),
            (self.next_flush, "--next-flush"),
            (self.next_fua, "--next-fua"),
            (self.no_discard, "--no-discard"),
        ] {
            if on {
                v.push(name.into());
            }
        }
        v.extend((0..self.verbose).map(|_| "-v".into()));
        v
    }
}

/// How `bob record` annotates the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AnnotateArg {
    /// Block tracepoints where tracefs is mounted.
    Auto,
    /// Block tracepoints always (tracefs is mounted privately if needed).
    Tracefs,
    /// Live blktrace (needs debugfs and relay files).
    Blktrace,
    /// No annotations.
    None,
}

/// `bob record` arguments.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Configuration to make and mount (see `bob list`).
    #[arg(long = "fs")]
    pub fs: String,
    /// Trace directory to write (trace.log, trace.json, base.img).
    #[arg(long)]
    pub out: PathBuf,
    /// A free loop device to record on (default: any free one).
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// Recording backend.
    #[arg(long, value_enum, default_value_t = crate::cli::Backend::Fuse)]
    pub backend: crate::cli::Backend,
    /// The log device of the dm-log-writes backend.
    #[arg(long, required_if_eq("backend", "dm-log-writes"))]
    pub log_dev: Option<PathBuf>,
    /// Block-request annotations from the kernel's block tracepoints.
    #[arg(long, value_enum, default_value_t = AnnotateArg::Auto)]
    pub annotate: AnnotateArg,
    /// Directory for scratch files (default: the system temp dir).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// The command and its arguments (after `--`); it runs with the mount as its working
    /// directory and BOB_MARK_FILE naming the mark control file.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `bob mark` arguments.
#[derive(Debug, clap::Args)]
pub struct MarkArgs {
    /// The mark's text (words are joined with spaces).
    #[arg(required = true)]
    pub text: Vec<String>,
    /// The control file (default: $BOB_MARK_FILE, set by `bob record`).
    #[arg(long)]
    pub file: Option<PathBuf>,
}

/// `bob check` arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Trace directory (from `bob record`, `bob import --base`, or `bob run --save-trace`).
    pub dir: PathBuf,
    /// Shell command run in each recovered mount (its working directory); exit 0 means
    /// consistent. Without it, only recovery and the read-only fsck judge.
    #[arg(long)]
    pub checker: Option<String>,
    /// Seconds before a checker run is killed (a timeout outcome).
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
}

fn flag_names(f: u64) -> String {
    let mut names: Vec<&str> = [
        (flags::FLUSH, "FLUSH"),
        (flags::FUA, "FUA"),
        (flags::DISCARD, "DISCARD"),
        (flags::MARK, "MARK"),
        (flags::METADATA, "METADATA"),
    ]
    .iter()
    .filter(|(bit, _)| f & bit != 0)
    .map(|(_, n)| *n)
    .collect();
    let unknown = f & !(flags::FLUSH | flags::FUA | flags::DISCARD | flags::MARK | flags::METADATA);
    let extra = format!("{unknown:#x}");
    if unknown != 0 {
        names.push(&extra);
    }
    if names.is_empty() {
        "-".into()
    } else {
        names.join("|")
    }
}

fn summary(trace: &Trace) -> serde_json::Value {
    let count = |k: fn(&Entry) -> bool| trace.entries.iter().filter(|e| k(e)).count();
    serde_json::json!({
        "entries": trace.entries.len(),
        "writes": count(|e| matches!(e.kind(), EntryKind::Write { .. })),
        "flushes": count(|e| e.flags & flags::FLUSH != 0),
        "fua": count(|e| e.flags & flags::FUA != 0),
        "discards": count(|e| e.kind() == EntryKind::Discard),
        "marks": count(|e| e.kind() == EntryKind::Mark),
        "metadata": count(|e| e.is_metadata()),
        "sector_size": trace.sector_size,
    })
}

/// Adds the block requests and their mapping onto entries to the sidecar file, under
/// `block_requests` (the sidecar's reader ignores keys it does not know).
fn save_requests(
    dir: &Path,
    source: &str,
    requests: &[BlockRequest],
    annotation: &blktrace::Annotation,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let path = TraceDir::sidecar_path(dir);
    let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let entries: Vec<[usize; 2]> = annotation
        .request_of_entry
        .iter()
        .enumerate()
        .filter_map(|(e, r)| r.map(|r| [e, r]))
        .collect();
    value["block_requests"] = serde_json::json!({
        "source": source,
        "matched_writes": annotation.matched,
        "unmatched_writes": annotation.unmatched,
        "metadata_writes": annotation.metadata,
        "entry_request": entries,
        "requests": requests,
    });
    std::fs::write(&path, serde_json::to_string_pretty(&value)? + "\n")?;
    Ok(())
}

/// `bob import`.
pub fn import(args: ImportArgs) -> Result {
    if let Some(src) = &args.blktrace {
        return import_blktrace(src, &args);
    }
    let log = args.log.as_deref().ok_or_else(|| usage("bob import: give a LOG or --blktrace"))?;
    let out = args.out.as_deref().ok_or_else(|| usage("bob import LOG needs --out DIR"))?;
    let trace = read_log_file(log)?;
    let config = match &args.fs {
        Some(name) => config_named(name)?.name.to_owned(),
        None => "unknown".to_owned(),
    };
    std::fs::create_dir_all(out)?;
    let base_image = match &args.base {
        Some(base) => {
            let dest = out.join("base.img");
            bob_core::image::copy_sparse(base, &dest)
                .map_err(|e| usage(format!("{}: {e}", base.display())))?;
            BaseImageInfo {
                file: "base.img".into(),
                size_bytes: std::fs::metadata(&dest)?.len(),
                blake3: bob_core::image::file_digest(&dest)?,
            }
        }
        // An empty file name says the log came without its base image: `bob log --replay`
        // works on it, `bob check` asks for --base.
        None => BaseImageInfo { file: String::new(), size_bytes: 0, blake3: String::new() },
    };
    let sidecar = Sidecar {
        format: SIDECAR_FORMAT.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        kernel: bob_core::record::kernel_release(),
        config,
        property: None,
        workload: serde_json::json!({
            "name": format!("imported: {}", log.display()),
            "property": null, "setup": [], "ops": [], "drain": [],
        }),
        observed: serde_json::json!({ "inos": {} }),
        base_image,
        ops: Vec::new(),
        roles: Vec::new(),
        schedule: None,
        fua: None,
    };
    TraceDir::write(out, &trace, &sidecar)?;
    let mut s = summary(&trace);
    s["out"] = out.display().to_string().into();
    s["base_image"] = (!sidecar.base_image.file.is_empty()).into();
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&s)?),
        Format::Text => {
            println!(
                "imported {} entries ({} writes, {} flushes, {} FUA, {} discards, {} marks) into {}",
                s["entries"], s["writes"], s["flushes"], s["fua"], s["discards"], s["marks"],
                out.display()
            );
            if sidecar.base_image.file.is_empty() {
                println!("  no base image (--base): bob log can replay it; bob check needs one");
            }
        }
    }
    Ok(ExitCode::from(exit::HELD))
}

fn import_blktrace(src: &Path, args: &ImportArgs) -> Result {
    let requests = blktrace::read_source(src)?;
    let mut annotated = None;
    if let Some(out) = &args.out {
        if TraceDir::log_path(out).is_file() {
            let mut td = TraceDir::open(out)?;
            let a = blktrace::annotate(&mut td.trace, &requests);
            write_log_file(&TraceDir::log_path(out), &td.trace)?;
            save_requests(out, "blktrace", &requests, &a)?;
            annotated = Some(a);
        } else {
            std::fs::create_dir_all(out)?;
            let path = out.join("block-requests.json");
            std::fs::write(&path, serde_json::to_string_pretty(&requests)? + "\n")?;
        }
    }
    match args.format {
        Format::Json => {
            let v = serde_json::json!({
                "requests": requests,
                "annotated": annotated.as_ref().map(|a| serde_json::json!({
                    "matched_writes": a.matched, "unmatched_writes": a.unmatched,
                    "metadata_writes": a.metadata,
                })),
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Text => {
            for r in &requests {
                let t = |x: Option<u64>| x.map_or("-".to_owned(), |n| format!("{n}"));
                println!(
                    "{},{} {:<5} {:>10} + {:<5} issue {} complete {} error {}",
                    r.major,
                    r.minor,
                    r.rwbs,
                    r.sector,
                    r.nr_sectors(),
                    t(r.issue_ns),
                    t(r.complete_ns),
                    r.error
                );
            }
            println!("{} requests from {}", requests.len(), src.display());
            if let Some(a) = annotated {
                println!(
                    "annotated the trace: {} writes matched ({} metadata), {} unmatched",
                    a.matched, a.metadata, a.unmatched
                );
            }
        }
    }
    Ok(ExitCode::from(exit::HELD))
}

fn log_path(p: &Path) -> PathBuf {
    if p.is_dir() {
        TraceDir::log_path(p)
    } else {
        p.to_owned()
    }
}

/// `bob log`: `--list` is bob's; everything else is replay-log's (its exit codes too).
pub fn log(args: LogArgs) -> Result {
    let given = args.log.as_deref().or(args.log_file.as_deref()).unwrap_or(Path::new(""));
    let path = log_path(given);
    if args.list {
        return list_log(&path, args.format);
    }
    let opts = match replay_log::parse_args("bob log", args.replay_log_argv(&path)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bob log: {}", e.reason());
            return Ok(ExitCode::from(replay_log::EXIT_FAILED));
        }
    };
    let rule = replay_log::TargetRule::LoopOnly { force: args.force };
    let outcome = replay_log::run(&opts, rule, Some(&CANCEL), &mut std::io::stdout().lock());
    Ok(print_replay_log("bob log", outcome, args.format))
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
    print_replay_log(&prog, outcome, Format::Text)
}

fn print_replay_log(prog: &str, outcome: replay_log::Outcome, format: Format) -> ExitCode {
    match (&outcome.result, format) {
        (Ok(answer), Format::Text) => print!("{answer}"),
        (Ok(answer), Format::Json) => {
            println!("{}", serde_json::to_string(answer).unwrap_or_default())
        }
        // replay-log prints its usage; `bob log` says why in one line.
        (Err(replay_log::Error::Usage(e)), _) if prog == "bob log" => {
            eprintln!("bob log: {}", e.reason())
        }
        (Err(replay_log::Error::Usage(e)), _) => eprintln!("{e}"),
        (Err(e), _) => eprintln!("{prog}: {e}"),
    }
    ExitCode::from(outcome.exit_status)
}

fn list_log(path: &Path, format: Format) -> Result {
    let reader = LogReader::open(path)?;
    let mut out = std::io::stdout().lock();
    let mut json = Vec::new();
    for (i, e) in reader.enumerate() {
        let e = e?;
        match format {
            Format::Text => {
                let mark = e.mark_text().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{i} {} {} {}{}{}",
                    e.sector,
                    e.nr_sectors,
                    flag_names(e.flags),
                    if mark.is_empty() { "" } else { " " },
                    mark
                );
            }
            Format::Json => json.push(serde_json::json!({
                "index": i, "sector": e.sector, "nr_sectors": e.nr_sectors,
                "flags": e.flags, "flag_names": flag_names(e.flags), "mark": e.mark_text(),
            })),
        }
    }
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    Ok(ExitCode::from(exit::HELD))
}

/// `bob record`.
pub fn record(args: RecordArgs) -> Result {
    let config = config_named(&args.fs)?;
    let backend = match args.backend {
        crate::cli::Backend::Fuse => Backend::Fuse,
        crate::cli::Backend::DmLogWrites => {
            bob_core::record::dm_log_writes_available().map_err(usage)?;
            let log_dev = args.log_dev.clone().ok_or_else(|| usage("--log-dev DEV is required"))?;
            Backend::DmLogWrites { log_dev }
        }
    };
    if let Some(dev) = &args.device {
        bob_core::device::loopdev::vet_user_device(dev, false)?;
    }
    check_environment(&config)?;
    let work = WorkDir::new(args.scratch.as_deref())?;
    let started = Instant::now();
    let rec = custom::record_command(&CommandRequest {
        config: &config,
        command: &args.command,
        device: args.device.as_deref(),
        work_dir: work.path(),
        timeouts: Timeouts::default(),
        annotate: match args.annotate {
            AnnotateArg::Auto => Annotate::Auto,
            AnnotateArg::Tracefs => Annotate::Tracefs,
            AnnotateArg::Blktrace => Annotate::Blktrace,
            AnnotateArg::None => Annotate::Off,
        },
        backend,
    })?;
    TraceDir::write(&args.out, &rec.trace, &rec.sidecar)?;
    bob_core::image::copy_sparse(&rec.base_image, &args.out.join("base.img"))?;
    if let (Some(r), Some(a)) = (&rec.requests, &rec.annotation) {
        save_requests(&args.out, "tracefs", r, a)?;
    }
    let s = summary(&rec.trace);
    println!(
        "recorded {} entries ({} writes, {} flushes, {} marks, {} metadata) in {:.1}s into {}",
        s["entries"],
        s["writes"],
        s["flushes"],
        s["marks"],
        s["metadata"],
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    if let Some(a) = &rec.annotation {
        println!(
            "  tracefs: {} block requests; {} writes matched ({} metadata), {} unmatched",
            rec.requests.as_ref().map_or(0, Vec::len),
            a.matched,
            a.metadata,
            a.unmatched
        );
    }
    match rec.exit_code {
        Some(0) => Ok(ExitCode::from(exit::HELD)),
        code => Err(usage(format!(
            "the command {} ({}); the trace was written anyway",
            match code {
                Some(c) => format!("exited {c}"),
                None => "was killed by a signal".to_owned(),
            },
            args.command.join(" ")
        ))),
    }
}

/// `bob mark`.
pub fn mark(args: MarkArgs) -> Result {
    let file = match args.file.or_else(|| std::env::var_os(custom::MARK_FILE_ENV).map(PathBuf::from))
    {
        Some(f) => f,
        None => {
            return Err(usage(
                "BOB_MARK_FILE is not set: bob mark runs inside a command started by `bob record` (or give --file)",
            ))
        }
    };
    let text = args.text.join(" ");
    custom::send_mark(&file, &text, Duration::from_secs(10))
        .map_err(|e| usage(format!("{}: {e}", file.display())))?;
    Ok(ExitCode::from(exit::HELD))
}

/// `bob check`.
pub fn check(args: CheckArgs) -> Result {
    let started = Instant::now();
    let sidecar = Sidecar::load(&TraceDir::sidecar_path(&args.dir))?;
    if sidecar.base_image.file.is_empty() {
        return Err(usage(format!(
            "{}: the trace has no base image; import it with --base IMAGE",
            args.dir.display()
        )));
    }
    if args.explore.shard.is_some() {
        return Err(usage("bob check does not shard; run it whole"));
    }
    let (mut subject, sidecar) = witness::load_subject(&args.dir)?;
    check_environment(&subject.config)?;
    match crate::commands::disk_models(&args.explore, &subject.config.block_size())?.as_slice() {
        [model] => subject.set_disk(*model),
        _ => {
            return Err(usage(
                "bob check judges one disk model at a time: give one --atomic-write-unit",
            ))
        }
    }
    if let Some(c) = &args.checker {
        if c.trim().is_empty() {
            return Err(usage("--checker: empty command"));
        }
    }
    let judge = match &args.checker {
        Some(command) => Judge::Checker(UserChecker {
            command: command.clone(),
            timeout: Duration::from_secs(args.timeout.max(1)),
        }),
        None => Judge::Oracle,
    };
    let strategies = parse_strategies(&args.explore.strategy)?;
    let limits = Limits {
        max_states: args.explore.max_states,
        seed: args.explore.seed,
        ..Limits::default()
    };
    let states = crash::generate(&subject.trace, &subject.epochs, &strategies, &limits).states;
    let work = WorkDir::new(args.explore.scratch.as_deref())?;
    let timeouts = Timeouts {
        recovery: Duration::from_secs(args.explore.recovery_timeout),
        ..Timeouts::default()
    };
    let engine = EngineOptions {
        jobs: args
            .explore
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
        timeouts,
        work_dir: work.path().to_owned(),
    };
    let bar = Bar::new(
        args.format == Format::Text && std::io::IsTerminal::is_terminal(&std::io::stderr()),
    );
    bob_core::run::Progress::phase(&bar, "checking", states.len());
    let results = check::run_states_with(
        &subject,
        &judge,
        &states,
        &engine,
        &|d, t| bob_core::run::Progress::state_done(&bar, d, t),
        &CANCEL,
    );
    bar.bar.finish_and_clear();
    let results = results?;
    let label = match &args.checker {
        Some(c) => format!("checker: {c}"),
        None => "fsck only".to_owned(),
    };
    let (mut cell, witness_index) = Cell::of_results(subject.config.name, &label, &results);
    cell.disk_model = subject.disk;
    let positions: Vec<usize> = (0..results.len()).collect();
    (cell.mount_failures, cell.read_errors) =
        bob_core::report::cell_causes(&results, &positions, &subject, timeouts.fsck);
    let mut witness_info = None;
    if let Some(i) = witness_index {
        let r = &results[i];
        let dir = args.explore.out.join(subject.config.name).join("check");
        let record = witness::StateRecord::of(r, &subject, None);
        witness::write(&dir, &subject, &sidecar, &record, &r.check)?;
        if let Some(out) = &r.check.checker_output {
            std::fs::write(dir.join("checker.txt"), out)?;
        }
        std::fs::write(
            dir.join("acked-marks.txt"),
            subject.acked_marks(r.state.id.epoch as usize).join("\n") + "\n",
        )?;
        cell.witness = Some(dir.display().to_string());
        cell.story = Some(format!("{} (state {})", record.story, record.id));
        cell.witness_state = Some(record.id.clone());
        witness_info = Some((record, r.check.checker_output.clone()));
    }
    cell.seconds = started.elapsed().as_secs_f64();
    match args.format {
        Format::Json => {
            let mut v = serde_json::to_value(&cell)?;
            if let Some((record, output)) = &witness_info {
                v["witness_description"] = record.description.clone().into();
                v["checker_output"] = output.clone().into();
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Text => {
            print!("{}", cell.to_text());
            if let Some((record, output)) = &witness_info {
                println!("  state:   {}", record.description);
                if let Some(out) = output {
                    for line in out.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev() {
                        println!("  checker> {line}");
                    }
                }
            }
        }
    }
    if CANCEL.load(Ordering::Relaxed) {
        return Err(usage("interrupted"));
    }
    Ok(exit_for(cell.verdict))
}

/// `bob run --backend dm-log-writes`, once device-mapper is known to be there.
pub fn run_with_dm_log_writes() -> Result {
    Err(usage(
        "bob run --backend dm-log-writes: the property workloads record through the FUSE disk; \
         record any command through dm-log-writes with `bob record --backend dm-log-writes \
         --log-dev DEV --fs CONFIG --out DIR -- CMD` and explore it with `bob check DIR`",
    ))
}
