//! The one error type of the `bob` binary: every way a command can end without a verdict.
//! Each variant says what kind of failure it is (usage, environment, bob or the machine,
//! an interrupt), so that `exit.rs` maps it to an exit code in one match.

use std::path::PathBuf;

use bob_core::run;

/// Why a command ended without a verdict.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line asks for something that cannot be (beyond what clap checks).
    #[error("{0}")]
    Usage(String),
    /// The machine lacks what the command needs (root, a program, device-mapper).
    #[error("{0}")]
    Environment(String),
    /// A library pipeline failed: bob or the machine, not the file system under test.
    #[error(transparent)]
    Run(run::Error),
    /// The site of `bob report` could not be built.
    #[error(transparent)]
    Site(#[from] bob_core::report::site::Error),
    /// A witness directory could not be read or rebuilt.
    #[error(transparent)]
    Witness(#[from] bob_core::report::witness::Error),
    /// A device the user named was refused.
    #[error(transparent)]
    Device(#[from] bob_core::device::Error),
    /// `bob bench` failed.
    #[error(transparent)]
    Bench(bob_core::bench::Error),
    /// A file bob reads or writes.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// I/O with no file of bob's to name (printing the result, a log's target).
    #[error("{0}")]
    Output(#[from] std::io::Error),
    /// A dm-log-writes log does not read.
    #[error(transparent)]
    Log(#[from] bob_core::trace::log::LogError),
    /// The naive and engine pipelines of `bob bench` disagree: bob is wrong somewhere.
    #[error(
        "naive and engine verdicts disagree on {count} states; first: state {state} (#{index}): \
         naive {naive}, engine {engine}"
    )]
    BenchDisagreement {
        /// States in disagreement.
        count: usize,
        /// The first's id.
        state: String,
        /// Its position.
        index: usize,
        /// The naive pipeline's verdict.
        naive: String,
        /// The engine's.
        engine: String,
    },
    /// `bob cleanup` could not release everything.
    #[error("could not release {0} resource(s)")]
    CleanupIncomplete(usize),
    /// The command `bob record` ran failed (the trace was written anyway).
    #[error("the command {how} ({command}); the trace was written anyway")]
    CommandFailed {
        /// `exited N` or `was killed by a signal`.
        how: String,
        /// The command line.
        command: String,
    },
    /// SIGINT or SIGTERM: the run stopped between states, nothing concluded.
    #[error("interrupted")]
    Interrupted,
}

impl From<run::Error> for CliError {
    fn from(e: run::Error) -> Self {
        if e.is_interrupted() {
            CliError::Interrupted
        } else {
            CliError::Run(e)
        }
    }
}

impl From<bob_core::run::environment::Missing> for CliError {
    fn from(e: bob_core::run::environment::Missing) -> Self {
        CliError::Environment(e.to_string())
    }
}

impl From<bob_core::bench::Error> for CliError {
    fn from(e: bob_core::bench::Error) -> Self {
        match e {
            bob_core::bench::Error::Interrupted => CliError::Interrupted,
            other => CliError::Bench(other),
        }
    }
}

impl From<bob_core::bench::recall::RecallError> for CliError {
    fn from(e: bob_core::bench::recall::RecallError) -> Self {
        use bob_core::bench::recall::RecallError;
        match e {
            RecallError::Interrupted => CliError::Interrupted,
            // A catalog that does not read, or an `--entry` it lacks: the user's input.
            RecallError::Catalog(e) => CliError::Usage(format!("bob bench --recall: {e}")),
            RecallError::Environment(why) => CliError::Environment(why),
        }
    }
}

/// A usage error with this message.
pub fn usage(message: impl Into<String>) -> CliError {
    CliError::Usage(message.into())
}
