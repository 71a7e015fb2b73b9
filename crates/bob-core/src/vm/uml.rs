//! User-mode Linux guests: the kernel built as a program of this machine (`ARCH=um`),
//! booted with no virtualisation at all, so its kernel work runs at the host's speed where
//! qemu's emulation costs 20-35x.
//!
//! * The kernel: Debian's `user-mode-linux` package of a suite (`uml:6.1` is bookworm's,
//!   `uml:6.12` trixie's, `uml:7.2` sid's), fetched through a private apt configuration
//!   in bob's kernel cache (the machine's own sources are left alone: they may not name
//!   those suites), unpacked there, and made to start on this machine: a binary linked
//!   against a newer glibc than the machine's gets its suite's `libc6` beside it, its
//!   interpreter and library path pointed there (`patchelf`). A binary of the user's own
//!   (`--kernel PATH`, a `linux` built with `ARCH=um`) is taken as it is.
//! * The boot: the host's root shared read-only through hostfs
//!   (`rootfstype=hostfs rootflags=/ ro`), bob's init script ([`write_init`]) as PID 1,
//!   tmpfs for scratch (`/run`, with `TMPDIR=/run/tmp`), and the directories bob writes
//!   into mounted read-write through hostfs at their own paths. The kernel's console goes
//!   to the control directory's `console.log`, where [`super::guest`] finds panics and
//!   oopses as it does for qemu.
//!
//! A UML guest has one CPU.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::boot::GuestCommand;
use super::{BootKernel, Error};
use crate::device::cmd;

/// The user-mode Linux kernels Debian ships, by suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UmlSeries {
    /// bookworm's `user-mode-linux`: 6.1.
    V6_1,
    /// trixie's: 6.12, the last with reiserfs (it left Linux in 6.13).
    V6_12,
    /// sid's: 7.2, the newest kernel Debian ships.
    V7_2,
}

impl UmlSeries {
    /// Every series, oldest first.
    pub const ALL: [UmlSeries; 3] = [UmlSeries::V6_1, UmlSeries::V6_12, UmlSeries::V7_2];

    /// The series' version as `--kernel uml:VERSION` says it.
    pub fn version(self) -> &'static str {
        match self {
            UmlSeries::V6_1 => "6.1",
            UmlSeries::V6_12 => "6.12",
            UmlSeries::V7_2 => "7.2",
        }
    }

    /// The Debian suite whose `user-mode-linux` package is this series.
    pub(crate) fn suite(self) -> &'static str {
        match self {
            UmlSeries::V6_1 => "bookworm",
            UmlSeries::V6_12 => "trixie",
            UmlSeries::V7_2 => "sid",
        }
    }

    /// Parses the `VERSION` of `uml:VERSION`.
    pub fn parse(version: &str) -> Option<UmlSeries> {
        UmlSeries::ALL.into_iter().find(|s| s.version() == version)
    }

    /// Whether a package version (`7.2um1`, `6.12um1+b22`) belongs to the series.
    fn owns(self, package_version: &str) -> bool {
        package_version
            .strip_prefix(self.version())
            .is_some_and(|rest| rest.starts_with("um") || rest.starts_with('.'))
    }
}

/// The name of a fetched package's directory in the kernel cache.
fn cache_name(package_version: &str) -> String {
    format!("user-mode-linux-{package_version}")
}

/// Finds (or fetches into `cache`) Debian's user-mode Linux of `series`. When apt cannot
/// fetch (no network, no Debian sources), the newest package of the series already in the
/// cache serves.
pub fn debian(series: UmlSeries, cache: &Path) -> Result<BootKernel, Error> {
    // Within a day of the suite's lists being fetched, the package fetched then serves
    // without asking apt again (`apt-cache` alone costs half a second of CPU).
    let recent = lists_fresh(&cache.join("apt").join(series.suite()))
        .then(|| cached_packages(series, cache).pop())
        .flatten();
    let fetched = match recent {
        Some(dir) => Ok(dir),
        None => fetch(series, cache),
    };
    let dir = match fetched {
        Ok(dir) => dir,
        Err(apt_error) => match cached_packages(series, cache).pop() {
            Some(dir) => dir,
            None => return Err(apt_error),
        },
    };
    let release = binary_release(&dir.join(BINARY))?;
    Ok(BootKernel {
        spec: super::KernelSpec::Uml(series),
        image: dir.join(BINARY),
        release,
        machine: super::BootMachine::Uml { modules: Some(dir) },
    })
}

