//! Commands: turn parsed arguments into bob-core options (checking the environment),
//! run them, print results, and choose the exit code.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bob_core::crash::{Limits, Strategy};
use bob_core::device::{cmd, loopdev};
use bob_core::fs::{self, FsConfig, Timeouts};
use bob_core::report::{witness, Cell, CellVerdict};
use bob_core::run::{self, Progress, RunOptions};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use workloads::{Property, Schedule};

use crate::cli::{Backend, Cli, Command, ExploreArgs, Format, ListArgs, ReplayArgs, RunArgs};
use crate::exit;
use crate::signals::{self, CANCEL};

/// A usage or environment problem, reported as one line with exit code 2.
#[derive(Debug)]
struct Usage(String);
impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Usage {}

pub(crate) type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

pub(crate) fn usage(msg: impl Into<String>) -> Box<dyn std::error::Error> {
    Box::new(Usage(msg.into()))
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    signals::install();
    if cli.command.creates_resources() {
        reclaim_quietly();
    }
    let result = match cli.command {
        Command::Run(args) => run_cmd(args),
        Command::Replay(args) => replay_cmd(args),
        Command::List(args) => list_cmd(args),
        Command::Table(args) => crate::grid_cmd::table(args),
        Command::Merge(args) => crate::grid_cmd::merge(args),
        Command::Explain(args) => crate::grid_cmd::explain(args),
        Command::Cleanup(args) => cleanup_cmd(args),
        Command::Bench(args) => crate::bench_cmd::run(args),
        Command::Import(args) => crate::interop_cmd::import(args),
        Command::Log(args) => crate::interop_cmd::log(args),
        Command::Record(args) => crate::interop_cmd::record(args),
        Command::Mark(args) => crate::interop_cmd::mark(args),
        Command::Check(args) => crate::interop_cmd::check(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => exit::report(e.as_ref()),
    }
}

/// Reclaims what dead bob processes left, saying so in one line if there was anything.
fn reclaim_quietly() {
    let r = bob_core::device::registry::reclaim_dead();
    if !r.processes.is_empty() {
        eprintln!(
            "bob: reclaimed what {} killed bob process(es) left: {} mounts, {} loop devices, {} scratch dirs",
            r.processes.len(),
            r.mounts.len(),
            r.loop_devices.len(),
            r.dirs.len()
        );
    }
}

fn cleanup_cmd(args: crate::cli::CleanupArgs) -> Result<ExitCode> {
    if !nix::unistd::geteuid().is_root() {
        return Err(usage("bob cleanup needs root to unmount and unbind loop devices"));
    }
    let r = bob_core::device::registry::reclaim_dead();
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&r)?),
        Format::Text => {
            println!(
                "reclaimed {} dead bob process(es): {} mounts, {} loop devices, {} scratch dirs",
                r.processes.len(),
                r.mounts.len(),
                r.loop_devices.len(),
                r.dirs.len()
            );
            for f in &r.failures {
                println!("  could not release: {f}");
            }
        }
    }
    Ok(ExitCode::from(if r.failures.is_empty() { exit::HELD } else { exit::ERROR }))
}

pub(crate) fn config_named(name: &str) -> Result<FsConfig> {
    fs::by_name(name).ok_or_else(|| {
        usage(format!("unknown configuration {name:?}; known: {}", fs::names().join(", ")))
    })
}

pub(crate) fn property_named(name: &str) -> Result<Property> {
    name.parse::<Property>().map_err(|e| usage(e.to_string()))
}

pub(crate) fn parse_strategies(names: &[String]) -> Result<Vec<Strategy>> {
    let mut out = Vec::new();
    for n in names {
        match n.as_str() {
            "default" => out.extend_from_slice(Strategy::DEFAULT),
            "original" => out.extend_from_slice(Strategy::ORIGINAL),
            other => out.push(other.parse::<Strategy>().map_err(|e| usage(e.to_string()))?),
        }
    }
    out.dedup();
    Ok(out)
}

/// Checks that this process can do what a run needs, naming what is missing.
pub(crate) fn check_environment(config: &FsConfig) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Err(usage(
            "bob needs root (CAP_SYS_ADMIN) to bind loop devices and mount file systems; run it with sudo",
        ));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(usage("/dev/fuse is missing: the FUSE disk recorder needs the fuse module"));
    }
    for program in config.programs() {
        if !cmd::available(program) {
            return Err(usage(format!(
                "{program} not found; install it (Debian: apt-get install {})",
                cmd::package_of(program)
            )));
        }
    }
    Ok(())
}

pub(crate) struct Bar {
    pub(crate) bar: ProgressBar,
}

impl Bar {
    pub(crate) fn new(enabled: bool) -> Bar {
        let bar = if enabled { ProgressBar::new(0) } else { ProgressBar::hidden() };
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg:<10} [{bar:30}] {pos}/{len} {per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Bar { bar }
    }
}

