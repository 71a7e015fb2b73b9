//! `--kernel`: the same command run on other kernels. For each kernel named, the host
//! side finds the kernel (bob-core's `vm::kernel`), boots it with the command's output
//! directories shared and bob re-run inside with the same arguments less the VM's own
//! (`vm::run_session`), shows progress, and passes on the guest's output and exit code.
//! With several kernels, each writes below `--out` in a directory of its own, and a
//! table's verdicts are compared kernel to kernel as `bob diff` does. `bob bench` with
//! `--kernel` measures the host's kernel first and sets every kernel's cost per mounted
//! state beside it (`bob_core::bench::KernelBenchReport`); `bob bench --recall` runs the
//! recall catalog on each kernel named and sets their figures side by side.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bob_core::device::cmd::{self, Cmd};
use bob_core::vm::{self, GuestCommand, GuestEnd, GuestPhase, KernelSpec, VmOptions};

use crate::cli::{Command, VmArgs, VM_FLAGS};
use crate::error::CliError;
use crate::exit::Conclusion;

/// Runs `command` on each kernel of `vm`, in turn.
pub fn run(command: &Command, vm: &VmArgs) -> Result<Conclusion, CliError> {
    if std::env::var_os(vm::GUEST_ENV).is_some() {
        return Err(CliError::Usage(
            "--kernel inside a guest bob booted: a virtual machine does not boot another".into(),
        ));
    }
    let specs = vm
        .kernel
        .iter()
        .map(|k| KernelSpec::parse(k, vm.modules.as_deref()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Usage(format!("--kernel: {e}")))?;
    if vm.modules.is_some() && !specs.iter().any(|s| matches!(s, KernelSpec::Image { .. })) {
        return Err(CliError::Usage("--modules goes with --kernel PATH (a kernel image)".into()));
    }
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let base = without_flags(&argv, &VM_FLAGS);
    if let Command::Bench(bench) = command {
        if bench.recall {
            return recall_on_kernels(command, &specs, vm, &base, bench);
        }
        if !bench.table && bench.latency.is_none() && bench.stream_states.is_none() {
            return bench_on_kernels(command, specs, vm, &base, bench.format);
        }
    }
    let several = specs.len() > 1;
    let mut worst = 0u8;
    let mut tables = Vec::new();
    for spec in &specs {
        let (args, out) = match (several, command.out_dir()) {
            (true, Some(out)) => {
                let own = out.join(spec.label());
                let mut args = without_flags(&base, &["--out"]);
                let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
                args.splice(at..at, [OsString::from("--out"), own.clone().into()]);
                (with_doc_suffix(args, &spec.label()), Some(own))
            }
            (_, out) => (base.clone(), out.cloned()),
        };
        let code = match (spec, fanned_out_table(command, spec, vm)) {
            (KernelSpec::Host, _) => here(&args, false)?.0,
            (_, Some((table, guests))) => {
                let out = out.clone().unwrap_or_else(|| table.explore.out.clone());
                table_in_guests(command, table, spec, vm, &args, &out, guests)?
            }
            _ => in_guest(command, spec, vm, args, out.as_deref(), false, None)?.0,
        };
        if let (Command::Table(table), false, Some(out)) =
            (command, matches!(spec, KernelSpec::Host), &out)
        {
            // The guests' bobs only read the history (it is read-only to them); their
            // table is this run's, added here once.
            let file = out.join("table.json");
            if code < crate::exit::ERROR && table.cell.flip_history.is_some() && file.exists() {
                let grid = bob_core::report::site::read_table(&file)?;
                let saved = table.traces.is_some();
                crate::options::add_to_flip_history(&table.cell, &grid.kernel, &grid.cells, saved)?;
            }
        }
        if let Some(out) = &out {
            tables.push((spec.to_string(), spec.label(), out.join("table.json")));
        }
        worst = worst.max(code);
    }
    if let (true, Command::Table(table)) = (several, command) {
        let tables = read_tables(tables)?;
        compare_tables(&tables);
        if let Some(doc) = &table.doc {
            write_matrix_document(doc, &tables, &argv)?;
        }
    }
    Ok(Conclusion::Guest(worst))
}

/// `args` without the flags named (and their values), up to a `--` after which the words
/// are a recorded command's own.
fn without_flags(args: &[OsString], flags: &[&str]) -> Vec<OsString> {
    let mut kept = Vec::with_capacity(args.len());
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        if arg == "--" {
            kept.push(arg.clone());
            kept.extend(words.cloned());
            break;
        }
        let text = arg.to_string_lossy();
        if flags.contains(&text.as_ref()) {
            words.next();
        } else if !flags.iter().any(|f| text.starts_with(&format!("{f}="))) {
            kept.push(arg.clone());
        }
    }
    kept
}