/// The suite's current `user-mode-linux` in the cache, fetched first if it is not there.
fn fetch(series: UmlSeries, cache: &Path) -> Result<PathBuf, Error> {
    Apt::for_suite(series.suite(), cache).and_then(|apt| {
        let version = apt.candidate("user-mode-linux")?;
        if !series.owns(&version) {
            return Err(Error::Fetch {
                package: "user-mode-linux".into(),
                line: format!(
                    "{} now serves user-mode-linux {version}, not {}: the series moved on",
                    series.suite(),
                    series.version()
                ),
            });
        }
        let dir = cache.join(cache_name(&version));
        if !dir.join(BINARY).is_file() {
            unpack_package(&apt, &version, &dir, cache)?;
        }
        Ok(dir)
    })
}

/// Where the kernel binary lies in an unpacked package.
const BINARY: &str = "usr/bin/linux.uml";

/// Packages of `series` unpacked in the cache, oldest first (by name; a fallback only).
fn cached_packages(series: UmlSeries, cache: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(BINARY).is_file())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("user-mode-linux-"))
                .is_some_and(|v| series.owns(v))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Downloads `user-mode-linux=VERSION`, unpacks it into `dir` (atomically: a half-made
/// directory is never taken for a kernel), lays its modules out where `modprobe -d`
/// looks, and makes the binary start here.
fn unpack_package(apt: &Apt, version: &str, dir: &Path, cache: &Path) -> Result<(), Error> {
    let cache_error = |reason: String| Error::Cache { path: cache.to_owned(), reason };
    let work = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(cache)
        .map_err(|e| cache_error(e.to_string()))?;
    let partial = work.path().join("unpacked");
    let deb = apt.download(&format!("user-mode-linux={version}"), work.path())?;
    super::kernel::dpkg_extract(&deb, &partial, "user-mode-linux")?;
    // `modprobe -d ROOT` reads ROOT/lib/modules/RELEASE; the package keeps them in
    // usr/lib/uml/modules/RELEASE.
    std::fs::create_dir_all(partial.join("lib")).map_err(|e| cache_error(e.to_string()))?;
    std::os::unix::fs::symlink("../usr/lib/uml/modules", partial.join("lib/modules"))
        .map_err(|e| cache_error(e.to_string()))?;
    let binary = partial.join(BINARY);
    let Err(first) = binary_release(&binary) else {
        return std::fs::rename(&partial, dir).map_err(|e| cache_error(e.to_string()));
    };
    if !first.to_string().contains("GLIBC_") {
        return Err(first);
    }
    // The interpreter is named by its final path, so the binary starts only once moved.
    with_suite_libc(apt, &binary, &partial, dir, work.path())?;
    std::fs::rename(&partial, dir).map_err(|e| cache_error(e.to_string()))?;
    binary_release(&dir.join(BINARY)).inspect_err(|_| {
        // The binary's own error is the one to report; a cache entry left behind is
        // checked (and replaced) by the next fetch all the same.
        let _ = std::fs::remove_dir_all(dir);
    })?;
    Ok(())
}

/// Puts the suite's own glibc in `root/libc` and points `binary`'s interpreter and
/// library path at it, as they will be once `root` is moved to `last`: a UML binary
/// re-executes itself (`/proc/self/exe`) at start, so running it through another loader
/// does not work, but a patched interpreter does.
fn with_suite_libc(
    apt: &Apt,
    binary: &Path,
    root: &Path,
    last: &Path,
    work: &Path,
) -> Result<(), Error> {
    if !cmd::available("patchelf") {
        return Err(Error::Missing {
            program: "patchelf".into(),
            hint: format!(
                "{} needs a newer glibc than this machine's, which bob puts beside it with patchelf: apt-get install patchelf (or run scripts/setup-vm.sh)",
                binary.display()
            ),
        });
    }
    let deb = apt.download("libc6", work)?;
    let libc6 = work.join("libc6");
    super::kernel::dpkg_extract(&deb, &libc6, "libc6")?;
    let libs = root.join("libc");
    let from = libc6.join("usr/lib/x86_64-linux-gnu");
    let copy_error = |e: std::io::Error| Error::Cache { path: libs.clone(), reason: e.to_string() };
    std::fs::create_dir_all(&libs).map_err(copy_error)?;
    for entry in std::fs::read_dir(&from).map_err(copy_error)?.flatten() {
        let path = entry.path();
        if path.is_file() {
            std::fs::copy(&path, libs.join(entry.file_name())).map_err(copy_error)?;
        }
    }
    let last_libs = last.join("libc");
    let interpreter = last_libs.join("ld-linux-x86-64.so.2");
    let out = cmd::Cmd::new("patchelf", Duration::from_secs(60))
        .args(&[
            OsStr::new("--set-interpreter"),
            interpreter.as_os_str(),
            OsStr::new("--set-rpath"),
            last_libs.as_os_str(),
            binary.as_os_str(),
        ])
        .run()?;
    if out.code != Some(0) {
        return Err(Error::Fetch { package: "libc6".into(), line: out.last_line() });
    }
    Ok(())
}

/// The release a UML binary says it is (`linux --version`): whether it starts here, too.
fn binary_release(binary: &Path) -> Result<String, Error> {
    let bad = |reason: String| Error::Image { path: binary.to_owned(), reason };
    let out = cmd::run(&binary.to_string_lossy(), &["--version"], Duration::from_secs(30))?;
    let release = out.stdout.trim();
    if out.code != Some(0) || release.is_empty() || release.contains(char::is_whitespace) {
        return Err(bad(format!(
            "not a user-mode Linux binary that starts here (`--version`: {})",
            out.last_line()
        )));
    }
    Ok(release.to_owned())
}

/// Whether `image` is an ELF program (a UML `linux`), not an x86 boot image.
pub fn is_uml_binary(image: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(image).and_then(|mut f| f.read_exact(&mut magic)).is_ok()
        && &magic == b"\x7fELF"
}

/// apt, pointed at one Debian suite through a configuration of bob's own in the kernel
/// cache (`apt/SUITE/`): its own sources list, package lists and downloads, so nothing of
/// the machine's apt changes and a suite the machine does not use can still be fetched.
pub(super) struct Apt {
    suite: String,
    dir: PathBuf,
}

impl Apt {
    /// The suite's configuration, its lists brought up to date once per process.
    pub(super) fn for_suite(suite: &str, cache: &Path) -> Result<Apt, Error> {
        let dir = cache.join("apt").join(suite);
        let apt = Apt { suite: suite.to_owned(), dir };
        let cache_error =
            |e: std::io::Error| Error::Cache { path: apt.dir.clone(), reason: e.to_string() };
        for sub in ["lists/partial", "archives/partial"] {
            std::fs::create_dir_all(apt.dir.join(sub)).map_err(cache_error)?;
        }
        let source = debian_source()?;
        let line = format!("deb [signed-by={KEYRING}] {source} {suite} main\n");
        std::fs::write(apt.dir.join("sources.list"), line).map_err(cache_error)?;
        if !lists_fresh(&apt.dir) {
            let out = apt.run("apt-get", &["update", "-qq"], Duration::from_secs(600))?;
            if out.code != Some(0) {
                return Err(Error::Fetch {
                    package: format!("the package lists of {suite}"),
                    line: out.last_line(),
                });
            }
        }
        Ok(apt)
    }

    /// Runs an apt program with this configuration, in `dir` if given.
    fn run_in(
        &self,
        program: &str,
        args: &[&str],
        dir: Option<&Path>,
        timeout: Duration,
    ) -> Result<cmd::Output, Error> {
        let d = |p: &str| self.dir.join(p).to_string_lossy().into_owned();
        let options = [
            format!("Dir::Etc::SourceList={}", d("sources.list")),
            "Dir::Etc::SourceParts=/nonexistent".to_owned(),
            format!("Dir::State::Lists={}", d("lists")),
            format!("Dir::Cache={}", self.dir.display()),
            format!("Dir::Cache::Archives={}", d("archives")),
            // The downloads land in bob's cache, which apt's unprivileged user may not
            // enter.
            "APT::Sandbox::User=root".to_owned(),
        ];
        let mut all: Vec<&str> = Vec::new();
        for option in &options {
            all.extend(["-o", option]);
        }
        all.extend(args);
        let mut apt =
            cmd::Cmd::new(program, timeout).args(&all).env("DEBIAN_FRONTEND", "noninteractive");
        if let Some(dir) = dir {
            apt = apt.current_dir(dir);
        }
        Ok(apt.run()?)
    }

    pub(super) fn run(
        &self,
        program: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<cmd::Output, Error> {
        self.run_in(program, args, None, timeout)
    }

    /// The version of `package` the suite serves.
    fn candidate(&self, package: &str) -> Result<String, Error> {
        let out = self.run("apt-cache", &["policy", package], Duration::from_secs(60))?;
        out.stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("Candidate:"))
            .map(str::trim)
            .filter(|v| !v.is_empty() && *v != "(none)")
            .map(str::to_owned)
            .ok_or_else(|| Error::NoPackage {
                package: format!("{package} in {}", self.suite),
                line: out.last_line(),
            })
    }

    /// Downloads `package` (`name` or `name=version`) into `dir`; the `.deb`'s path.
    pub(super) fn download(&self, package: &str, dir: &Path) -> Result<PathBuf, Error> {
        let name = package.split('=').next().unwrap_or(package);
        let out = self.run_in(
            "apt-get",
            &["download", "-qq", package],
            Some(dir),
            Duration::from_secs(900),
        )?;
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|x| x == "deb")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{name}_")))
            })
            .ok_or_else(|| Error::Fetch { package: package.to_owned(), line: out.last_line() })
    }
}

