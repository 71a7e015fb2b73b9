//! `bob import`: a dm-log-writes log as a bob trace directory, or blktrace output as
//! block-request annotations.

use bob_core::run::interop;

use crate::cli::ImportArgs;
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob import`.
pub fn run(args: ImportArgs) -> Result<Conclusion, CliError> {
    if let Some(src) = &args.blktrace {
        let report = interop::import_blktrace(src, args.out.as_deref())?;
        print::render(&report, args.format)?;
        return Ok(Conclusion::Done);
    }
    // clap requires LOG and --out unless --blktrace is given.
    let (Some(log), Some(out)) = (&args.log, &args.out) else {
        return Err(usage("bob import: give a LOG and --out DIR, or --blktrace"));
    };
    let report = interop::import_log(log, out, args.base.as_deref(), args.fs.as_ref())?;
    print::render(&report, args.format)?;
    Ok(Conclusion::Done)
}