/// With several kernels, `--doc FILE.md` becomes `FILE-LABEL.md` for each.
fn with_doc_suffix(args: Vec<OsString>, label: &str) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut words = args.into_iter();
    while let Some(arg) = words.next() {
        let is_doc = arg == "--doc";
        out.push(arg);
        if is_doc {
            if let Some(doc) = words.next() {
                out.push(kernel_doc(Path::new(&doc), label).into());
            }
        }
    }
    out
}

/// The results document of kernel `label` beside a matrix's `doc`: FILE.md -> FILE-LABEL.md.
fn kernel_doc(doc: &Path, label: &str) -> PathBuf {
    let stem = doc.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    doc.with_file_name(format!("{stem}-{label}.md"))
}

/// What a child bob printed on stdout, when it was kept rather than passed on.
type Captured = Option<Vec<u8>>;

/// The command on this machine's kernel, as a child bob (one of several kernels); its
/// exit code, and its stdout when `capture`.
fn here(args: &[OsString], capture: bool) -> Result<(u8, Captured), CliError> {
    eprintln!("bob: host kernel ({}):", bob_core::host::uname_release());
    let exe = std::env::current_exe().map_err(CliError::Output)?;
    let child = Cmd::new(&exe.to_string_lossy(), cmd::UNBOUNDED).args(args);
    let (code, stdout) = match capture {
        true => child.run_attached_keeping_stdout().map(|(code, out)| (code, Some(out))),
        false => child.run_attached().map(|code| (code, None)),
    }
    .map_err(bob_core::device::Error::from)?;
    let code = code.map(|c| c.clamp(0, 255) as u8).unwrap_or(crate::exit::ERROR);
    Ok((code, stdout))
}

/// `bob bench --kernel`: the benchmark on the host's kernel, then on each kernel named
/// (the host's is measured first even when not named, as the baseline), each as JSON,
/// set side by side with each kernel's cost per mounted state against the host's. A
/// kernel whose guests have one CPU (user-mode Linux) runs one guest per core at once, as
/// a table does (`--vm-guests` sets another number), so that both figures are what the
/// whole machine delivers.
fn bench_on_kernels(
    command: &Command,
    mut specs: Vec<KernelSpec>,
    vm: &VmArgs,
    base: &[OsString],
    format: bob_core::output::Format,
) -> Result<Conclusion, CliError> {
    specs.retain(|s| !matches!(s, KernelSpec::Host));
    specs.insert(0, KernelSpec::Host);
    let mut args = without_flags(base, &["--format"]);
    args.extend(["--format".into(), "json".into()]);
    let mut worst = 0u8;
    let mut kernels = Vec::new();
    for spec in &specs {
        let runs = match spec {
            KernelSpec::Host => vec![here(&args, true)],
            _ => {
                let guests = guests_for(spec, vm);
                if guests > 1 {
                    eprintln!("bob: {spec}: {guests} guests benchmark at once, one per core");
                }
                let bars = indicatif::MultiProgress::new();
                at_once((0..guests).map(|_| {
                    let (args, bars) = (args.clone(), &bars);
                    move || in_guest(command, spec, vm, args, None, true, Some(bars))
                }))
            }
        };
        let mut reports = Vec::new();
        for run in runs {
            let (code, stdout) = run?;
            worst = worst.max(code);
            let stdout = stdout.unwrap_or_default();
            if stdout.is_empty() {
                eprintln!("bob: bench on {spec} gave no report (exit {code}); it is left out");
                continue;
            }
            let report: bob_core::bench::BenchReport = serde_json::from_slice(&stdout)
                .map_err(|e| CliError::Environment(format!("bench on {spec}: its report: {e}")))?;
            reports.push(report);
        }
        kernels.extend(bob_core::bench::KernelBench::of_guests(spec.to_string(), reports));
    }
    let Some(report) = bob_core::bench::KernelBenchReport::of(kernels) else {
        return Ok(Conclusion::Guest(worst.max(crate::exit::ERROR)));
    };
    crate::print::render(&report, format)?;
    Ok(Conclusion::Guest(worst))
}