/// Whether the package lists of the apt configuration in `dir` were fetched less than a
/// day ago.
fn lists_fresh(dir: &Path) -> bool {
    let day = Duration::from_secs(24 * 3600);
    std::fs::read_dir(dir.join("lists"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with("_InRelease"))
        .filter_map(|e| e.metadata().and_then(|m| m.modified()).ok())
        .any(|t| t.elapsed().is_ok_and(|age| age < day))
}

/// Debian's archive keyring, which signs every suite.
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// The Debian archive this machine's apt already uses (its first `deb` source that is not
/// a security or updates suite): bob fetches other suites from the same place.
fn debian_source() -> Result<String, Error> {
    let mut texts = Vec::new();
    for path in ["/etc/apt/sources.list".into()].into_iter().chain(
        std::fs::read_dir("/etc/apt/sources.list.d")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            // apt reads these two kinds only (`*.list.disabled` and the like are off).
            .filter(|p| p.extension().is_some_and(|x| x == "list" || x == "sources")),
    ) {
        if let Ok(text) = std::fs::read_to_string(&path) {
            texts.push(text);
        }
    }
    texts
        .iter()
        .find_map(|t| archive_uri(t))
        .ok_or_else(|| Error::Missing {
            program: "a Debian archive in /etc/apt".into(),
            hint: "bob fetches user-mode Linux from the Debian archive the machine's apt uses; none is configured".into(),
        })
}

/// The main archive's URI in a sources file, one-line (`deb URI SUITE ...`) or deb822
/// (`URIs:` and `Suites:` in one stanza).
fn archive_uri(text: &str) -> Option<String> {
    // A Debian suite by its code name or alias: other archives (a vendor's, a
    // language's) name suites of their own.
    const DEBIAN: [&str; 12] = [
        "buster",
        "bullseye",
        "bookworm",
        "trixie",
        "forky",
        "duke",
        "sid",
        "oldoldstable",
        "oldstable",
        "stable",
        "testing",
        "unstable",
    ];
    let main_suite = |suite: &str| DEBIAN.contains(&suite);
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().filter(|w| !w.starts_with('[')).collect();
        if let ["deb", uri, suite, ..] = words.as_slice() {
            if main_suite(suite) && !uri.contains(']') {
                return Some((*uri).to_owned());
            }
        }
    }
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned())
        };
        let (Some(types), Some(uris), Some(suites)) =
            (field("Types:"), field("URIs:"), field("Suites:"))
        else {
            continue;
        };
        if types.split_whitespace().any(|t| t == "deb") && suites.split_whitespace().any(main_suite)
        {
            return uris.split_whitespace().next().map(str::to_owned);
        }
    }
    None
}

