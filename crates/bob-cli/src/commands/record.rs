//! `bob record`: any command's block I/O on a configuration, as a trace directory.

use bob_core::record::custom::Backend as Recorder;
use bob_core::run::interop::{self, RecordCommandOptions};

use crate::cli::{Backend, RecordArgs};
use crate::error::{usage, CliError};
use crate::exit::Conclusion;

/// Runs `bob record`.
pub fn run(args: RecordArgs) -> Result<Conclusion, CliError> {
    let backend = match args.backend {
        Backend::Fuse => Recorder::Fuse,
        Backend::DmLogWrites => {
            bob_core::record::dm_log_writes_available().map_err(CliError::Environment)?;
            // clap requires --log-dev with this backend.
            let log_dev = args.log_dev.clone().ok_or_else(|| usage("--log-dev DEV is required"))?;
            Recorder::DmLogWrites { log_dev }
        }
    };
    let recorded = interop::record_command(&RecordCommandOptions {
        config: args.fs,
        command: args.command.clone(),
        out: args.out.clone(),
        device: args.device,
        backend,
        annotate: args.annotate.into(),
        scratch: args.scratch,
        latency: args.latency,
    })?;
    let s = &recorded.summary;
    println!(
        "recorded {} entries ({} writes, {} flushes, {} marks, {} metadata) in {:.1}s into {}",
        s.entries,
        s.writes,
        s.flushes,
        s.marks,
        s.metadata,
        recorded.seconds,
        args.out.display()
    );
    if let Some(a) = &recorded.annotated {
        println!(
            "  tracefs: {} block requests; {} writes matched ({} metadata), {} unmatched",
            recorded.requests.unwrap_or(0),
            a.matched_writes,
            a.metadata_writes,
            a.unmatched_writes
        );
    }
    match recorded.exit_code {
        Some(0) => Ok(Conclusion::Done),
        code => Err(CliError::CommandFailed {
            how: match code {
                Some(c) => format!("exited {c}"),
                None => "was killed by a signal".to_owned(),
            },
            command: args.command.join(" "),
        }),
    }
}