/// Runs each of `jobs` on a thread of its own, all at once (a guest each), and their
/// results in order; a thread that panicked is an environment error.
fn at_once<'a, T: Send>(
    jobs: impl IntoIterator<Item = impl FnOnce() -> Result<T, CliError> + Send + 'a>,
) -> Vec<Result<T, CliError>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.into_iter().map(|job| scope.spawn(job)).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CliError::Environment("a guest's thread panicked".into()))
                })
            })
            .collect()
    })
}

/// How many guests of `spec` work at once: `--vm-guests`, else one per core for a
/// user-mode Linux kernel (its guest has one CPU) and one for a virtual machine (which
/// has `--vm-cpus`).
fn guests_for(spec: &KernelSpec, vm: &VmArgs) -> u32 {
    let uml = matches!(spec, KernelSpec::Uml(_))
        || matches!(spec, KernelSpec::Image { image, .. } if vm::uml::is_uml_binary(image));
    vm.vm_guests.unwrap_or(if uml { bob_core::host::cores() as u32 } else { 1 })
}

/// `bob bench --recall --kernel LIST`: the recall run on each kernel named, in turn,
/// each by its own bob (the host's as a child, others in a guest) with its witnesses below
/// `--out/LABEL` and its report as JSON; the reports set side by side, and the exit code
/// of the whole (a kernel that gave no report counts as an error).
fn recall_on_kernels(
    command: &Command,
    specs: &[KernelSpec],
    vm: &VmArgs,
    base: &[OsString],
    bench: &crate::cli::BenchArgs,
) -> Result<Conclusion, CliError> {
    use bob_core::bench::recall::RecallReport;
    let common = without_flags(base, &["--format", "--out"]);
    let mut reports = Vec::new();
    let mut failed = crate::exit::HELD;
    for spec in specs {
        let out = bench.out.join(spec.label());
        let mut args = common.clone();
        args.extend(["--format".into(), "json".into(), "--out".into(), out.clone().into()]);
        let (code, stdout) = match spec {
            KernelSpec::Host => here(&args, true)?,
            _ => in_guest(command, spec, vm, args, Some(&out), true, None)?,
        };
        if code == crate::exit::INTERRUPTED {
            return Err(CliError::Interrupted);
        }
        match serde_json::from_slice::<RecallReport>(&stdout.unwrap_or_default()) {
            Ok(mut report) => {
                for k in &mut report.kernels {
                    k.kernel = spec.to_string();
                }
                reports.push(report);
            }
            Err(e) => {
                eprintln!("bob: bench --recall on {spec} gave no report (exit {code}: {e}); it is left out");
                failed = failed.max(code).max(crate::exit::ERROR);
            }
        }
    }
    let Some(report) = RecallReport::merge(reports) else {
        return Ok(Conclusion::Guest(failed.max(crate::exit::ERROR)));
    };
    crate::print::render(&report, bench.format)?;
    let (misses, errors) = report.misses_and_errors();
    let code = crate::exit::code(&Ok(Conclusion::Recall { misses, errors }));
    Ok(Conclusion::Guest(code.max(failed)))
}

/// The table `command` is, and how many guests check it at once, when it is to be spread
/// over several guests of `spec` ([`table_in_guests`]): a whole table (not a recording
/// alone, not already a shard or a check of saved recordings) on a kernel whose guests
/// are more than one (`--vm-guests`, by default one per core for user-mode Linux).
fn fanned_out_table<'a>(
    command: &'a Command,
    spec: &KernelSpec,
    vm: &VmArgs,
) -> Option<(&'a crate::cli::TableArgs, u32)> {
    let Command::Table(table) = command else { return None };
    if table.record_only || table.traces.is_some() || table.cell.shard.is_some() {
        return None;
    }
    let guests = guests_for(spec, vm);
    (guests > 1).then_some((table, guests))
}

