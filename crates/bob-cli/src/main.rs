//! The `bob` binary: glue over bob-core. Parsing lives in [`cli`], commands in
//! [`commands`], exit codes in [`exit`].

mod bench_cmd;
mod cli;
mod commands;
mod exit;
mod grid_cmd;
mod interop_cmd;
mod signals;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Returning (rather than process::exit) lets every loop, mount and FUSE guard drop.
    commands::main()
}
