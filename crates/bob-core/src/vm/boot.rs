//! One boot of a kernel under virtme-ng, running one bob command inside.
//!
//! The guest's stdout is not what bob reads: virtme-ng forwards a command's streams only
//! where the guest kernel brings its virtio console ports up early, which Debian's
//! modular kernels do not. So the guest writes everything bob needs into a control
//! directory shared read-write (the command's stdout and stderr, its exit code, the
//! guest's `uname -r`, [`super::crash_log`]), and qemu's console (the kernel log) goes to
//! `console.log` beside them: the evidence when the guest kernel panics, oopses or hangs.
//!
//! KVM where it works, emulation where it does not: `--vm-accel auto` boots once with KVM
//! and a short deadline, and remembers per kernel release whether that reached user space
//! (a host that is itself a paravirtualised guest opens /dev/kvm but stalls a Debian kernel
//! in early boot); emulation (TCG) makes kernel work 20-35x slower.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{BootKernel, Error, GUEST_ENV};
use crate::device::cmd;

/// How qemu runs the guest's CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accel {
    /// KVM if a probe boot reaches user space, else emulation.
    Auto,
    /// Hardware virtualisation (fails where the host cannot run the kernel under KVM).
    Kvm,
    /// qemu's emulation (TCG): works everywhere, 20-35x slower kernel work.
    Tcg,
}

/// Options of the virtual machine.
#[derive(Clone, Debug)]
pub struct VmOptions {
    /// Guest CPUs.
    pub cpus: u32,
    /// Guest memory, as qemu's `-m` takes it (`4G`).
    pub memory: String,
    /// Acceleration.
    pub accel: Accel,
    /// A guest that shows no progress (no output, no state begun, nothing on its console)
    /// for this long is declared hung and stopped.
    pub hang_after: Duration,
    /// Extra kernel command-line options.
    pub append: Vec<String>,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            cpus: 2,
            memory: "4G".into(),
            accel: Accel::Auto,
            hang_after: Duration::from_secs(900),
            append: Vec::new(),
        }
    }
}

/// The command to run as root inside the guest.
#[derive(Clone, Debug)]
pub struct GuestCommand {
    /// The program (bob's own binary: the guest sees the host's root).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its working directory (as on the host).
    pub cwd: PathBuf,
    /// Directories it writes into, shared read-write at the same paths; everything else
    /// of the host is read-only in the guest. Each must exist.
    pub writable: Vec<PathBuf>,
    /// Extra environment.
    pub env: Vec<(String, OsString)>,
}

/// How a guest ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuestEnd {
    /// The command ran to its end with this exit code.
    Exited(i32),
    /// The guest kernel crashed (panic, oops, BUG) before the command ended: the
    /// console's line that says so.
    KernelCrash(String),
    /// Nothing moved in the guest for [`VmOptions::hang_after`]; bob stopped it.
    Hung(Duration),
}

/// What one boot gave.
#[derive(Debug)]
pub struct GuestRun {
    /// How it ended.
    pub end: GuestEnd,
    /// The command's standard output.
    pub stdout: Vec<u8>,
    /// The command's standard error.
    pub stderr: Vec<u8>,
    /// The guest's `uname -r`, once it reached user space.
    pub release: Option<String>,
    /// The acceleration used (`None`: no virtual machine, a user-mode Linux kernel).
    pub accel: Option<Accel>,
    /// Why that acceleration (one line, for the user).
    pub accel_reason: String,
    /// Time from start to the command starting.
    pub boot: Duration,
    /// Time from start to the end.
    pub total: Duration,
    /// The control directory (console.log, crash log, outputs); removed on drop.
    pub control: tempfile::TempDir,
}

impl GuestRun {
    /// The guest console's log (kernel messages): kept beside a kernel-crash witness.
    pub fn console_log(&self) -> PathBuf {
        self.control.path().join("console.log")
    }
}

/// What the running guest has done so far, for a progress line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuestPhase {
    /// qemu started, the command has not.
    Booting,
    /// The command runs; its last line on stderr, if any.
    Running(String),
}