/// `bob table` on a kernel spread over `guests` guests at once: the table is recorded in
/// one guest (`--record-only`, into `OUT/guest-traces`), then each of `guests` guests
/// checks shard I of N of every cell's states from those recordings (`--traces
/// --shard`, all writing their witnesses below `OUT`, each in its own `shard-I-of-N`
/// directory), and the shards' tables are merged as `bob merge` merges them, into
/// `OUT/table.*`, the results document and the table printed. A user-mode Linux guest has
/// one CPU, so this is how a table uses every core. Its exit code.
fn table_in_guests(
    command: &Command,
    table: &crate::cli::TableArgs,
    spec: &KernelSpec,
    vm: &VmArgs,
    args: &[OsString],
    out: &Path,
    guests: u32,
) -> Result<u8, CliError> {
    let cwd = std::env::current_dir().map_err(CliError::Output)?;
    let out = cwd.join(out);
    let traces = out.join("guest-traces");
    let base = without_flags(args, &["--out", "--doc", "--html-site", "--format"]);
    let with = |extra: Vec<OsString>| {
        let mut args = base.clone();
        let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
        args.splice(at..at, extra);
        args
    };
    let resuming = table.cell.resume && traces.join("traces.json").exists();
    if !resuming {
        eprintln!("bob: {spec}: recording the table in one guest, then checking it in {guests}");
        let record = without_flags(
            &with(vec!["--record-only".into(), "--out".into(), traces.clone().into()]),
            &["--resume"],
        );
        let (code, _) = in_guest(command, spec, vm, record, Some(&traces), true, None)?;
        if code >= crate::exit::ERROR {
            eprintln!("bob: error: {spec}: recording the table failed (exit {code})");
            return Ok(code);
        }
    }
    let bars = indicatif::MultiProgress::new();
    let shards = at_once((1..=guests).map(|i| {
        let args = with(vec![
            "--traces".into(),
            traces.clone().into(),
            "--shard".into(),
            format!("{i}/{guests}").into(),
            "--out".into(),
            out.clone().into(),
            "--format".into(),
            "json".into(),
        ]);
        let (out, bars) = (&out, &bars);
        move || in_guest(command, spec, vm, args, Some(out), true, Some(bars))
    }));
    let mut worst = 0u8;
    let mut files = Vec::new();
    for (i, shard) in shards.into_iter().enumerate() {
        let (code, stdout) = shard?;
        worst = worst.max(code);
        let stdout = stdout.unwrap_or_default();
        if code >= crate::exit::ERROR || stdout.is_empty() {
            eprintln!("bob: error: {spec}: shard {}/{guests} gave no table (exit {code})", i + 1);
            return Ok(worst.max(crate::exit::ERROR));
        }
        let file = out.join(format!("guest-shard-{}-of-{guests}.json", i + 1));
        std::fs::write(&file, &stdout)
            .map_err(|source| CliError::Io { path: file.clone(), source })?;
        files.push(file);
    }
    let merged = bob_core::run::explore::merge::merge_documents(&files)
        .map_err(|e| CliError::Environment(format!("merging the guests' shards: {e}")))?;
    let bob_core::run::explore::merge::Merged::Table(grid) = merged else {
        return Err(CliError::Environment("the guests' shards are not tables".into()));
    };
    bob_core::report::document::write_tables(&out, &grid)
        .map_err(|source| CliError::Io { path: out.clone(), source })?;
    // The document named in `args` (with several kernels, this kernel's own).
    let doc = args.iter().position(|a| a == "--doc").and_then(|i| args.get(i + 1));
    if let Some(doc) = doc.map(PathBuf::from) {
        bob_core::report::document::write_document(&doc, &grid)
            .map_err(|source| CliError::Io { path: doc.clone(), source })?;
    }
    if let Some(site) = &table.html_site {
        let report = bob_core::report::site::build(&out, site, None)?;
        eprint!("bob: {}", report.to_text());
    }
    crate::print::render(&grid, table.format)?;
    let (explored, mounted, secs) = grid.totals();
    eprintln!(
        "bob: {spec}: {} cells, {explored} states explored, {mounted} mounted, {secs:.0} s of cell time in {guests} guests; tables in {}",
        grid.cells.len(),
        out.display()
    );
    let verdict = crate::exit::code(&Ok(Conclusion::of_table(&grid)));
    Ok(worst.max(verdict))
}