impl Progress for Bar {
    fn phase(&self, name: &str, total: usize) {
        self.bar.set_message(name.to_owned());
        self.bar.set_length(total as u64);
        self.bar.set_position(0);
    }
    fn state_done(&self, done: usize, total: usize) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
    }
}

/// The exit code of a command that ran one cell: the outcome table's
/// ([`bob_core::check::OutcomeKind::exit_code`]), except that a single cell that could not
/// run here at all is an environment error.
pub(crate) fn exit_for(verdict: CellVerdict) -> ExitCode {
    ExitCode::from(exit_code(verdict))
}

/// The exit code of one verdict, from the outcome table (an unavailable configuration
/// asked for by name is an environment error).
fn exit_code(verdict: CellVerdict) -> u8 {
    match verdict {
        CellVerdict::Unavailable => exit::ERROR,
        v if v.is_failure() => exit::VIOLATION,
        _ => exit::HELD,
    }
}

fn print_cell(cell: &Cell, format: Format) -> Result<()> {
    match format {
        Format::Text => print!("{}", cell.to_text()),
        Format::Json => println!("{}", serde_json::to_string_pretty(cell)?),
    }
    Ok(())
}

/// RunOptions for one cell from the shared exploration arguments.
pub(crate) fn run_options(
    config: FsConfig,
    property: Property,
    explore: &ExploreArgs,
    schedules: &[Schedule],
) -> Result<RunOptions> {
    let jobs = explore
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let shard = match &explore.shard {
        Some(text) => Some(run::parse_shard(text).map_err(usage)?),
        None => None,
    };
    let config_block_size = config.block_size();
    Ok(RunOptions {
        config,
        property,
        device: None,
        strategies: parse_strategies(&explore.strategy)?,
        limits: Limits { max_states: explore.max_states, seed: explore.seed, ..Limits::default() },
        jobs,
        timeouts: Timeouts {
            recovery: Duration::from_secs(explore.recovery_timeout),
            ..Timeouts::default()
        },
        out_dir: explore.out.clone(),
        scratch: explore.scratch.clone(),
        trace: None,
        save_trace: None,
        shard,
        workload: None,
        resume: explore.resume,
        disk_models: disk_models(explore, &config_block_size)?,
        schedules: schedules.to_vec(),
    })
}

/// The disk models `--atomic-write-unit` and `--fua` name, checked against the block size.
pub(crate) fn disk_models(
    explore: &ExploreArgs,
    block_size: &u64,
) -> Result<Vec<bob_core::crash::DiskModel>> {
    bob_core::crash::DiskModel::list(&explore.atomic_write_unit, explore.fua.into(), *block_size)
        .map_err(|e| usage(format!("--atomic-write-unit: {e}")))
}

/// Parses `--schedules LIST`.
pub(crate) fn parse_schedules(text: &str) -> Result<Vec<Schedule>> {
    Schedule::parse_list(text).map_err(|e| usage(format!("--schedules: {e}")))
}

fn run_cmd(args: RunArgs) -> Result<ExitCode> {
    let config = config_named(&args.fs)?;
    let property = property_named(&args.property)?;
    if args.backend == Backend::DmLogWrites {
        bob_core::record::dm_log_writes_available().map_err(usage)?;
        return crate::interop_cmd::run_with_dm_log_writes();
    }
    if let Some(reason) = config.unavailable {
        let cell = run::unavailable_cell(&config, property, reason);
        print_cell(&cell, args.format)?;
        return Ok(exit_for(cell.verdict));
    }
    if let Some(dev) = &args.device {
        loopdev::vet_user_device(dev, args.force)?;
        if !loopdev::is_loop_device(dev) {
            return Err(usage(format!(
                "{}: the FUSE-disk recorder attaches its disk to a loop device, and this is not one",
                dev.display()
            )));
        }
    }
    check_environment(&config)?;
    let schedules = parse_schedules(&args.schedules)?;
    let mut options = run_options(config, property, &args.explore, &schedules)?;
    options.device = args.device;
    options.trace = args.trace;
    options.save_trace = args.save_trace;
    let bar = Bar::new(
        args.format == Format::Text && std::io::IsTerminal::is_terminal(&std::io::stderr()),
    );
    let cells = run::run_cell(&options, &bar, &CANCEL);
    bar.bar.finish_and_clear();
    let cells = cells?;
    // One disk model prints its cell; several print one cell each (JSON: an array).
    match (args.format, cells.as_slice()) {
        (_, [cell]) => print_cell(cell, args.format)?,
        (Format::Json, _) => println!("{}", serde_json::to_string_pretty(&cells)?),
        (Format::Text, _) => cells.iter().try_for_each(|c| print_cell(c, args.format))?,
    }
    let worst = cells.iter().map(|c| exit_code(c.verdict)).max().unwrap_or(exit::HELD);
    Ok(ExitCode::from(worst))
}