/// Finds virtme-ng's `vng`: `$BOB_VNG`, then PATH, then the virtual environment
/// `scripts/setup-vm.sh` makes (`/opt/bob-vm-venv`).
pub fn vng() -> Result<PathBuf, Error> {
    if let Some(path) = std::env::var_os("BOB_VNG") {
        return Ok(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("vng")).find(|p| p.is_file()))
        .unwrap_or_default();
    let venv = PathBuf::from("/opt/bob-vm-venv/bin/vng");
    on_path.or_else(|| venv.is_file().then_some(venv)).ok_or_else(|| Error::Missing {
        program: "vng".into(),
        hint: "install virtme-ng (scripts/setup-vm.sh puts it in /opt/bob-vm-venv) or set BOB_VNG"
            .into(),
    })
}

/// Whether the machine has what a boot needs besides vng: qemu, and the static busybox
/// virtme-ng's init uses.
fn check_tools() -> Result<(), Error> {
    for (program, package) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("depmod", "kmod"),
    ] {
        if !cmd::available(program) {
            return Err(Error::Missing {
                program: program.into(),
                hint: format!("apt-get install {package} (or run scripts/setup-vm.sh)"),
            });
        }
    }
    Ok(())
}

/// Boots `kernel` and runs `command` in it to its end, reporting progress through
/// `progress` about once a second.
pub fn run(
    kernel: &BootKernel,
    command: &GuestCommand,
    options: &VmOptions,
    known: &super::crash_log::Known,
    cancel: &std::sync::atomic::AtomicBool,
    mut progress: impl FnMut(&GuestPhase),
) -> Result<GuestRun, Error> {
    let control = control_dir()?;
    let ctl = control.path().to_owned();
    let known_path = ctl.join(super::crash_log::KNOWN_FILE);
    serde_json::to_vec(known)
        .map_err(std::io::Error::from)
        .and_then(|bytes| std::fs::write(&known_path, bytes))
        .map_err(|source| Error::Io { path: known_path, source })?;
    let (mut vm, accel, accel_reason) = match &kernel.machine {
        super::BootMachine::Qemu => {
            check_tools()?;
            let vng = vng()?;
            let (accel, accel_reason) = choose_accel(&vng, kernel, options)?;
            let factor = (accel == Accel::Tcg).then_some(super::EMULATION_TIME_FACTOR);
            let script = format!("#!/bin/sh\n{}", command_script(&ctl, command, factor, None));
            let path = ctl.join("run.sh");
            std::fs::write(&path, script).map_err(|source| Error::Io { path, source })?;
            let exec = format!("sh {}", ctl.join("run.sh").display());
            (boot(&vng, kernel, options, accel, &ctl, command, &exec)?, Some(accel), accel_reason)
        }
        super::BootMachine::Uml { .. } => {
            let bin = super::uml::guest_bin(&ctl, kernel);
            let body = command_script(&ctl, command, Some(super::UML_TIME_FACTOR), bin.as_deref());
            super::uml::write_init(&ctl, command, kernel, &body)?;
            let line = super::uml::command_line(&options.memory, &ctl, &options.append);
            let mut uml = cmd::Cmd::new(&kernel.image.to_string_lossy(), Duration::MAX).args(&line);
            if let Some(preload) = super::uml::xstate_preload(&kernel.release)? {
                uml = uml.env("LD_PRELOAD", preload);
            }
            let vm = uml.spawn_logged(&ctl.join("console.log"))?;
            let reason = "user-mode Linux (the kernel as a program of this machine: no virtualisation, one CPU)";
            (vm, None, reason.to_owned())
        }
    };
    let started = Instant::now();
    let mut boot_time = None;
    let mut watch = Watch::new(&ctl);
    let end = loop {
        if let Some(_code) = vm.try_wait() {
            break read_end(&ctl);
        }
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            // The guest's bob and everything it holds live in the guest: stopping qemu
            // releases them all.
            vm.kill();
            return Err(Error::Interrupted);
        }
        if boot_time.is_none() && ctl.join("uname").exists() {
            boot_time = Some(started.elapsed());
        }
        watch.bound_console();
        if watch.moved() {
            progress(&match boot_time {
                None => GuestPhase::Booting,
                Some(_) => GuestPhase::Running(last_line(&ctl.join("stderr"))),
            });
        } else if watch.still_for() > options.hang_after {
            vm.kill();
            break Some(GuestEnd::Hung(options.hang_after));
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let end = match end {
        Some(end) => end,
        None => {
            let console = ctl.join("console.log");
            match crash_line(&console) {
                Some(line) => GuestEnd::KernelCrash(line),
                None => {
                    return Err(Error::NoStart {
                        kernel: kernel.spec.to_string(),
                        line: last_console_line(&console),
                        console: keep_console(control)?,
                    })
                }
            }
        }
    };
    let release = std::fs::read_to_string(ctl.join("uname")).ok().map(|s| s.trim().to_owned());
    Ok(GuestRun {
        end,
        stdout: std::fs::read(ctl.join("stdout")).unwrap_or_default(),
        stderr: std::fs::read(ctl.join("stderr")).unwrap_or_default(),
        release,
        accel,
        accel_reason,
        boot: boot_time.unwrap_or_else(|| started.elapsed()),
        total: started.elapsed(),
        control,
    })
}

/// The control directory, in the system's temp dir (which the guest sees through the
/// shared root, so the same path works on both sides once shared read-write).
fn control_dir() -> Result<tempfile::TempDir, Error> {
    tempfile::Builder::new()
        .prefix("bob-vm-")
        .tempdir()
        .map_err(|source| Error::Io { path: std::env::temp_dir(), source })
}

/// Moves the console log of a failed boot out of the control directory (which is removed)
/// so the error can name it.
fn keep_console(control: tempfile::TempDir) -> Result<PathBuf, Error> {
    let kept = control.keep();
    Ok(kept.join("console.log"))
}

/// Starts qemu through vng; the returned guard stops it if bob stops first.
fn boot(
    vng: &Path,
    kernel: &BootKernel,
    options: &VmOptions,
    accel: Accel,
    ctl: &Path,
    command: &GuestCommand,
    exec: &str,
) -> Result<cmd::Background, Error> {
    let mut args: Vec<OsString> = vec![
        "--verbose".into(),
        "--run".into(),
        kernel.image.clone().into(),
        "--cpus".into(),
        options.cpus.to_string().into(),
        "--memory".into(),
        options.memory.clone().into(),
        "--cwd".into(),
        command.cwd.clone().into(),
    ];
    if accel == Accel::Tcg {
        args.push("--disable-kvm".into());
    }
    let mut shared: Vec<&Path> = vec![ctl];
    shared.extend(command.writable.iter().map(PathBuf::as_path));
    for dir in dedup_nested(&shared) {
        let mut arg = OsString::from("--rwdir=");
        arg.push(dir);
        args.push(arg);
    }
    // An oops leaves a kernel whose later answers mean nothing: make it a panic, which
    // ends the guest (virtme-ng boots with panic=-1 and qemu with -no-reboot).
    let words = ["oops=panic".to_owned(), super::guest_mark(ctl)];
    for opt in words.into_iter().chain(options.append.iter().cloned()) {
        args.push("--append".into());
        args.push(opt.into());
    }
    args.push("--exec".into());
    args.push(exec.into());
    let mut path = OsString::from(vng.parent().unwrap_or(Path::new("/")));
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    // Cmd's timeout is unused by a background program: the watch loop decides.
    Ok(cmd::Cmd::new(&vng.to_string_lossy(), Duration::MAX)
        .args(&args)
        .env("PATH", path)
        .spawn_logged(&ctl.join("console.log"))?)
}

/// The shell commands the guest runs once its system is up: modules bob needs, the
/// command with its streams and exit code in the control directory, and the step-time
/// factor the command is to allow ([`super::step_time_factor`]). Arguments are
/// single-quoted (a quote inside one is closed, escaped and reopened), the one quoting
/// rule sh has no exception to.
fn command_script(
    ctl: &Path,
    command: &GuestCommand,
    time_factor: Option<u32>,
    bin: Option<&Path>,
) -> String {
    let q = super::uml::quote;
    let c = |name: &str| q(ctl.join(name).as_os_str());
    let mut line = format!("env {}={}", GUEST_ENV, q(ctl.as_os_str()));
    if let Some(factor) = time_factor {
        line.push_str(&format!(" {}={factor}", super::TIME_FACTOR_ENV));
    }
    for (key, value) in &command.env {
        line.push_str(&format!(" {key}={}", q(value)));
    }
    line.push(' ');
    line.push_str(&q(command.program.as_os_str()));
    for arg in &command.args {
        line.push(' ');
        line.push_str(&q(arg));
    }
    format!(
        "export PATH={bin}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root\n\
         for m in loop fuse; do modprobe -q $m 2>/dev/null; done\n\
         uname -r > {uname}.part && mv {uname}.part {uname}\n\
         cd {cwd} || {{ echo 'cannot enter the working directory in the guest' > {stderr}; echo 2 > {exit}; exit 0; }}\n\
         {line} > {stdout} 2> {stderr}\n\
         echo $? > {exit}.part && mv {exit}.part {exit}\n\
         sync\n",
        bin = bin.map(|b| format!("{}:", q(b.as_os_str()))).unwrap_or_default(),
        uname = c("uname"),
        cwd = q(command.cwd.as_os_str()),
        stdout = c("stdout"),
        stderr = c("stderr"),
        exit = c("exit"),
    )
}

/// Drops directories below another one in the list (a share inside a share).
fn dedup_nested<'a>(dirs: &[&'a Path]) -> Vec<&'a Path> {
    let mut kept: Vec<&Path> = Vec::new();
    let mut sorted = dirs.to_vec();
    sorted.sort_by_key(|d| d.components().count());
    for dir in sorted {
        if !kept.iter().any(|k| dir.starts_with(k)) {
            kept.push(dir);
        }
    }
    kept
}

