//! The `bob` binary: glue over bob-core. Parsing lives in [`cli`], commands in
//! [`commands`], exit codes in [`exit`].

mod cli;
mod commands;
mod exit;
mod signals;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Returning (rather than process::exit) lets every loop, mount and FUSE guard drop.
    commands::main()
}
