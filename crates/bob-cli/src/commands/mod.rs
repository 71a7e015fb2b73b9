//! One file per subcommand; each parses nothing (clap did), calls one bob-core function
//! and prints its result. This module only dispatches.

mod bench;
mod check;
mod cleanup;
mod diff;
mod explain;
mod explore;
mod import;
mod list;
pub mod log;
mod mark;
mod merge;
mod record;
mod replay;
mod report;
mod run;
mod table;

use crate::cli::Command;
use crate::error::CliError;
use crate::exit::Conclusion;

/// Runs a parsed command.
pub fn dispatch(command: Command) -> Result<Conclusion, CliError> {
    if let Some(vm) = command.vm().filter(|vm| !vm.is_host()) {
        // A guest kernel is bob's child; a bob that died of a second signal would leave
        // it running (a UML kernel's processes outlive their parent), so the first
        // signal's flag stops it and further ones wait for that.
        crate::signals::hold_devices();
        let end = crate::guest::run(&command, vm);
        crate::signals::released();
        return end;
    }
    let holds_devices = command.creates_resources();
    if holds_devices {
        // Before anything is started: workers that cannot open their files would hang.
        crate::limits::open_files_for(crate::options::jobs(command.jobs()))?;
        cleanup::reclaim_quietly();
        crate::signals::hold_devices();
    }
    let end = run_command(command);
    // Every guard of the command has dropped: nothing it served is bound any more.
    if holds_devices {
        crate::signals::released();
    }
    end
}

fn run_command(command: Command) -> Result<Conclusion, CliError> {
    match command {
        Command::Run(args) => run::run(args),
        Command::Replay(args) => replay::run(args),
        Command::List(args) => list::run(args),
        Command::Table(args) => table::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Report(args) => report::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Cleanup(args) => cleanup::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Import(args) => import::run(args),
        Command::Log(args) => log::run(args),
        Command::Record(args) => record::run(args),
        Command::Mark(args) => mark::run(args),
        Command::Check(args) => check::run(args),
        Command::Explore(args) => explore::run(args),
    }
}