/// A user's own UML binary (`--kernel PATH`): copied into the cache beside a link to its
/// modules directory, laid out as a package's (`lib/modules/RELEASE`).
pub(crate) fn own_build(
    spec: &super::KernelSpec,
    image: &Path,
    modules: Option<&Path>,
    cache: &Path,
) -> Result<BootKernel, Error> {
    let release = binary_release(image)?;
    let dir = cache.join(format!("own-uml-{release}"));
    let binary = super::kernel::copy_own_build(image, &dir, BINARY, modules, &release)?;
    let machine = super::BootMachine::Uml { modules: modules.is_some().then_some(dir) };
    Ok(BootKernel { spec: spec.clone(), image: binary, release, machine })
}

/// The kernel command line of a UML boot: the host's root read-only through hostfs, bob's
/// init, the console into the control directory (UML's standard output), no other
/// consoles or serial lines, UML's own files (`uml_dir`) in the control directory, and an
/// oops made a panic as in a qemu guest, then the user's `append`.
pub(crate) fn command_line(memory: &str, ctl: &Path, append: &[String]) -> Vec<String> {
    let mut line = vec![
        format!("mem={}", uml_memory(memory)),
        "rootfstype=hostfs".into(),
        "rootflags=/".into(),
        "ro".into(),
        format!("init={}", ctl.join("init.sh").display()),
        "con=null".into(),
        "con0=null,fd:1".into(),
        "ssl=null".into(),
        format!("uml_dir={}", ctl.display()),
        "oops=panic".into(),
        "panic=-1".into(),
        // Where the kernel has it (7.x), a process's system calls reach the UML kernel
        // through a signal handler instead of ptrace: fewer host context switches. Its
        // caveat (a guest process could read all guest memory) does not matter to bob's
        // guests, which run bob alone; older kernels pass the word to init, unused.
        "seccomp=auto".into(),
        super::guest_mark(ctl),
    ];
    line.extend(append.iter().cloned());
    line
}

