//! `bob table`, `bob merge` and `bob explain`: the grid of cells, its merge, and a
//! witness told in words.

use std::path::Path;
use std::process::ExitCode;

use bob_core::device::cmd;
use bob_core::fs::{self, FsConfig};
use bob_core::report::table::Grid;
use bob_core::report::{witness, Cell};
use bob_core::run;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use workloads::{Property, SectorClass, Snapshot};

use crate::cli::{ExplainArgs, Format, MergeArgs, TableArgs, TableFormat};
use crate::commands::{config_named, property_named, run_options, usage, Result};
use crate::exit;
use crate::signals::CANCEL;

struct GridProgress {
    cell: ProgressBar,
    states: ProgressBar,
}

impl run::Progress for GridProgress {
    fn phase(&self, name: &str, total: usize) {
        self.states.set_message(name.to_owned());
        self.states.set_length(total as u64);
        self.states.set_position(0);
    }
    fn state_done(&self, done: usize, total: usize) {
        self.states.set_length(total as u64);
        self.states.set_position(done as u64);
    }
}

/// Why a configuration cannot run on this machine, if it cannot.
fn unavailable_here(config: &FsConfig) -> Option<String> {
    if let Some(why) = config.unavailable {
        return Some(why.to_owned());
    }
    if !config.kernel_supports() {
        return Some(format!("this kernel has no {} driver", config.fstype));
    }
    config
        .programs()
        .into_iter()
        .find(|p| !cmd::available(p))
        .map(|p| format!("{p} not found (Debian: apt-get install {})", cmd::package_of(p)))
}

fn render(grid: &Grid, format: TableFormat) -> Result<String> {
    Ok(match format {
        TableFormat::Md => grid.to_markdown(),
        TableFormat::Json => serde_json::to_string_pretty(grid)? + "\n",
        TableFormat::Html => grid.to_html(),
    })
}

fn grid_exit(grid: &Grid) -> ExitCode {
    let failed = grid.cells.iter().any(|c| c.verdict.is_failure());
    ExitCode::from(if failed { exit::VIOLATION } else { exit::HELD })
}