/// How the command ended, from the control directory: `None` when the guest went down
/// before the command wrote its exit code.
fn read_end(ctl: &Path) -> Option<GuestEnd> {
    let code = std::fs::read_to_string(ctl.join("exit")).ok()?;
    Some(GuestEnd::Exited(code.trim().parse().unwrap_or(2)))
}

/// The console line that says the kernel crashed, if one does.
fn crash_line(console: &Path) -> Option<String> {
    // The kept parts only (see `CONSOLE_KEEP`); a punched middle reads as zeros.
    let mut text = read_range(console, 0, CONSOLE_HEAD);
    text.extend(read_tail(console, CONSOLE_KEEP / 2));
    let text = String::from_utf8_lossy(&text);
    const MARKS: [&str; 7] = [
        "Kernel panic",
        "BUG:",
        "Oops:",
        "general protection fault",
        "kernel BUG at",
        "watchdog: BUG: soft lockup",
        "INFO: task ",
    ];
    text.lines()
        .find(|l| MARKS.iter().any(|m| l.contains(m)))
        .map(|l| strip_timestamp(l).to_owned())
}

fn strip_timestamp(line: &str) -> &str {
    match (line.starts_with('['), line.find("] ")) {
        (true, Some(end)) => &line[end + 2..],
        _ => line,
    }
}