/// qemu's memory size (`4G`, `2048M`, `4096`) as UML's `mem=` takes it (a number with a
/// K, M or G suffix; qemu's bare number is MiB).
fn uml_memory(memory: &str) -> String {
    let memory = memory.trim();
    match memory.chars().last() {
        Some(c) if c.is_ascii_digit() => format!("{memory}M"),
        _ => memory.to_uppercase(),
    }
}

/// bob's init for a UML guest (PID 1): the mounts a system has (proc, sys, dev, tmpfs
/// for scratch), the host directories the command writes into (and the control
/// directory) mounted read-write over the read-only root, modules from the kernel's own
/// directory (a `modprobe` on PATH that adds `-d`), then the command as in a qemu guest,
/// and a power-off.
pub(crate) fn write_init(
    ctl: &Path,
    command: &GuestCommand,
    kernel: &BootKernel,
    body: &str,
) -> Result<(), Error> {
    let q = quote;
    let modules = match &kernel.machine {
        super::BootMachine::Uml { modules: Some(root) } => Some(root.clone()),
        _ => None,
    };
    let mut script = String::from(
        "#!/bin/sh\n\
         # bob's init in a user-mode Linux guest.\n\
         export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev\n\
         mkdir -p /dev/pts /dev/shm\n\
         mount -t devpts devpts /dev/pts\n\
         mount -t tmpfs tmpfs /dev/shm\n\
         mount -t tmpfs -o mode=0755 tmpfs /run\n\
         mkdir -p -m 1777 /run/tmp\n\
         export TMPDIR=/run/tmp\n",
    );
    if !saves_vector_registers(&kernel.release) {
        script.push_str(&format!("export GLIBC_TUNABLES={NO_WIDE_VECTORS}\n"));
    }
    if !seeds_itself(&kernel.release) {
        script.push_str(&seed_entropy(ctl)?);
    }
    // Where the command writes, and what the guest must see of the host below its fresh
    // tmpfs (`/run`): each at its own path, shallowest first. Everything else of the host
    // (`/tmp` too, where a command's inputs may lie) is seen read-only as it is.
    let mut shares: Vec<(PathBuf, bool)> = vec![(ctl.to_owned(), true)];
    shares.extend(command.writable.iter().map(|d| (d.clone(), true)));
    shares.push((command.cwd.clone(), false));
    shares.push((command.program.parent().unwrap_or(Path::new("/")).to_owned(), false));
    if let Some(root) = &modules {
        shares.push((root.clone(), false));
    }
    for (dir, writable) in hostfs_mounts(&shares) {
        let mode = if writable { "" } else { "ro," };
        script.push_str(&format!(
            "mkdir -p {d} 2>/dev/null; mount -t hostfs -o {mode}{d} none {d}\n",
            d = q(dir.as_os_str())
        ));
    }
    if let Some(root) = &modules {
        write_modprobe(ctl, root)?;
    }
    script.push_str(body);
    script.push_str("poweroff -f 2>/dev/null || halt -f\n");
    let path = ctl.join("init.sh");
    std::fs::write(&path, script).map_err(|source| Error::Io { path: path.clone(), source })?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(|source| Error::Io { path, source })
}

