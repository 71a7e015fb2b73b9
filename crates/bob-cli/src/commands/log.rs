//! `bob log`: xfstests replay-log's verbs on a dm-log-writes log. Its exit statuses are
//! replay-log's (the documented exception to bob's exit codes), so that scripts written
//! for replay-log see the same answers.

use std::io::{BufReader, Write as _};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};

use bob_core::output::{LogEntryRow, LogReplayed};
use bob_core::trace::log::LogReader;
use bob_core::trace::{flags, Entry, EntryKind, TraceDir};

use crate::cli::{Format, LogArgs};
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::print;

type Result = std::result::Result<Conclusion, CliError>;

/// replay-log's success.
const OK: Conclusion = Conclusion::ReplayLog(0);

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

fn log_path(p: &Path) -> PathBuf {
    if p.is_dir() {
        TraceDir::log_path(p)
    } else {
        p.to_owned()
    }
}

/// `bob log`.
pub fn run(args: LogArgs) -> Result {
    let path = log_path(&args.log);
    let verbs = [args.list, args.num_entries, args.find, args.replay.is_some()];
    if verbs.iter().filter(|&&v| v).count() != 1 {
        return Err(usage("bob log: give exactly one of --list, --num-entries, --find, --replay"));
    }
    if args.num_entries {
        let reader = LogReader::open(&path)?;
        println!("{}", reader.nr_entries());
        return Ok(OK);
    }
    if args.list {
        let reader = LogReader::open(&path)?;
        let mut out = std::io::stdout().lock();
        let mut json = Vec::new();
        for (i, e) in reader.enumerate() {
            let e = e?;
            match args.format {
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
                Format::Json => json.push(LogEntryRow {
                    index: i,
                    sector: e.sector,
                    nr_sectors: e.nr_sectors,
                    flags: e.flags,
                    flag_names: flag_names(e.flags),
                    mark: e.mark_text(),
                }),
            }
        }
        if args.format == Format::Json {
            print::json(&json)?;
        }
        return Ok(OK);
    }
    if args.find {
        let pred: Box<dyn Fn(&Entry) -> bool> = match (&args.mark, args.next_fua, args.next_flush) {
            (Some(text), false, false) => {
                let text = text.clone();
                Box::new(move |e: &Entry| e.mark_text().as_deref() == Some(text.as_str()))
            }
            (None, true, false) => Box::new(|e: &Entry| e.flags & flags::FUA != 0),
            (None, false, true) => Box::new(|e: &Entry| e.flags & flags::FLUSH != 0),
            _ => {
                return Err(usage(
                    "bob log --find: give one of --mark TEXT, --next-fua, --next-flush",
                ))
            }
        };
        for (i, e) in LogReader::open(&path)?.enumerate() {
            if pred(&e?) {
                println!("{i}");
                return Ok(OK);
            }
        }
        eprintln!("bob: {}: no such entry", path.display());
        return Ok(Conclusion::ReplayLog(1));
    }
    let target = args.replay.as_deref().unwrap_or(Path::new(""));
    replay(&path, target, &args)
}

enum Stop {
    All,
    Limit(u64),
    BeforeMark(String),
    AfterFlush,
}

fn replay(path: &Path, target: &Path, args: &LogArgs) -> Result {
    let stop = match (args.limit, &args.end_mark, args.next_flush) {
        (None, None, false) => Stop::All,
        (Some(n), None, false) => Stop::Limit(n),
        (None, Some(m), false) => Stop::BeforeMark(m.clone()),
        (None, None, true) => Stop::AfterFlush,
        _ => {
            return Err(usage(
                "bob log --replay: give at most one of --limit, --end-mark, --next-flush",
            ))
        }
    };
    if let Ok(meta) = std::fs::metadata(target) {
        if meta.file_type().is_block_device()
            && !bob_core::device::loopdev::is_loop_device(target)
            && !args.force
        {
            return Err(usage(format!(
                "{}: not a loop device; bob refuses to write to it (pass --force if you mean it)",
                target.display()
            )));
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(!target.exists())
        .truncate(false)
        .open(target)
        .map_err(|e| usage(format!("{}: {e}", target.display())))?;
    let mut applied = 0u64;
    let mut found = matches!(stop, Stop::All | Stop::Limit(_));
    let zeros = vec![0u8; 1 << 20];
    let reader = LogReader::new(BufReader::new(std::fs::File::open(path)?))?;
    for (i, e) in reader.enumerate() {
        if let Stop::Limit(n) = stop {
            if i as u64 >= n {
                break;
            }
        }
        let e = e?;
        if let Stop::BeforeMark(m) = &stop {
            if e.mark_text().as_deref() == Some(m.as_str()) {
                found = true;
                break;
            }
        }
        match e.kind() {
            EntryKind::Write { .. } => file.write_all_at(&e.data, e.sector * 512)?,
            EntryKind::Discard => {
                let (mut off, end) = (e.sector * 512, (e.sector + e.nr_sectors) * 512);
                while off < end {
                    let n = ((end - off) as usize).min(zeros.len());
                    file.write_all_at(&zeros[..n], off)?;
                    off += n as u64;
                }
            }
            EntryKind::Flush | EntryKind::Mark => {}
        }
        if e.flags & flags::FLUSH != 0 {
            file.sync_data()?;
        }
        applied += 1;
        if matches!(stop, Stop::AfterFlush) && e.flags & flags::FLUSH != 0 {
            found = true;
            break;
        }
    }
    file.sync_all()?;
    if !found {
        return Err(usage(format!(
            "{}: {} not found; replayed all {applied} entries onto {}",
            path.display(),
            match &stop {
                Stop::BeforeMark(m) => format!("mark {m:?}"),
                _ => "a flush".to_owned(),
            },
            target.display()
        )));
    }
    match args.format {
        Format::Json => {
            print::json(&LogReplayed { replayed: applied, target: target.display().to_string() })?
        }
        Format::Text => println!("replayed {applied} entries onto {}", target.display()),
    }
    Ok(OK)
}