/// The command in a guest of `spec`; its exit code. Its spinner joins `bars` when several
/// guests run at once.
fn in_guest(
    command: &Command,
    spec: &KernelSpec,
    vm: &VmArgs,
    args: Vec<OsString>,
    out: Option<&Path>,
    capture: bool,
    bars: Option<&indicatif::MultiProgress>,
) -> Result<(u8, Captured), CliError> {
    let cache = vm::kernel::cache_dir().map_err(environment)?;
    eprintln!("bob: {spec}: finding the kernel (a first use fetches it into {})", cache.display());
    let kernel = vm::kernel::resolve(spec, &cache).map_err(environment)?;
    let cwd = std::env::current_dir().map_err(CliError::Output)?;
    let mut writable = Vec::new();
    let mut dirs = command.written_dirs();
    if let Some(out) = out {
        dirs.retain(|d| Some(d.as_path()) != command.out_dir().map(PathBuf::as_path));
        dirs.push(out.to_owned());
    }
    for dir in dirs {
        let dir = cwd.join(dir);
        std::fs::create_dir_all(&dir)
            .map_err(|source| CliError::Io { path: dir.clone(), source })?;
        writable.push(dir);
    }
    let keep =
        cwd.join(out.map(Path::to_owned).unwrap_or_else(std::env::temp_dir)).join("kernel-crashes");
    let guest = GuestCommand {
        program: std::env::current_exe().map_err(CliError::Output)?,
        args,
        cwd,
        writable,
        // bob's own settings and test hooks reach the guest; where to find vng and
        // kernels is the host's business.
        env: std::env::vars_os()
            .filter(|(k, _)| {
                let k = k.to_string_lossy();
                k.starts_with("BOB_") && k != "BOB_VNG" && k != "BOB_KERNEL_CACHE"
            })
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v))
            .collect(),
    };
    let options = VmOptions {
        cpus: vm.vm_cpus,
        memory: vm.vm_memory.clone(),
        accel: vm.vm_accel.into(),
        append: vm.vm_append.clone(),
        ..VmOptions::default()
    };
    let bar = match bars {
        Some(bars) => bars.add(indicatif::ProgressBar::new_spinner()),
        None => indicatif::ProgressBar::new_spinner(),
    };
    bar.enable_steady_tick(Duration::from_millis(200));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let label = format!("{spec} ({})", kernel.release);
    bar.set_message(format!("{label}: booting"));
    let cancel = &crate::signals::CANCEL;
    let session =
        vm::run_session(&kernel, &guest, command.resume_flag(), &options, &keep, cancel, |p| {
            bar.set_message(match p {
                GuestPhase::Booting => format!("{label}: booting"),
                GuestPhase::Running(line) => {
                    format!("{label}: {}", line.chars().take(100).collect::<String>())
                }
            })
        });
    bar.finish_and_clear();
    let session = match session {
        Err(vm::Error::Interrupted) => return Err(CliError::Interrupted),
        other => other.map_err(environment)?,
    };
    let run = &session.last;
    if !capture {
        std::io::stdout().write_all(&run.stdout).map_err(CliError::Output)?;
    }
    std::io::stderr().write_all(&run.stderr).map_err(CliError::Output)?;
    let crashed = match session.crashes.len() {
        0 => String::new(),
        n => {
            format!("; {n} crash state(s) crashed the kernel (console logs in {})", keep.display())
        }
    };
    eprintln!(
        "bob: checked on {} ({spec}) under {}; boot {:.0}s, {:.0}s in all, {} boot(s){crashed}",
        run.release.as_deref().unwrap_or("?"),
        run.accel_reason,
        run.boot.as_secs_f64(),
        run.total.as_secs_f64(),
        session.boots,
    );
    let code = match &run.end {
        GuestEnd::Exited(code) => (*code).clamp(0, 255) as u8,
        GuestEnd::KernelCrash(line) => {
            let kept = keep_console(run, &keep)?;
            eprintln!(
                "bob: error: the {spec} guest kernel crashed outside the recovery of a crash state (mkfs, recording, unmount or a command without a journal): {line}; console log: {}",
                kept.display()
            );
            crate::exit::ERROR
        }
        GuestEnd::Hung(after) => {
            let kept = keep_console(run, &keep)?;
            eprintln!(
                "bob: error: the {spec} guest showed no progress for {}s and was stopped; console log: {}",
                after.as_secs(),
                kept.display()
            );
            crate::exit::ERROR
        }
    };
    Ok((code, capture.then(|| run.stdout.clone())))
}