/// The source of the preload library that lets a UML kernel before 7.0 run processes on a
/// CPU whose whole XSAVE area is larger than the kernel was built for (AVX-512, AMX): see
/// the file's comment. Debian's 6.1 and 6.12 packages killed their first process on such
/// a host (an AMX one here, 2026-11-29); 7.2, and 4.4.1, whose UML has no xstate
/// support at all, did not need it.
const XSTATE_PRELOAD_SOURCE: &str = include_str!("uml_xstate_preload.c");

/// The preload library for a UML kernel of `release`, built into the kernel cache with
/// the machine's C compiler the first time (keyed by the source's digest), or `None`
/// where it is not needed: a kernel of 7.0 or later, or a CPU whose XSAVE area a UML
/// kernel's buffer holds ([`xsave_beyond_avx`]).
pub(crate) fn xstate_preload(release: &str) -> Result<Option<PathBuf>, Error> {
    if crate::host::release_version(release) >= (7, 0) || !xsave_beyond_avx() {
        return Ok(None);
    }
    let digest = blake3::hash(XSTATE_PRELOAD_SOURCE.as_bytes()).to_hex().to_string();
    let dir = super::kernel::cache_dir()?;
    let library = dir.join(format!("uml-xstate-preload-{}.so", &digest[..12]));
    if library.exists() {
        return Ok(Some(library));
    }
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
    let source = dir.join(format!("uml-xstate-preload-{}.c", &digest[..12]));
    std::fs::write(&source, XSTATE_PRELOAD_SOURCE)
        .map_err(|source_err| Error::Io { path: source.clone(), source: source_err })?;
    let partial = library.with_extension(format!("so.{}", std::process::id()));
    let args: [&OsStr; 7] = [
        OsStr::new("-shared"),
        OsStr::new("-fPIC"),
        OsStr::new("-O2"),
        OsStr::new("-o"),
        partial.as_os_str(),
        source.as_os_str(),
        OsStr::new("-ldl"),
    ];
    let out = match cmd::Cmd::new("cc", Duration::from_secs(120)).args(&args).run() {
        Err(cmd::CmdError::NotFound { .. }) => {
            return Err(Error::Missing {
                program: "cc".into(),
                hint: "apt-get install gcc (or run scripts/setup-vm.sh): a user-mode Linux kernel before 7.0 needs a small preload library built on this machine".into(),
            });
        }
        other => other?,
    };
    if out.code != Some(0) {
        return Err(Error::Missing {
            program: "a C compiler's build of bob's UML preload library".into(),
            hint: format!(
                "cc failed on {}: {}; a user-mode Linux kernel before 7.0 needs it on this CPU",
                source.display(),
                out.last_line()
            ),
        });
    }
    std::fs::rename(&partial, &library)
        .map_err(|source| Error::Io { path: library.clone(), source })?;
    Ok(Some(library))
}

/// Whether this CPU's XSAVE area (for the features the host kernel enabled) is larger than
/// x87, SSE and AVX's 832 bytes, so that a UML kernel sized for those may need the
/// preload. Elsewhere nothing is built, and no C compiler is asked for.
fn xsave_beyond_avx() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        // Leaf 0xD is read only when the CPU reports it.
        __cpuid(0).eax >= 0xd && __cpuid_count(0xd, 0).ebx > 832
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// glibc's tunable that keeps its string and memory functions off the AVX registers
/// (ymm, zmm and the 16 registers AVX-512 adds): SSE2 variants remain.
const NO_WIDE_VECTORS: &str =
    "glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX_Fast_Unaligned_Load";

/// Whether a UML kernel of this release keeps its processes' AVX registers across a
/// switch. Older UML saved only the x87/SSE state (`PTRACE_GETFPXREGS`): 4.4.1's
/// arch/x86/um/os-Linux/registers.c has no `have_xstate_support`, 4.16.13's does. On such
/// a kernel every guest process that glibc's string functions run in AVX registers reads
/// garbage (its own arguments: `bob --version` fails there with "unexpected argument"),
/// so its guests run glibc without them. The releases between were not checked: they are
/// treated as the older one, which only costs speed.
fn saves_vector_registers(release: &str) -> bool {
    crate::host::release_version(release) >= (4, 16)
}

