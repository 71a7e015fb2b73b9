//! SIGINT/SIGTERM set a flag instead of killing bob, so workers stop between states and
//! every guard (mount, loop device, FUSE disk, scratch dir) is released on the way out.
//! A second signal while stopping restores the default action: a user who insists wins.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// Set when SIGINT or SIGTERM arrives.
pub static CANCEL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if CANCEL.swap(true, Ordering::SeqCst) {
        // Second signal: restore the default and re-raise.
        // SAFETY: signal() and raise() are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Installs the handlers.
pub fn install() {
    let action =
        SigAction::new(SigHandler::Handler(on_signal), SaFlags::SA_RESTART, SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only touches an atomic and async-signal-safe libc calls.
        let _ = unsafe { signal::sigaction(sig, &action) };
    }
}
