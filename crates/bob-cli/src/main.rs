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
    // Returning (rather than process::exit) lets every loop, mount and FUSE guard drop.
    commands::main()
}