fn replay_cmd(args: ReplayArgs) -> Result<ExitCode> {
    let mut loaded = witness::load_for(&args.witness, args.state.as_deref())?;
    // Ids compare with their schedule prefix (`syncfs/e3:0-4`); a bare id means the
    // witness's own schedule.
    let recorded = loaded.subject.state_id(&loaded.record.id).map(|id| loaded.subject.qualify(&id));
    if let Some(id) = &args.state {
        let state =
            loaded.subject.state_id(id).map_err(|e| bob_core::report::witness::Error::Invalid {
                path: "--state".into(),
                message: e.to_string(),
            })?;
        let qualified = loaded.subject.qualify(&state);
        if recorded.as_ref().is_ok_and(|r| *r == qualified) {
            loaded.record.id = qualified;
        } else {
            // Another state of the same trace: nothing was recorded about it but its id.
            loaded.record.description =
                state.describe(&loaded.subject.trace, &loaded.subject.epochs);
            loaded.record.id = qualified;
            loaded.record.outcome = "unknown".into();
            loaded.record.story = "(not the witness's recorded state)".into();
        }
    }
    witness::replay(&loaded, &args.to)?;
    let record = &loaded.record;
    let mut out = serde_json::json!({
        "schema_version": bob_core::report::SCHEMA_VERSION,
        "witness": args.witness.display().to_string(),
        "image": args.to.display().to_string(),
        "state": record.id,
        "schedule": loaded.sidecar.schedule,
        "description": record.description,
        "recorded_outcome": record.outcome,
        "recorded_story": record.story,
    });
    let mut code = ExitCode::from(exit::HELD);
    if args.check {
        check_environment(&loaded.subject.config)?;
        let work = run::WorkDir::new(None)?;
        let mnt = work.path().join("mnt");
        std::fs::create_dir_all(&mnt)?;
        let subject = &loaded.subject;
        let id = subject.state_id(&record.id)?;
        let checked = bob_core::check::check_image(
            subject,
            &args.to,
            &mnt,
            subject.durable_ops(&id),
            &Timeouts::default(),
        )?;
        // Recovery wrote into the image; put the crash state back so the file is what it says.
        witness::replay(&loaded, &args.to)?;
        out["outcome"] = checked.outcome.name().into();
        out["story"] = checked.outcome.detail().into();
        // Records of schema 1 name outcomes the table has since renamed (mount-failed).
        if let Some(recorded) = bob_core::check::OutcomeKind::from_name(&record.outcome) {
            out["reproduced"] = (checked.outcome.kind() == recorded).into();
        }
        if !checked.scenarios.is_empty() {
            out["scenarios"] = serde_json::to_value(&checked.scenarios)?;
        }
        if checked.outcome.kind().is_failure() {
            code = ExitCode::from(exit::VIOLATION);
        }
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Text => {
            println!(
                "wrote {}: crash state {} of {} / {}",
                args.to.display(),
                record.id,
                record.config,
                record.property.as_deref().unwrap_or("-")
            );
            println!("  {}", record.description);
            println!("  recorded: {}: {}", record.outcome, record.story);
            if let Some(o) = out.get("outcome") {
                println!(
                    "  replayed: {}: {}",
                    o.as_str().unwrap_or(""),
                    out["story"].as_str().unwrap_or("")
                );
            }
            let fstype = &loaded.subject.config.fstype;
            println!(
                "  look:     mount -t {fstype} -o loop,ro {} /mnt   (ext2: e2fsck -fy first)",
                args.to.display()
            );
        }
    }
    if CANCEL.load(Ordering::Relaxed) {
        return Err(usage("interrupted"));
    }
    Ok(code)
}

fn list_cmd(args: ListArgs) -> Result<ExitCode> {
    let configs = fs::every();
    match args.format {
        Format::Json => {
            let value = serde_json::json!({
                "schema_version": bob_core::report::SCHEMA_VERSION,
                "configs": configs.iter().map(|c| serde_json::json!({
                    "name": c.name,
                    "description": c.description,
                    "fstype": c.fstype,
                    "mkfs": c.mkfs.join(" "),
                    "mount_options": c.mount_options,
                    "fsck": c.fsck.join(" "),
                    "repair": c.repair.iter().map(|s| s.text()).collect::<Vec<_>>(),
                    "available": c.unavailable.is_none() && c.kernel_supports(),
                    "unavailable": c.unavailable,
                })).collect::<Vec<_>>(),
                "properties": Property::EVERY.iter().map(|p| serde_json::json!({
                    "name": p.name(),
                    "family": p.family().to_string(),
                    "summary": p.summary(),
                })).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        Format::Text => {
            println!("Configurations:");
            for c in &configs {
                let note = match c.unavailable {
                    Some(why) => format!("  (unavailable: {why})"),
                    None if !c.kernel_supports() => "  (unavailable: no kernel driver)".into(),
                    None => String::new(),
                };
                println!("  {:<16} {}{}", c.name, c.description, note);
            }
            println!("\nProperties:");
            for p in Property::EVERY {
                println!("  {:<27} {:<11} {}", p.name(), p.family().to_string(), p.summary());
            }
        }
    }
    Ok(ExitCode::from(exit::HELD))
}
