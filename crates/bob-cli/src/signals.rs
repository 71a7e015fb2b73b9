//! SIGINT/SIGTERM set a flag instead of killing bob, so workers stop between states and
//! every guard (mount, loop device, FUSE disk, scratch dir) is released on the way out.
//!
//! A second signal depends on what bob holds. A command that serves devices (a FUSE disk
//! under loop devices, mounts of them: [`hold_devices`]) or runs a guest kernel ignores
//! it, with one line saying so. Dying then would leave the guest running (a UML kernel's
//! processes outlive their parent), or threads of bob and programs it runs (an
//! `xfs_repair -n`) in uninterruptible I/O to loop devices whose server is bob itself; a
//! process in that state never finishes dying, holds its loop devices and FUSE mount, and
//! stalls every `losetup` and mount of the machine (2 of 9 double signals did that when a
//! user tried). The flag still stops it as fast as the first signal can. Only SIGKILL
//! ends such a bob before it has released everything, and what it leaves, the next bob
//! or `bob cleanup` reclaims (aborting its FUSE connections first). A command that holds
//! no device keeps the old rule: a second signal restores the default action, a user who
//! insists wins.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// Set when SIGINT or SIGTERM arrives.
pub static CANCEL: AtomicBool = AtomicBool::new(false);

/// Set while the command serves devices that only its own threads can answer.
static HOLDS_DEVICES: AtomicBool = AtomicBool::new(false);

/// What a second signal prints while devices are held (written with write(2), which is
/// async-signal-safe).
const STILL_RELEASING: &[u8] = b"bob: stopping; releasing its mounts, loop devices, FUSE \
disk and guest kernels first (further signals are ignored until then; after kill -9, `bob \
cleanup` reclaims the devices, but not a guest kernel)\n";

extern "C" fn on_signal(sig: libc::c_int) {
    if !CANCEL.swap(true, Ordering::SeqCst) {
        return;
    }
    if HOLDS_DEVICES.load(Ordering::SeqCst) {
        // SAFETY: write(2) on stderr is async-signal-safe; a short write is harmless.
        unsafe {
            libc::write(2, STILL_RELEASING.as_ptr().cast(), STILL_RELEASING.len());
        }
        return;
    }
    // Second signal, nothing held: restore the default and re-raise.
    // SAFETY: signal() and raise() are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Installs the handlers.
pub fn install() {
    let action =
        SigAction::new(SigHandler::Handler(on_signal), SaFlags::SA_RESTART, SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only touches atomics and async-signal-safe libc calls.
        let _ = unsafe { signal::sigaction(sig, &action) };
    }
}

/// From now until [`released`], a second signal is ignored (see the module doc): the
/// command is about to bind loop devices to a FUSE disk it serves.
pub fn hold_devices() {
    HOLDS_DEVICES.store(true, Ordering::SeqCst);
}

/// Everything the command bound or mounted is released (its guards dropped): a second
/// signal kills again.
pub fn released() {
    HOLDS_DEVICES.store(false, Ordering::SeqCst);
}
