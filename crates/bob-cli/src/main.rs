//! The `bob` binary: glue over bob-core, parse -> call -> print. Syntax lives in [`cli`]
//! (and its second stage, bob-core options, in [`options`]), one file per command in
//! [`commands`], printing in [`print`] and [`progress`], errors in [`error`], and exit
//! codes in [`exit`]. Imports flow one way: main -> commands -> {options, print,
//! progress, signals, limits} -> {cli, error, exit} -> bob-core; no module imports a command.

mod cli;
mod color;
mod commands;
mod error;
mod exit;
mod guest;
mod limits;
mod options;
mod print;
mod progress;
mod signals;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // glibc raises its mmap threshold after large frees (fuser's per-thread 16 MiB
    // buffers), after which big buffers stay on the heap and a long `bob table` grows by
    // tens of MiB per cell; a fixed threshold returns them to the system (measured with
    // `bob bench`, docs/performance.md).
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
    // Under the name replay-log (`ln -s bob replay-log`), bob is xfstests' replay-log.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if std::path::Path::new(&argv0).file_name() == Some("replay-log".as_ref()) {
        return commands::log::replay_log_main();
    }
    let cli = cli::Cli::parse();
    signals::install();
    // Returning (rather than process::exit) lets every loop, mount and FUSE guard drop.
    let end = commands::dispatch(cli.command);
    if let Err(e) = &end {
        eprintln!("bob: error: {e}");
    }
    ExitCode::from(exit::code(&end))
}