/// The last line of `path` that is not blank (a progress line of the command).
fn last_line(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    text.split(['\n', '\r']).rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_owned()
}

/// The console's last line that says something, not qemu's or virtme's chatter (its last
/// 64 KiB read: a console a looping kernel fills can be gigabytes).
pub(crate) fn last_console_line(console: &Path) -> String {
    let text = read_tail(console, 64 << 10);
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .rev()
        .map(strip_timestamp)
        .find(|l| !l.trim().is_empty() && !l.contains("reboot: Power down"))
        .unwrap_or("the console is empty")
        .to_owned()
}

/// The last `bytes` of `path` (all of it when shorter; empty when unreadable).
fn read_tail(path: &Path, bytes: u64) -> Vec<u8> {
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    read_range(path, len.saturating_sub(bytes), bytes)
}

/// `bytes` of `path` from `start` (fewer at its end; empty when unreadable).
fn read_range(path: &Path, start: u64, bytes: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return Vec::new() };
    let _ = file.seek(SeekFrom::Start(start));
    let mut out = Vec::new();
    let _ = file.take(bytes).read_to_end(&mut out);
    out
}

/// How much of a guest's console is kept at most: its first [`CONSOLE_HEAD`] bytes and
/// its last half of this (a looping jfs filled 21 GB in 90 minutes here).
const CONSOLE_KEEP: u64 = 64 << 20;
/// See [`CONSOLE_KEEP`].
const CONSOLE_HEAD: u64 = 4 << 20;