fn keep_console(run: &vm::GuestRun, keep: &Path) -> Result<PathBuf, CliError> {
    std::fs::create_dir_all(keep)
        .map_err(|source| CliError::Io { path: keep.to_owned(), source })?;
    let kept = keep.join("console-last.log");
    std::fs::copy(run.console_log(), &kept)
        .map_err(|source| CliError::Io { path: kept.clone(), source })?;
    Ok(kept)
}

fn environment(e: vm::Error) -> CliError {
    CliError::Environment(e.to_string())
}

/// One kernel's table after a run over several kernels: `None` where that kernel's run
/// left none.
struct KernelTableFile {
    /// The kernel as named on the command line.
    kernel: String,
    /// Its directory's and document's name (`debian-6.12`).
    label: String,
    grid: Option<bob_core::report::table::Grid>,
}

/// Reads each kernel's `table.json` (kernel, label, path), once.
fn read_tables(tables: Vec<(String, String, PathBuf)>) -> Result<Vec<KernelTableFile>, CliError> {
    tables
        .into_iter()
        .map(|(kernel, label, path)| {
            let grid = match path.exists() {
                true => Some(bob_core::report::site::read_table(&path)?),
                false => None,
            };
            Ok(KernelTableFile { kernel, label, grid })
        })
        .collect()
}

/// With several kernels and `--doc FILE.md`: FILE.md, the matrix (each kernel's table
/// and what changes from the first), beside each kernel's own FILE-LABEL.md.
fn write_matrix_document(
    doc: &Path,
    tables: &[KernelTableFile],
    argv: &[OsString],
) -> Result<(), CliError> {
    // Each kernel with a table, and its own document's name (beside the matrix's).
    let present: Vec<_> = tables
        .iter()
        .filter_map(|t| match &t.grid {
            Some(grid) => {
                let own = kernel_doc(doc, &t.label);
                let own = own.file_name().map(|n| n.to_string_lossy().into_owned());
                Some((t, grid, own.unwrap_or_default()))
            }
            None => {
                eprintln!("bob: no table of {} for {}", t.kernel, doc.display());
                None
            }
        })
        .collect();
    let kernels: Vec<_> = present
        .iter()
        .map(|(t, grid, own)| bob_core::report::document::KernelTable {
            label: &t.kernel,
            grid,
            doc: Some(own.as_str()),
        })
        .collect();
    // The command as a reader reruns it: no machine's paths, no resuming.
    let command = std::iter::once("bob".to_owned())
        .chain(
            without_flags(argv, &["--out"])
                .iter()
                .filter(|a| *a != "--resume")
                .map(|a| a.to_string_lossy().into_owned()),
        )
        .chain(["--out".to_owned(), "OUT".to_owned()])
        .collect::<Vec<_>>()
        .join(" ");
    let text = bob_core::report::document::kernels_document(
        &kernels,
        &command,
        &bob_core::host::Machine::here(),
    );
    std::fs::write(doc, text).map_err(|source| CliError::Io { path: doc.to_owned(), source })?;
    eprintln!("bob: the kernel matrix is in {}", doc.display());
    Ok(())
}

/// Prints, for each kernel after the first, the cells whose verdict differs from the
/// first kernel's table.
fn compare_tables(tables: &[KernelTableFile]) {
    let Some(first) = tables.first() else { return };
    for t in &tables[1..] {
        let (Some(a), Some(b)) = (&first.grid, &t.grid) else {
            eprintln!("bob: no table to compare for {} and {}", first.kernel, t.kernel);
            continue;
        };
        let diff = bob_core::report::diff::TableDiff::of(&first.kernel, a, &t.kernel, b);
        print!("\n{}", diff.to_text());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<OsString> {
        s.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn the_vm_flags_are_left_out_and_a_recorded_command_is_left_alone() {
        let args =
            words("record --kernel debian:6.12 --fs f2fs --vm-cpus=4 --out o -- sh -c --kernel");
        assert_eq!(
            without_flags(&args, &VM_FLAGS),
            words("record --fs f2fs --out o -- sh -c --kernel")
        );
    }

    #[test]
    fn a_results_document_is_named_per_kernel() {
        let args = words("table --doc docs/results.md --out o");
        assert_eq!(
            with_doc_suffix(args, "debian-6.1"),
            words("table --doc docs/results-debian-6.1.md --out o")
        );
    }
}
