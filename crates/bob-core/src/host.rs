//! What this machine and this process say about themselves: the running kernel's release
//! (and whether user-mode Linux runs it), its command line, this process's memory, the
//! load, the machine's cores and memory, and the clock. The one reader of these facts:
//! every stage that names the kernel, measures the process or stamps the time asks here.
//! It imports nothing of bob's, so it sits below every stage.

use serde::{Deserialize, Serialize};

/// What bob writes after a user-mode Linux kernel's release wherever it names the kernel.
const UML_MARK: &str = "(user-mode Linux)";

/// The running kernel's release as `uname -r` prints it (`unknown` if uname fails).
pub fn uname_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The running kernel's release (`uname -r`), with [`UML_MARK`] after it when the kernel
/// is a user-mode Linux program: every table, cell and report that names the kernel then
/// says what ran it.
pub(crate) fn kernel_release() -> String {
    let release = uname_release();
    match running_in_uml() {
        true => format!("{release} {UML_MARK}"),
        false => release,
    }
}

/// Whether this process runs on a user-mode Linux kernel (its /proc/cpuinfo says so:
/// `vendor_id : User Mode Linux`).
fn running_in_uml() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
        c.lines().any(|l| {
            l.split_once(':')
                .is_some_and(|(k, v)| k.trim() == "vendor_id" && v.trim() == "User Mode Linux")
        })
    })
}

/// `major.minor` of a kernel release (`6.13`, `6.12.117+deb12-amd64`); (0, 0) if it
/// does not parse.
pub(crate) fn release_version(release: &str) -> (u32, u32) {
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The running kernel's `major.minor`.
pub(crate) fn running_version() -> (u32, u32) {
    release_version(&uname_release())
}

/// The words of the running kernel's command line (/proc/cmdline; none if unreadable).
pub(crate) fn kernel_command_line() -> Vec<String> {
    std::fs::read_to_string("/proc/cmdline")
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The cores available to this process (1 if the kernel does not say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// A field of this process's /proc/self/status, in KiB (0 when the kernel does not say).
fn status_kib(field: fn(&procfs::process::Status) -> Option<u64>) -> u64 {
    procfs::process::Process::myself()
        .and_then(|p| p.status())
        .ok()
        .and_then(|s| field(&s))
        .unwrap_or(0)
}

/// This process's peak resident memory (VmHWM), KiB.
pub(crate) fn peak_rss_kib() -> u64 {
    status_kib(|s| s.vmhwm)
}

/// This process's resident memory now (VmRSS), KiB.
pub(crate) fn rss_kib() -> u64 {
    status_kib(|s| s.vmrss)
}

/// Resets the peak-RSS mark to the current RSS (Linux 4.0+: `5 > clear_refs`); whether
/// the kernel took it.
pub(crate) fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Pins glibc's mmap threshold at its initial 128 KiB. Left dynamic, glibc raises it to
/// the size of the largest mmapped block freed so far: once the first FUSE session ends,
/// the 16 MiB per-thread buffers of every later session come from the malloc arenas,
/// are zeroed there (every page touched) and stay resident after they are freed, so the
/// process's RSS grows by tens of MiB with each engine run whatever its number of states.
/// Pinned, such buffers are mapped and unmapped, and peak RSS measures live memory.
pub(crate) fn pin_mmap_threshold() -> bool {
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

/// The 1-minute load average (/proc/loadavg; 0 if unreadable).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// The machine figures and documents come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Cores available to bob.
    pub cores: usize,
    /// The kernel's release ([`kernel_release`]).
    pub kernel: String,
    /// MemTotal of /proc/meminfo, KiB (0 when unknown).
    pub mem_total_kib: u64,
}

impl Machine {
    /// This machine.
    pub fn here() -> Machine {
        use procfs::Current;
        let mem_total_kib = procfs::Meminfo::current().map_or(0, |m| m.mem_total / 1024);
        Machine { cores: cores(), kernel: kernel_release(), mem_total_kib }
    }

    /// Its memory as a document prints it, rounded to whole GiB (`8 GiB`; empty when
    /// unknown).
    pub fn memory(&self) -> String {
        match self.mem_total_kib {
            0 => String::new(),
            kib => format!("{} GiB", (kib + (1 << 19)) >> 20),
        }
    }
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SS` (UTC; the civil-from-days algorithm of
/// Howard Hinnant's `chrono`-compatible date library).
pub(crate) fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}")
}

/// Now, as [`utc`] writes it (the epoch if the clock is before it).
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_memory_read_as_written() {
        assert_eq!(release_version("6.12.117+deb12-amd64"), (6, 12));
        assert_eq!(release_version("6.1.0-56-amd64"), (6, 1));
        assert!(release_version("6.1.0-56-amd64") < release_version("6.13"));
        assert!(release_version("6.18.44-fc-v669") >= release_version("6.13"));
        assert_eq!(release_version("garbage"), (0, 0));
        let machine = Machine { cores: 2, kernel: String::new(), mem_total_kib: 8_000_000 };
        assert_eq!(machine.memory(), "8 GiB");
        assert_eq!(Machine { mem_total_kib: 0, ..machine }.memory(), "");
    }

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20");
    }
}