/// Growth of the guest's outputs, to tell a slow guest from a hung one. The command's
/// outputs and crash log growing is progress; the console growing is progress only when
/// it says something it did not say just before: a kernel that repeats one complaint
/// forever (a jfs "dtree page corrupt" 27,000 times a second, seen in a UML guest whose
/// walk of a damaged directory never ended) is not moving.
struct Watch {
    files: Vec<PathBuf>,
    seen: u64,
    console: PathBuf,
    console_len: u64,
    console_recent: std::collections::HashSet<String>,
    since: Instant,
}

impl Watch {
    fn new(ctl: &Path) -> Watch {
        let files = ["stderr", "stdout", super::crash_log::FILE, "uname"]
            .iter()
            .map(|f| ctl.join(f))
            .collect();
        Watch {
            files,
            seen: 0,
            console: ctl.join("console.log"),
            console_len: 0,
            console_recent: Default::default(),
            since: Instant::now(),
        }
    }

    /// Whether anything grew since the last call.
    fn moved(&mut self) -> bool {
        let now: u64 =
            self.files.iter().map(|f| std::fs::metadata(f).map(|m| m.len() + 1).unwrap_or(0)).sum();
        let moved = now != self.seen || self.console_said_something_new();
        if moved {
            self.seen = now;
            self.since = Instant::now();
        }
        moved
    }