/// `bob table`.
pub fn table(args: TableArgs) -> Result<ExitCode> {
    let configs: Vec<FsConfig> = if args.fs.is_empty() {
        fs::all()
    } else {
        args.fs.iter().map(|n| config_named(n)).collect::<Result<_>>()?
    };
    let properties: Vec<Property> = if args.property.is_empty() {
        Property::ALL.to_vec()
    } else {
        args.property.iter().map(|n| property_named(n)).collect::<Result<_>>()?
    };
    let schedules = crate::commands::parse_schedules(&args.schedules)?;
    if let Some(c) = configs.iter().find(|c| unavailable_here(c).is_none()) {
        crate::commands::check_environment(c)?;
    }
    let visible = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let multi = MultiProgress::new();
    if !visible {
        multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let total = (configs.len() * properties.len()) as u64;
    let cell_bar = multi.add(ProgressBar::new(total));
    cell_bar.set_style(
        ProgressStyle::with_template("cells  [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let state_bar = multi.add(ProgressBar::new(0));
    state_bar.set_style(
        ProgressStyle::with_template("{msg:<9}[{bar:30}] {pos}/{len} {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let progress = GridProgress { cell: cell_bar, states: state_bar };

    let mut cells: Vec<Cell> = Vec::new();
    for config in &configs {
        let reason = unavailable_here(config);
        for &property in &properties {
            progress.cell.set_message(format!("{} / {}", config.name, property.name()));
            let found: Vec<Cell> = match &reason {
                Some(why) => {
                    let models = crate::commands::disk_models(&args.explore, &config.block_size())?;
                    models
                        .into_iter()
                        .map(|m| Cell {
                            disk_model: m,
                            ..run::unavailable_cell(config, property, why)
                        })
                        .collect()
                }
                None => {
                    let opts = run_options(config.clone(), property, &args.explore, &schedules)?;
                    // Each finished cell is kept as cells.json (one cell per disk model), so
                    // `--resume` after a kill redoes only unfinished cells (and those
                    // resume from their journal).
                    let saved = run::cell_dir(&opts).join("cells.json");
                    let previous: Option<Vec<Cell>> = if args.explore.resume {
                        std::fs::read_to_string(&saved)
                            .ok()
                            .and_then(|t| serde_json::from_str::<Vec<Cell>>(&t).ok())
                            .filter(|cells| {
                                cells
                                    .iter()
                                    .map(|c| c.disk_model)
                                    .eq(opts.disk_models.iter().copied())
                            })
                    } else {
                        None
                    };
                    match previous {
                        Some(cells) => cells,
                        None => {
                            let cells = run::run_cell(&opts, &progress, &CANCEL).map_err(|e| {
                                usage(format!("{} / {}: {e}", config.name, property.name()))
                            })?;
                            if let Some(dir) = saved.parent() {
                                std::fs::create_dir_all(dir)?;
                            }
                            std::fs::write(&saved, serde_json::to_string_pretty(&cells)?)?;
                            cells
                        }
                    }
                }
            };
            progress.cell.inc(1);
            for cell in found {
                if !visible {
                    eprintln!(
                        "bob: {} / {} [{}]: {} ({} mounted / {} distinct / {} explored, {:.1}s)",
                        cell.config,
                        cell.property,
                        cell.disk_model,
                        cell.verdict.name(),
                        cell.states_mounted,
                        cell.states_unique,
                        cell.states_explored,
                        cell.seconds
                    );
                }
                cells.push(cell);
            }
        }
    }
    progress.cell.finish_and_clear();
    progress.states.finish_and_clear();

    let grid = Grid {
        schema_version: bob_core::report::SCHEMA_VERSION,
        kernel: bob_core::record::kernel_release(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        configs: configs.iter().map(|c| c.name.to_owned()).collect(),
        properties: properties.iter().map(|p| p.name().to_owned()).collect(),
        notes: run::table_notes_with(&configs, &schedules),
        cells,
    };
    let out = &args.explore.out;
    std::fs::create_dir_all(out)?;
    for (name, format) in [
        ("table.md", TableFormat::Md),
        ("table.json", TableFormat::Json),
        ("table.html", TableFormat::Html),
    ] {
        std::fs::write(out.join(name), render(&grid, format)?)?;
    }
    if let Some(doc) = &args.doc {
        write_doc(doc, &grid)?;
    }
    print!("{}", render(&grid, args.format)?);
    let (e, u, secs) = grid.totals();
    eprintln!(
        "bob: {} cells, {e} states explored, {u} mounted, {secs:.0} s; tables in {}",
        grid.cells.len(),
        out.display()
    );
    Ok(grid_exit(&grid))
}

/// Writes the results document: the table as bob produced it, the command that
/// regenerates it, and each failure's story. Witnesses are named relative to the table's
/// `--out` directory, and the command is rebuilt from the grid itself (not from this
/// process's arguments), so the document carries no machine-specific paths.
pub(crate) fn write_doc(path: &Path, grid: &Grid) -> Result<()> {
    let mut command = String::from("bob table");
    let all_configs: Vec<String> = fs::all().iter().map(|c| c.name.to_owned()).collect();
    let all_properties: Vec<String> = Property::ALL.iter().map(|p| p.name().to_owned()).collect();
    if grid.configs != all_configs {
        command.push_str(&format!(" --fs {}", grid.configs.join(",")));
    }
    if grid.properties != all_properties {
        command.push_str(&format!(" --property {}", grid.properties.join(",")));
    }
    let models = grid.disk_models();
    if models != [bob_core::crash::DiskModel::default()] {
        let units: Vec<String> = models.iter().map(|m| m.atomic_write_unit.to_string()).collect();
        command.push_str(&format!(" --atomic-write-unit {}", units.join(",")));
        if models.iter().any(|m| m.fua == bob_core::crash::FuaModel::Barrier) {
            command.push_str(" --fua barrier");
        }
    }
    let mut grid = grid.clone();
    for cell in &mut grid.cells {
        if cell.witness.is_some() {
            // As run::cell_dir and run_cell lay witnesses out under --out.
            let mut rel = format!("{}/{}", cell.config, cell.property);
            if let Some(shard) = &cell.shard {
                rel.push_str(&format!("/shard-{}", shard.replace('/', "-of-")));
            }
            if models.len() > 1 {
                rel.push_str(&format!("/{}", cell.disk_model.slug()));
            }
            cell.witness = Some(rel);
        }
    }
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)).map(str::to_owned))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| format!("{} GiB", (kb + (1 << 19)) >> 20))
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let (explored, distinct, secs) = grid.totals();
    let mounted = grid.total_mounted();
    let text = format!(
        "# Persistence properties on Linux {kernel}\n\n\
         Generated by bob {version}; do not edit by hand. Regenerate with:\n\n\
         ```sh\n{command} --out bob-out/table --doc {doc}\n```\n\n\
         Machine: {cores} cores, {mem}; crash states served as copy-on-write views through \
         bob's FUSE disk under loop devices. {cells} cells, {explored} crash states explored, \
         {distinct} distinct after dedup, {mounted} of them mounted (by themselves or after \
         repair), {secs:.0} s of cell time. Every `x` is a crash state \
         bob found, confirmed by an independent replay, and replays with \
         `bob replay bob-out/table/WITNESS --to crash.img --check`; witnesses below are named \
         relative to the table's --out directory.\n\n{table}",
        kernel = grid.kernel,
        version = grid.tool_version,
        doc = path.display(),
        cells = grid.cells.len(),
        table = grid.to_markdown(),
    );
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// `bob merge`.
pub fn merge(args: MergeArgs) -> Result<ExitCode> {
    let mut grids = Vec::new();
    for path in &args.tables {
        let text =
            std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        let grid: Grid = serde_json::from_str(&text)
            .map_err(|e| usage(format!("{}: not a bob table: {e}", path.display())))?;
        grids.push(grid);
    }
    let grid = Grid::merge(grids).map_err(|e| usage(e.to_string()))?;
    if let Some(doc) = &args.doc {
        write_doc(doc, &grid)?;
    }
    print!("{}", render(&grid, args.format)?);
    Ok(grid_exit(&grid))
}

fn describe_class(c: SectorClass) -> &'static str {
    match c {
        SectorClass::Zero => "zeros",
        SectorClass::Garbage => "garbage",
        SectorClass::Foreign { .. } => "another file's or offset's data",
        SectorClass::Data { .. } => "data",
    }
}

/// Runs of sectors that hold no data of their own file: zeros, garbage, foreign data.
fn bad_bytes(snapshot: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (path, node) in &snapshot.entries {
        let Some(content) = &node.content else { continue };
        let mut sector = 0u64;
        for &(class, n) in content.runs() {
            let size_sectors = node.size.div_ceil(512);
            let wrong = match class {
                SectorClass::Data { .. } => false,
                SectorClass::Zero => true,
                _ => true,
            };
            if wrong && sector < size_sectors {
                let end = (sector + n).min(size_sectors);
                out.push(format!(
                    "{path}: bytes {}..{} ({} sectors) are {}",
                    sector * 512,
                    end * 512,
                    end - sector,
                    describe_class(class)
                ));
            }
            sector += n;
        }
    }
    out
}

/// `bob explain`.
pub fn explain(args: ExplainArgs) -> Result<ExitCode> {
    let loaded = witness::load(&args.witness)?;
    let subject = &loaded.subject;
    let record = &loaded.record;
    let id = subject.state_id(&record.id)?;
    let snap_path = args.witness.join("snapshot.json");
    let snapshot: Option<Snapshot> = std::fs::read_to_string(&snap_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .flatten();
    let epoch = &subject.epochs[id.epoch as usize];
    let writes: Vec<String> = id
        .applied
        .iter()
        .map(|a| {
            let entry_index = epoch.writes[a.write as usize];
            let e = &subject.trace.entries[entry_index];
            let kind = if e.is_metadata() { "metadata write" } else { "write" };
            let torn = match &a.sectors {
                None => String::new(),
                Some(r) => format!(
                    ", torn: only sectors {} persisted",
                    r.iter()
                        .map(|(x, y)| if x == y { format!("{x}") } else { format!("{x}-{y}") })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            format!(
                "entry {entry_index}: {kind} of {} sectors at sector {}{torn}",
                e.nr_sectors, e.sector
            )
        })
        .collect();
    let oracle = workloads::Oracle::new(&subject.workload);
    let persisted = snapshot
        .as_ref()
        .map(|s| oracle.persisted(&subject.observed, s))
        .unwrap_or_else(|| vec![None; subject.workload.ops.len()]);
    let ops: Vec<serde_json::Value> = subject
        .workload
        .ops
        .iter()
        .zip(&persisted)
        .enumerate()
        .map(|(i, (op, p))| {
            let (state, why) = match p {
                Some(Ok(())) => ("persisted", String::new()),
                Some(Err(why)) => ("not persisted", why.clone()),
                None => ("no persistent effect of its own", String::new()),
            };
            serde_json::json!({"index": i, "op": op.to_string(), "state": state, "why": why})
        })
        .collect();
    let bad = snapshot.as_ref().map(bad_bytes).unwrap_or_default();
    let value = serde_json::json!({
        "schema_version": bob_core::report::SCHEMA_VERSION,
        "config": record.config,
        "property": record.property,
        "state": record.id,
        "schedule": loaded.sidecar.schedule,
        "outcome": record.outcome,
        "story": record.story,
        "where": record.description,
        "writes_applied_in_crash_epoch": writes,
        "earlier_epochs_applied": id.epoch,
        "disk_model": record.disk_model,
        "earlier_op": record.earlier_op,
        "later_op": record.later_op,
        "ops": ops,
        "wrong_bytes": bad,
    });
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&value)?),
        Format::Text => {
            println!(
                "{} / {}: {} in crash state {}",
                record.config,
                record.property.as_deref().unwrap_or("-"),
                record.outcome,
                record.id
            );
            println!("  {}", record.story);
            if let (Some(a), Some(b)) = (&record.earlier_op, &record.later_op) {
                println!(
                    "  the property's pair: op {} ({} {}) did not persist, op {} ({} {}) did",
                    a.index,
                    a.kind.name(),
                    a.paths.join(" "),
                    b.index,
                    b.kind.name(),
                    b.paths.join(" ")
                );
            }
            if let Some(schedule) = &loaded.sidecar.schedule {
                let summary =
                    schedule.parse::<workloads::Schedule>().map(|s| s.summary()).unwrap_or("");
                println!("\nRecorded under the {schedule} drain schedule ({summary}).");
            }
            println!("\nThe disk: {}.", record.disk_model);
            println!("The crash: {}", record.description);
            println!(
                "  every write of epochs 0..{} reached the disk; of epoch {}:",
                id.epoch, id.epoch
            );
            if writes.is_empty() {
                println!("    none");
            }
            for w in &writes {
                println!("    {w}");
            }
            println!("\nThe workload's ops after recovery:");
            for op in &ops {
                let why = op["why"].as_str().unwrap_or("");
                println!(
                    "  op {}: {:<32} {}{}",
                    op["index"],
                    op["op"].as_str().unwrap_or(""),
                    op["state"].as_str().unwrap_or(""),
                    if why.is_empty() { String::new() } else { format!(" ({why})") }
                );
            }
            if !bad.is_empty() {
                println!("\nBytes that are not data of their own file:");
                for b in &bad {
                    println!("  {b}");
                }
            }
            println!(
                "\nSee it: bob replay {} --state {} --to crash.img --check",
                args.witness.display(),
                record.id
            );
        }
    }
    Ok(ExitCode::from(exit::HELD))
}