/// Whether a kernel of this release fills its entropy pool on its own soon after boot
/// (5.4 added the jitter-based `try_to_generate_entropy`). Before it, a UML guest, with
/// no disk or network interrupts to draw on, may wait minutes or for ever for the
/// 128 bits that `getrandom(2)` waits for, and bob's temporary files (the `tempfile`
/// crate asks `getrandom(2)` for their names) hang with it: 4.4.1 did.
fn seeds_itself(release: &str) -> bool {
    crate::host::release_version(release) >= (5, 4)
}

/// The init's lines that credit the guest's entropy pool with 64 bytes of the host's:
/// written into the control directory, and handed to the kernel by `RNDADDENTROPY`
/// (writing to /dev/urandom mixes bytes in without crediting them). perl does the ioctl
/// because Debian always has it (perl-base is essential) and the guest sees the host's
/// programs; no program of bob's runs before the command.
fn seed_entropy(ctl: &Path) -> Result<String, Error> {
    let mut seed = [0u8; 64];
    let path = ctl.join("entropy-seed");
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed))
        .and_then(|()| std::fs::write(&path, seed))
        .map_err(|source| Error::Io { path: path.clone(), source })?;
    // RNDADDENTROPY = _IOW('R', 0x03, int[2]); struct rand_pool_info { int entropy_count;
    // int buf_size; __u32 buf[]; }, the count in bits.
    Ok(format!(
        "perl -e 'open(my $s, \"<\", $ARGV[0]) or exit 1; binmode $s; local $/; my $d = <$s>; \
         open(my $r, \">\", \"/dev/urandom\") or exit 1; \
         ioctl($r, 0x40085203, pack(\"ii\", 8 * length($d), length($d)) . $d) or exit 1' {} \
         || echo 'bob: could not seed the guest kernel entropy pool; getrandom may block' >&2\n",
        quote(path.as_os_str())
    ))
}

/// The host directories to mount in the guest: what is needed below a guest tmpfs
/// (`/run`, `/dev/shm`) or written, with nested ones dropped (a read-only
/// directory inside a shared one is already there; a writable one inside a read-only
/// share is mounted after it).
fn hostfs_mounts(shares: &[(PathBuf, bool)]) -> Vec<(PathBuf, bool)> {
    const TMPFS: [&str; 2] = ["/run", "/dev/shm"];
    let needed: Vec<(PathBuf, bool)> = shares
        .iter()
        .filter(|(d, writable)| *writable || TMPFS.iter().any(|t| d.starts_with(t)))
        .cloned()
        .collect();
    let mut sorted = needed;
    sorted.sort_by_key(|(d, w)| (d.components().count(), !*w));
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for (dir, writable) in sorted {
        let covered = kept.iter().any(|(k, kw)| dir.starts_with(k) && (*kw || !writable));
        if !covered {
            kept.push((dir, writable));
        }
    }
    kept
}

/// The directory of programs bob puts first on the guest's PATH ([`write_modprobe`]),
/// for a kernel with modules.
pub(crate) fn guest_bin(ctl: &Path, kernel: &BootKernel) -> Option<PathBuf> {
    matches!(&kernel.machine, super::BootMachine::Uml { modules: Some(_) }).then(|| ctl.join("bin"))
}

/// A `modprobe` for the guest's PATH that reads the kernel's own modules (`-d ROOT`, for
/// `ROOT/lib/modules/RELEASE`): the host's root, which the guest sees, has none of them,
/// and bob (and the tools it runs) load modules by name.
fn write_modprobe(ctl: &Path, root: &Path) -> Result<(), Error> {
    let Some(real) = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .chain(["/usr/sbin".into(), "/sbin".into()])
            .map(|d| d.join("modprobe"))
            .find(|p| p.is_file())
    }) else {
        return Err(Error::Missing {
            program: "modprobe".into(),
            hint: "apt-get install kmod (or run scripts/setup-vm.sh): the guest loads its kernel's modules with it".into(),
        });
    };
    let bin = ctl.join("bin");
    std::fs::create_dir_all(&bin).map_err(|source| Error::Io { path: bin.clone(), source })?;
    let path = bin.join("modprobe");
    let text = format!(
        "#!/bin/sh\nexec {} -d {} \"$@\"\n",
        quote(real.as_os_str()),
        quote(root.as_os_str())
    );
    std::fs::write(&path, text).map_err(|source| Error::Io { path: path.clone(), source })?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(|source| Error::Io { path, source })
}

