//! What the process and the machine say about themselves (/proc): peak memory, load,
//! cores, kernel; and the malloc setting that makes peak memory mean live memory.

use super::report::Machine;
use crate::record;

/// A field of this process's /proc/self/status, in KiB (0 when the kernel does not say).
fn status_kib(field: fn(&procfs::process::Status) -> Option<u64>) -> u64 {
    procfs::process::Process::myself()
        .and_then(|p| p.status())
        .ok()
        .and_then(|s| field(&s))
        .unwrap_or(0)
}

/// This process's peak resident memory (VmHWM), KiB.
pub(super) fn peak_rss_kib() -> u64 {
    status_kib(|s| s.vmhwm)
}

/// This process's resident memory now (VmRSS), KiB.
pub(super) fn rss_kib() -> u64 {
    status_kib(|s| s.vmrss)
}

/// Resets the peak-RSS mark to the current RSS (Linux 4.0+: `5 > clear_refs`).
pub(super) fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Pins glibc's mmap threshold at its initial 128 KiB. Left dynamic, glibc raises it to
/// the size of the largest mmapped block freed so far: once the first FUSE session ends,
/// the 16 MiB per-thread buffers of every later session come from the malloc arenas,
/// are zeroed there (every page touched) and stay resident after they are freed, so the
/// process's RSS grows by tens of MiB with each engine run whatever its number of states.
/// Pinned, such buffers are mapped and unmapped, and peak RSS measures live memory.
pub(super) fn pin_mmap_threshold() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets a malloc parameter; 128 KiB is glibc's own default.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The 1-minute load average (/proc/loadavg).
pub(super) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

pub(super) fn machine() -> Machine {
    use procfs::Current;
    let mem_total_kib = procfs::Meminfo::current().map_or(0, |m| m.mem_total / 1024);
    Machine {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        kernel: record::kernel_release(),
        mem_total_kib,
    }
}
