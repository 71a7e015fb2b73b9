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
        return interop_cmd::replay_log_main();
    }
    // Returning (rather than process::exit) lets every loop, mount and FUSE guard drop.
    commands::main()
}
