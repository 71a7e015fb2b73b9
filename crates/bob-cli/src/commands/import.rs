//! `bob import`: a dm-log-writes log as a bob trace directory, or blktrace output as
//! block-request annotations.

use bob_core::output::BlktraceReport;
use bob_core::run::interop;

use crate::cli::ImportArgs;
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob import`.
pub fn run(args: ImportArgs) -> Result<Conclusion, CliError> {
    if let Some(src) = &args.blktrace {
        let report = interop::import_blktrace(src, args.out.as_deref())?;
        print::result(args.format, &report, || blktrace_text(&report, &src.display().to_string()))?;
        return Ok(Conclusion::Done);
    }
    // clap requires LOG and --out unless --blktrace is given.
    let (Some(log), Some(out)) = (&args.log, &args.out) else {
        return Err(usage("bob import: give a LOG and --out DIR, or --blktrace"));
    };
    let report = interop::import_log(log, out, args.base.as_deref(), args.fs.as_ref())?;
    print::result(args.format, &report, || {
        let s = &report.summary;
        let mut text = format!(
            "imported {} entries ({} writes, {} flushes, {} FUA, {} discards, {} marks) into {}\n",
            s.entries, s.writes, s.flushes, s.fua, s.discards, s.marks, report.out
        );
        if !report.base_image {
            text.push_str("  no base image (--base): bob log can replay it; bob check needs one\n");
        }
        text
    })?;
    Ok(Conclusion::Done)
}

fn blktrace_text(report: &BlktraceReport, src: &str) -> String {
    let mut s = String::new();
    for r in &report.requests {
        let t = |x: Option<u64>| x.map_or("-".to_owned(), |n| format!("{n}"));
        s.push_str(&format!(
            "{},{} {:<5} {:>10} + {:<5} issue {} complete {} error {}\n",
            r.major,
            r.minor,
            r.rwbs,
            r.sector,
            r.nr_sectors(),
            t(r.issue_ns),
            t(r.complete_ns),
            r.error
        ));
    }
    s.push_str(&format!("{} requests from {src}\n", report.requests.len()));
    if let Some(a) = &report.annotated {
        s.push_str(&format!(
            "annotated the trace: {} writes matched ({} metadata), {} unmatched\n",
            a.matched_writes, a.metadata_writes, a.unmatched_writes
        ));
    }
    s
}
