//! `bob mark`: a mark into the trace of the running `bob record`.

use std::path::PathBuf;

use bob_core::record::custom::MARK_FILE_ENV;
use bob_core::run::interop;

use crate::cli::MarkArgs;
use crate::error::{usage, CliError};
use crate::exit::Conclusion;

/// Runs `bob mark`.
pub fn run(args: MarkArgs) -> Result<Conclusion, CliError> {
    let file = args.file.or_else(|| std::env::var_os(MARK_FILE_ENV).map(PathBuf::from)).ok_or_else(
        || {
            usage(
                "BOB_MARK_FILE is not set: bob mark runs inside a command started by `bob record` (or give --file)",
            )
        },
    )?;
    interop::send_mark(&file, &args.text.join(" ")).map_err(|e| usage(e.to_string()))?;
    Ok(Conclusion::Done)
}