    /// Whether the console grew with a line (timestamp aside) other than the ones it
    /// showed at the last look (at most its last 256 KiB are read). Only whole lines
    /// count: a read that starts or ends inside a line would see a fragment of the same
    /// complaint as a new line at every look.
    fn console_said_something_new(&mut self) -> bool {
        let len = std::fs::metadata(&self.console).map(|m| m.len()).unwrap_or(0);
        if len <= self.console_len {
            return false;
        }
        let start = self.console_len.max(len.saturating_sub(256 << 10));
        let fresh = read_range(&self.console, start, len - start);
        let Some(last_newline) = fresh.iter().rposition(|&b| b == b'\n') else {
            return false; // no whole line yet: look again from the same place
        };
        let first = match start == self.console_len {
            true => 0,
            false => fresh.iter().position(|&b| b == b'\n').map_or(fresh.len(), |i| i + 1),
        };
        self.console_len = start + last_newline as u64 + 1;
        let whole = &fresh[first.min(last_newline + 1)..last_newline + 1];
        let lines: std::collections::HashSet<String> = String::from_utf8_lossy(whole)
            .lines()
            .map(|l| strip_timestamp(l).trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        let new = lines.iter().any(|l| !self.console_recent.contains(l));
        if !lines.is_empty() {
            self.console_recent = lines;
        }
        new
    }

    /// Keeps a console that a looping kernel fills from filling the disk: past
    /// [`CONSOLE_KEEP`], the middle of the file is punched out (the file keeps its size,
    /// sparse), so its first and last parts, where boot and the crash or hang show, stay.
    fn bound_console(&self) {
        let len = std::fs::metadata(&self.console).map(|m| m.len()).unwrap_or(0);
        if len <= CONSOLE_KEEP {
            return;
        }
        let (from, to) = (CONSOLE_HEAD, (len - CONSOLE_KEEP / 2) / 4096 * 4096);
        if let (true, Ok(file)) =
            (to > from, std::fs::OpenOptions::new().write(true).open(&self.console))
        {
            use nix::fcntl::{fallocate, FallocateFlags};
            let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
            // A file system without hole punching keeps the whole log: the guest is still
            // stopped at `hang_after`, only the disk holds more meanwhile.
            let _ = fallocate(&file, flags, from as i64, (to - from) as i64);
        }
    }

    fn still_for(&self) -> Duration {
        self.since.elapsed()
    }
}

/// Picks the acceleration for `kernel`, with the reason in one line.
fn choose_accel(
    vng: &Path,
    kernel: &BootKernel,
    options: &VmOptions,
) -> Result<(Accel, String), Error> {
    match options.accel {
        Accel::Kvm => return Ok((Accel::Kvm, "KVM (--vm-accel kvm)".into())),
        Accel::Tcg => {
            return Ok((
                Accel::Tcg,
                "emulation (TCG, --vm-accel tcg): kernel work 20-35x slower".into(),
            ))
        }
        Accel::Auto => {}
    }
    let kvm_opens = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok();
    if !kvm_opens {
        return Ok((
            Accel::Tcg,
            "emulation (TCG): /dev/kvm cannot be opened here; kernel work 20-35x slower".into(),
        ));
    }
    let memo = super::kernel::cache_dir()?.join("kvm-probe.json");
    let key = format!("{} on host {}", kernel.release, crate::host::uname_release());
    let mut known: std::collections::BTreeMap<String, bool> =
        std::fs::read(&memo).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let works = match known.get(&key) {
        Some(&works) => works,
        None => {
            let works = probe_kvm(vng, kernel)?;
            known.insert(key, works);
            // A memo only: if it cannot be written, the next boot probes again.
            if let Some(dir) = memo.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Ok(bytes) = serde_json::to_vec_pretty(&known) {
                let _ = std::fs::write(&memo, bytes);
            }
            works
        }
    };
    Ok(match works {
        true => (Accel::Kvm, "KVM".into()),
        false => (
            Accel::Tcg,
            format!(
                "emulation (TCG): /dev/kvm opens but KVM does not boot {} on this host (probe remembered in {}); kernel work 20-35x slower",
                kernel.release,
                memo.display()
            ),
        ),
    })
}

/// Boots `kernel` under KVM to a trivial command with a short deadline: whether it got
/// there. A kernel KVM cannot run here dumps registers ("KVM internal error") or stalls.
fn probe_kvm(vng: &Path, kernel: &BootKernel) -> Result<bool, Error> {
    let control = control_dir()?;
    let ctl = control.path();
    let marker = ctl.join("reached");
    let command = GuestCommand {
        program: "/bin/true".into(),
        args: Vec::new(),
        cwd: "/".into(),
        writable: Vec::new(),
        env: Vec::new(),
    };
    let options = VmOptions { cpus: 1, memory: "1G".into(), ..VmOptions::default() };
    let exec = format!("touch {}", marker.display());
    let mut vm = boot(vng, kernel, &options, Accel::Kvm, ctl, &command, &exec)?;
    let deadline = Instant::now() + Duration::from_secs(45);
    while Instant::now() < deadline {
        if marker.exists() {
            vm.kill();
            return Ok(true);
        }
        if vm.try_wait().is_some() {
            break;
        }
        let console = std::fs::read(ctl.join("console.log")).unwrap_or_default();
        if String::from_utf8_lossy(&console).contains("KVM internal error") {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    vm.kill();
    Ok(marker.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_shares_are_dropped() {
        let dirs = [Path::new("/a/b"), Path::new("/a"), Path::new("/c"), Path::new("/a/b/c")];
        assert_eq!(dedup_nested(&dirs), [Path::new("/a"), Path::new("/c")]);
    }

    #[test]
    fn the_script_quotes_every_argument() {
        let dir = tempfile::tempdir().unwrap();
        let command = GuestCommand {
            program: "/usr/bin/bob".into(),
            args: vec!["run".into(), "it's a $name".into()],
            cwd: "/work dir".into(),
            writable: Vec::new(),
            env: vec![("A".into(), "b c".into())],
        };
        let script = command_script(dir.path(), &command, Some(20), None);
        std::fs::write(dir.path().join("run.sh"), &script).unwrap();
        assert!(script.contains(r"'/usr/bin/bob' 'run' 'it'\''s a $name'"), "{script}");
        assert!(script.contains("cd '/work dir'"), "{script}");
        assert!(script.contains(" A='b c' "), "{script}");
        // The script is valid sh: it parses without running anything.
        let out = cmd::run(
            "sh",
            &["-n", &dir.path().join("run.sh").to_string_lossy()],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }

    #[test]
    fn a_console_repeating_itself_is_not_progress() {
        let dir = tempfile::tempdir().unwrap();
        let console = dir.path().join("console.log");
        let mut watch = Watch::new(dir.path());
        let say = |text: &str| {
            use std::io::Write;
            let mut f =
                std::fs::OpenOptions::new().create(true).append(true).open(&console).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        say("[ 1.0] booting\n");
        assert!(watch.moved(), "a first line is progress");
        say("[ 2.0] ERROR: (device loop1): dtReadFirst: DT_GETPAGE: dtree page corrupt\n");
        assert!(watch.moved(), "a new complaint is news");
        for t in 3..50 {
            say(&format!(
                "[ {t}.0] ERROR: (device loop1): dtReadFirst: DT_GETPAGE: dtree page corrupt\n"
            ));
        }
        assert!(!watch.moved(), "the same complaint again is not progress");
        say("[ 51.0] loop0: detected capacity change from 0 to 98304\n");
        assert!(watch.moved());
        std::fs::write(dir.path().join("stderr"), "bob: a cell\n").unwrap();
        assert!(watch.moved(), "the command's output is progress");
        assert!(!watch.moved(), "nothing since");
    }

    #[test]
    fn a_complaint_cut_at_a_look_is_not_news() {
        // The looping kernel writes faster than the watch looks: each look ends inside a
        // line, and a capped read starts inside one. Neither fragment is news.
        let dir = tempfile::tempdir().unwrap();
        let console = dir.path().join("console.log");
        let mut watch = Watch::new(dir.path());
        let line = "ERROR: (device loop1): dtReadFirst: DT_GETPAGE: dtree page corrupt\n";
        let say = |text: &str| {
            use std::io::Write;
            let mut f =
                std::fs::OpenOptions::new().create(true).append(true).open(&console).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        say(&line.repeat(3));
        assert!(watch.moved(), "the first complaint is news");
        for cut in [7, 20, 33, 51] {
            // Many whole lines (more than one look reads), then part of one.
            say(&line[cut..]);
            say(&line.repeat(6000));
            say(&line[..cut]);
            assert!(!watch.moved(), "fragments of one complaint, cut at {cut}, are not progress");
        }
        say(&line[51..]);
        say("loop0: detected capacity change from 0 to 98304\n");
        assert!(watch.moved(), "a line of its own is progress");
    }

    #[test]
    fn a_console_past_its_bound_keeps_its_head_and_tail_only() {
        let dir = tempfile::tempdir().unwrap();
        let console = dir.path().join("console.log");
        let mut text = b"booted\n".to_vec();
        text.resize((CONSOLE_KEEP + (16 << 20)) as usize, b'x');
        text.extend_from_slice(b"\nKernel panic - not syncing: hung\n");
        std::fs::write(&console, &text).unwrap();
        let watch = Watch::new(dir.path());
        watch.bound_console();
        let md = std::fs::metadata(&console).unwrap();
        assert_eq!(md.len(), text.len() as u64, "the size stays");
        let allocated = std::os::unix::fs::MetadataExt::blocks(&md) * 512;
        assert!(allocated <= CONSOLE_KEEP, "{allocated} bytes still allocated");
        assert_eq!(crash_line(&console).unwrap(), "Kernel panic - not syncing: hung");
        assert!(read_range(&console, 0, 7) == b"booted\n");
    }

    #[test]
    fn a_panic_on_the_console_is_found_without_its_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let console = dir.path().join("console.log");
        std::fs::write(
            &console,
            "[    1.0] ok\n[    4.2] Kernel panic - not syncing: Fatal exception\n",
        )
        .unwrap();
        assert_eq!(crash_line(&console).unwrap(), "Kernel panic - not syncing: Fatal exception");
        std::fs::write(&console, "[    1.0] all fine\n").unwrap();
        assert_eq!(crash_line(&console), None);
    }
}