/// Single-quotes a word for sh (a quote inside is closed, escaped and reopened).
pub(crate) fn quote(s: &OsStr) -> String {
    let text = String::from_utf8_lossy(s.as_bytes());
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_own_their_package_versions_only() {
        assert!(UmlSeries::V6_1.owns("6.1um4+b13"));
        assert!(UmlSeries::V6_12.owns("6.12um1+b22"));
        assert!(!UmlSeries::V6_1.owns("6.12um1+b22"));
        assert!(UmlSeries::V7_2.owns("7.2um1"));
        assert!(!UmlSeries::V7_2.owns("7.20um1"));
        assert_eq!(UmlSeries::parse("6.12"), Some(UmlSeries::V6_12));
        assert_eq!(UmlSeries::parse("5.10"), None);
    }

    #[test]
    fn the_archive_is_read_from_either_sources_format() {
        let one_line = "# c\ndeb http://a.example/debian-security bookworm-security main\n\
                        deb https://vendor.example/node nodistro main\n\
                        deb [arch=amd64] http://a.example/debian bookworm main\n";
        assert_eq!(archive_uri(one_line).as_deref(), Some("http://a.example/debian"));
        let deb822 = "Types: deb\nURIs: http://m.example/debian\nSuites: bookworm bookworm-updates\n\
                      Components: main\n\nTypes: deb\nURIs: http://m.example/sec\nSuites: bookworm-security\n";
        assert_eq!(archive_uri(deb822).as_deref(), Some("http://m.example/debian"));
        assert_eq!(archive_uri("Types: deb-src\nURIs: x\nSuites: sid\n"), None);
    }

    #[test]
    fn guests_of_a_uml_kernel_without_xstate_run_glibc_without_avx() {
        assert!(!saves_vector_registers("3.13.10"));
        assert!(!saves_vector_registers("4.4.1"));
        assert!(saves_vector_registers("4.16.13"));
        assert!(saves_vector_registers("7.2.7"));
        let ctl = tempfile::tempdir().unwrap();
        let command = GuestCommand {
            program: "/bin/true".into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: "/".into(),
            writable: Vec::new(),
        };
        let init = |release: &str| {
            let kernel = BootKernel {
                spec: super::super::KernelSpec::Host,
                image: "/nonexistent/linux".into(),
                release: release.into(),
                machine: super::super::BootMachine::Uml { modules: None },
            };
            write_init(ctl.path(), &command, &kernel, "").unwrap();
            std::fs::read_to_string(ctl.path().join("init.sh")).unwrap()
        };
        assert!(init("4.4.1").contains("export GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,"));
        assert!(!init("6.12.113").contains("GLIBC_TUNABLES"));
        assert!(init("4.16.13").contains("0x40085203"));
        assert_eq!(std::fs::read(ctl.path().join("entropy-seed")).unwrap().len(), 64);
        assert!(!init("5.10.223").contains("0x40085203"));
    }

    #[test]
    fn memory_is_said_as_uml_takes_it() {
        assert_eq!(uml_memory("4G"), "4G");
        assert_eq!(uml_memory("2048"), "2048M");
        assert_eq!(uml_memory("512m"), "512M");
    }

    #[test]
    fn only_what_tmpfs_hides_or_the_command_writes_is_mounted_from_the_host() {
        let shares = [
            (PathBuf::from("/tmp/bob-vm-1"), true),
            (PathBuf::from("/work/out"), true),
            (PathBuf::from("/work"), false),
            (PathBuf::from("/run/user/cwd"), false),
            (PathBuf::from("/tmp/t"), true),
            (PathBuf::from("/tmp/t/sub"), false),
            (PathBuf::from("/run/user/cwd/out"), true),
        ];
        let got = hostfs_mounts(&shares);
        // Shallowest first (a share inside another is mounted after it); /work and
        // /tmp/t/sub are seen through the read-only root and the share of /tmp/t.
        let want = [
            (PathBuf::from("/tmp/bob-vm-1"), true),
            (PathBuf::from("/work/out"), true),
            (PathBuf::from("/tmp/t"), true),
            (PathBuf::from("/run/user/cwd"), false),
            (PathBuf::from("/run/user/cwd/out"), true),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn an_elf_program_is_told_from_a_bzimage() {
        let dir = tempfile::tempdir().unwrap();
        let elf = dir.path().join("linux");
        std::fs::write(&elf, b"\x7fELF\x02\x01\x01").unwrap();
        assert!(is_uml_binary(&elf));
        let bz = dir.path().join("bzImage");
        std::fs::write(&bz, vec![0u8; 64]).unwrap();
        assert!(!is_uml_binary(&bz));
    }
}
