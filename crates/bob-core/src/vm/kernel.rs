//! Which kernel a run checks on ([`KernelSpec`]) and where its image and modules come
//! from ([`BootKernel`]): Debian's packages fetched with `apt-get download` and unpacked
//! into bob's kernel cache (never installed: an installed kernel makes every later apt run
//! rebuild initramfs images), or a developer's own build and its modules directory.
//!
//! The cache holds one directory per kernel package, laid out as the package unpacks
//! (`boot/vmlinuz-RELEASE`, `lib/modules/RELEASE`), which is the layout virtme-ng looks
//! for beside a kernel image. A second run finds it there and fetches nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::uml::{self, UmlSeries};
use super::Error;
use crate::device::cmd;

/// A kernel to check on, as `--kernel` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelSpec {
    /// The machine's own kernel: bob runs as always, no virtual machine.
    Host,
    /// A Debian kernel series by its version (`6.1`, `6.12`), from Debian's packages.
    Debian(DebianSeries),
    /// One exact Debian kernel by its upstream version (`6.1.174`): the ABI package
    /// (`linux-image-6.1.0-49-amd64`) whose version is that one, among those the machine's
    /// apt knows (bullseye's for 5.10).
    DebianVersion(String),
    /// Debian's user-mode Linux of a suite (`uml:6.1`, `uml:6.12`, `uml:7.2`).
    Uml(UmlSeries),
    /// A kernel of the user's: a bzImage (booted under qemu) or a user-mode Linux
    /// `linux` binary (run as a program), told apart by their bytes, with its modules
    /// directory, if any.
    Image {
        /// The kernel image or binary.
        image: PathBuf,
        /// Its modules (`lib/modules/RELEASE` of `make modules_install`), or `None` for a
        /// kernel with everything it needs built in.
        modules: Option<PathBuf>,
    },
}

/// The Debian kernel series bob knows how to fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DebianSeries {
    /// Debian 12's default kernel (`linux-image-amd64`): 6.1, the last with reiserfs.
    V6_1,
    /// The 6.12 kernel Debian 12 also ships (`linux-image-6.12-amd64`).
    V6_12,
}

impl DebianSeries {
    /// The metapackage that depends on the current kernel package of the series.
    pub(crate) fn metapackage(self) -> &'static str {
        match self {
            DebianSeries::V6_1 => "linux-image-amd64",
            DebianSeries::V6_12 => "linux-image-6.12-amd64",
        }
    }

    /// The series' version as `--kernel debian:VERSION` says it.
    pub fn version(self) -> &'static str {
        match self {
            DebianSeries::V6_1 => "6.1",
            DebianSeries::V6_12 => "6.12",
        }
    }

    /// Whether a kernel package (`linux-image-6.1.0-56-amd64`) belongs to the series.
    fn owns(self, package: &str) -> bool {
        let release = package.strip_prefix("linux-image-").unwrap_or(package);
        match self {
            DebianSeries::V6_1 => release.starts_with("6.1.") || release.starts_with("6.1-"),
            DebianSeries::V6_12 => release.starts_with("6.12.") || release.starts_with("6.12-"),
        }
    }
}

impl KernelSpec {
    /// Parses one `--kernel` value: `host`, `debian:6.1`, `debian:6.12`, `uml:6.1`,
    /// `uml:6.12`, `uml:7.2`, or a path to a kernel image or UML binary (given its
    /// modules directory separately).
    pub fn parse(text: &str, modules: Option<&Path>) -> Result<KernelSpec, String> {
        match text {
            "host" => Ok(KernelSpec::Host),
            "debian:6.1" => Ok(KernelSpec::Debian(DebianSeries::V6_1)),
            "debian:6.12" => Ok(KernelSpec::Debian(DebianSeries::V6_12)),
            other if other.starts_with("debian:") => {
                let version = &other["debian:".len()..];
                let parts: Vec<&str> = version.split('.').collect();
                match parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()) {
                    true => Ok(KernelSpec::DebianVersion(version.to_owned())),
                    false => Err(format!(
                        "unknown Debian kernel {other:?}; known: debian:6.1, debian:6.12, or an exact version such as debian:6.1.174"
                    )),
                }
            }
            other if other.starts_with("uml:") => UmlSeries::parse(&other[4..])
                .map(KernelSpec::Uml)
                .ok_or_else(|| {
                    format!("unknown user-mode Linux kernel {other:?}; known: uml:6.1, uml:6.12, uml:7.2")
                }),
            path => {
                let image = PathBuf::from(path);
                if !image.is_file() {
                    return Err(format!(
                        "{path}: not host, debian:6.1, debian:6.12, uml:6.1, uml:6.12, uml:7.2 or a kernel image file"
                    ));
                }
                Ok(KernelSpec::Image { image, modules: modules.map(Path::to_owned) })
            }
        }
    }

    /// Whether this is the machine's own kernel.
    pub fn is_host(&self) -> bool {
        matches!(self, KernelSpec::Host)
    }

    /// A short name for messages and directory names (`host`, `debian-6.12`, the image's
    /// file name).
    pub fn label(&self) -> String {
        match self {
            KernelSpec::Host => "host".into(),
            KernelSpec::Debian(series) => format!("debian-{}", series.version()),
            KernelSpec::Uml(series) => format!("uml-{}", series.version()),
            KernelSpec::DebianVersion(version) => format!("debian-{version}"),
            KernelSpec::Image { image, .. } => image
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "kernel".into()),
        }
    }
}

impl std::fmt::Display for KernelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelSpec::Host => f.write_str("host"),
            KernelSpec::Debian(series) => write!(f, "debian:{}", series.version()),
            KernelSpec::Uml(series) => write!(f, "uml:{}", series.version()),
            KernelSpec::DebianVersion(version) => write!(f, "debian:{version}"),
            KernelSpec::Image { image, .. } => write!(f, "{}", image.display()),
        }
    }
}

/// A kernel ready to boot: its image in a directory laid out as virtme-ng expects, or a
/// user-mode Linux binary with its modules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootKernel {
    /// What the user asked for.
    pub spec: KernelSpec,
    /// The kernel image to boot (a UML kernel's binary).
    pub image: PathBuf,
    /// Its release (`uname -r` once booted), read from the image or the package.
    pub release: String,
    /// What runs it.
    pub machine: BootMachine,
}

/// What runs a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootMachine {
    /// qemu, through virtme-ng.
    Qemu,
    /// The kernel itself, a user-mode Linux program.
    Uml {
        /// The directory `modprobe -d` reads its modules from (`DIR/lib/modules/RELEASE`),
        /// `None` for a kernel with everything built in.
        modules: Option<PathBuf>,
    },
}

/// The kernel cache: `$BOB_KERNEL_CACHE`, else `$XDG_CACHE_HOME/bob/kernels`, else
/// `~/.cache/bob/kernels`. The guest reads modules from it through the shared root, so it
/// must not lie where virtme-ng mounts a fresh tmpfs in the guest (`/var/cache`, `/run`).
pub fn cache_dir() -> Result<PathBuf, Error> {
    cache_dir_with(|name| std::env::var_os(name))
}

/// [`cache_dir`] with the environment given.
fn cache_dir_with(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<PathBuf, Error> {
    let dir = env("BOB_KERNEL_CACHE")
        .map(PathBuf::from)
        .or_else(|| env("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("bob/kernels")))
        .or_else(|| env("HOME").map(|d| PathBuf::from(d).join(".cache/bob/kernels")))
        .unwrap_or_else(|| PathBuf::from("/root/.cache/bob/kernels"));
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    for hidden in GUEST_TMPFS {
        if dir.starts_with(hidden) {
            return Err(Error::Cache {
                path: dir.clone(),
                reason: format!(
                    "the guest mounts a fresh tmpfs on {hidden} and would not see the kernel's modules; set BOB_KERNEL_CACHE elsewhere"
                ),
            });
        }
    }
    Ok(dir)
}

/// Directories virtme-ng's guest covers with an empty tmpfs (seen in its mount table).
const GUEST_TMPFS: [&str; 6] =
    ["/var/cache", "/var/tmp", "/var/log", "/var/lib/apt", "/var/lib/private", "/run"];

/// Finds (or fetches into the cache) the kernel `spec` names.
pub fn resolve(spec: &KernelSpec, cache: &Path) -> Result<BootKernel, Error> {
    match spec {
        KernelSpec::Host => Err(Error::HostKernel),
        KernelSpec::Debian(series) => debian(*series, cache),
        KernelSpec::Uml(series) => uml::debian(*series, cache),
        KernelSpec::DebianVersion(version) => debian_version(version, cache),
        KernelSpec::Image { image, modules } if uml::is_uml_binary(image) => {
            uml::own_build(spec, image, modules.as_deref(), cache)
        }
        KernelSpec::Image { image, modules } => own_build(spec, image, modules.as_deref(), cache),
    }
}

/// A Debian kernel: the package the series' metapackage depends on today, unpacked in the
/// cache (fetched first if it is not there). When apt cannot say which package that is (no
/// `apt-get update` yet, or no network), the newest package of the series already in the
/// cache serves.
fn debian(series: DebianSeries, cache: &Path) -> Result<BootKernel, Error> {
    let package = match current_package(series) {
        Ok(package) => package,
        Err(apt_error) => match cached_packages(series, cache).pop() {
            Some(package) => package,
            None => return Err(apt_error),
        },
    };
    let dir = cache.join(&package);
    if !dir.join("boot").is_dir() {
        fetch(&package, cache, None)?;
    }
    unpacked(KernelSpec::Debian(series), &dir)
}

/// An exact Debian kernel (`6.1.174`): the package of it in the cache, else the one the
/// machine's apt (or, for 5.10, bullseye's, through bob's own apt configuration) serves,
/// fetched into the cache.
fn debian_version(version: &str, cache: &Path) -> Result<BootKernel, Error> {
    let spec = KernelSpec::DebianVersion(version.to_owned());
    let marker = |dir: &Path| dir.join("debian-version");
    let cached = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|dir| std::fs::read_to_string(marker(dir)).is_ok_and(|v| v.trim() == version));
    if let Some(dir) = cached {
        return unpacked(spec, &dir);
    }
    let (package, apt) = match package_of_version(version, None)? {
        Some(package) => (package, None),
        None if version.starts_with("5.10.") => {
            let apt = uml::Apt::for_suite("bullseye", cache)?;
            match package_of_version(version, Some(&apt))? {
                Some(package) => (package, Some(apt)),
                None => return Err(no_version(version)),
            }
        }
        None => return Err(no_version(version)),
    };
    let dir = cache.join(&package);
    if !dir.join("boot").is_dir() {
        fetch(&package, cache, apt.as_ref())?;
    }
    std::fs::write(marker(&dir), version)
        .map_err(|source| Error::Io { path: marker(&dir), source })?;
    unpacked(spec, &dir)
}

fn no_version(version: &str) -> Error {
    Error::NoPackage {
        package: format!("a Debian kernel package of version {version}"),
        line: "apt knows none (`apt-cache search linux-image`); bookworm serves 6.1.x ABI packages, bullseye 5.10.x".into(),
    }
}

/// The `linux-image-*-amd64` package whose version is `version` plus a Debian revision
/// (the highest revision, where several), through the machine's apt or `apt`.
fn package_of_version(version: &str, apt: Option<&uml::Apt>) -> Result<Option<String>, Error> {
    let (major_minor, _) = version.rsplit_once('.').unwrap_or((version, ""));
    let pattern =
        format!(r"^linux-image-{}\.[0-9]+-[0-9]+-amd64$", major_minor.replace('.', r"\."));
    let search = ["search", "--names-only", pattern.as_str()];
    let run = |args: &[&str]| match apt {
        None => Ok(cmd::run("apt-cache", args, Duration::from_secs(60))?),
        Some(apt) => apt.run("apt-cache", args, Duration::from_secs(60)),
    };
    let found = run(&search)?;
    let names: Vec<&str> =
        found.stdout.lines().filter_map(|l| l.split_whitespace().next()).collect();
    if names.is_empty() {
        return Ok(None);
    }
    let mut show = vec!["show"];
    show.extend(&names);
    Ok(matching_package(&run(&show)?.stdout, version))
}

/// In `apt-cache show` output, the package whose `Version:` is `version-REVISION`, the
/// highest revision where several.
fn matching_package(show: &str, version: &str) -> Option<String> {
    let prefix = format!("{version}-");
    let mut best: Option<(String, String)> = None;
    for stanza in show.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned())
        };
        let (Some(package), Some(v)) = (field("Package:"), field("Version:")) else { continue };
        if v.starts_with(&prefix) && best.as_ref().is_none_or(|(_, b)| v > *b) {
            best = Some((package, v));
        }
    }
    best.map(|(package, _)| package)
}

/// The kernel package `series`' metapackage depends on (`apt-cache depends`).
fn current_package(series: DebianSeries) -> Result<String, Error> {
    let meta = series.metapackage();
    let out = cmd::run("apt-cache", &["depends", meta], Duration::from_secs(60))?;
    out.stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && series.owns(p))
        .map(str::to_owned)
        .ok_or_else(|| Error::NoPackage { package: meta.to_owned(), line: out.last_line() })
}

/// Packages of `series` unpacked in the cache, oldest first (by name, which orders
/// Debian's ABI numbers only roughly; the last is a fallback, not a choice).
fn cached_packages(series: DebianSeries, cache: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("boot").is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|name| name.starts_with("linux-image-") && series.owns(name))
        .collect();
    found.sort();
    found
}

/// Downloads `package` with apt (the machine's, or `apt`, bob's own configuration of
/// another suite) and unpacks it into `cache/package`, atomically (a half-unpacked
/// directory is never taken for a kernel).
fn fetch(package: &str, cache: &Path, apt: Option<&uml::Apt>) -> Result<(), Error> {
    let cache_error = |reason: String| Error::Cache { path: cache.to_owned(), reason };
    std::fs::create_dir_all(cache).map_err(|e| cache_error(e.to_string()))?;
    let download = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(cache)
        .map_err(|e| cache_error(e.to_string()))?;
    let deb = match apt {
        Some(apt) => apt.download(package, download.path())?,
        None => {
            let out = cmd::Cmd::new("apt-get", Duration::from_secs(900))
                .args(&["download", package])
                .current_dir(download.path())
                .run()?;
            let deb = std::fs::read_dir(download.path())
                .map_err(|e| cache_error(e.to_string()))?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "deb"));
            deb.ok_or_else(|| Error::Fetch { package: package.to_owned(), line: out.last_line() })?
        }
    };
    let partial = download.path().join("unpacked");
    dpkg_extract(&deb, &partial, package)?;
    std::fs::rename(&partial, cache.join(package)).map_err(|e| cache_error(e.to_string()))
}

/// `dpkg-deb -x deb dir`.
pub(super) fn dpkg_extract(deb: &Path, dir: &Path, package: &str) -> Result<(), Error> {
    let out = cmd::run(
        "dpkg-deb",
        &["-x", &deb.to_string_lossy(), &dir.to_string_lossy()],
        Duration::from_secs(600),
    )?;
    if out.code != Some(0) {
        return Err(Error::Fetch { package: package.to_owned(), line: out.last_line() });
    }
    Ok(())
}

/// The kernel unpacked in `dir`: its one `boot/vmlinuz-RELEASE`.
fn unpacked(spec: KernelSpec, dir: &Path) -> Result<BootKernel, Error> {
    let image =
        std::fs::read_dir(dir.join("boot")).into_iter().flatten().flatten().map(|e| e.path()).find(
            |p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("vmlinuz-")),
        );
    let Some(image) = image else {
        return Err(Error::Cache {
            path: dir.to_owned(),
            reason:
                "no boot/vmlinuz-* in the unpacked package; remove the directory to fetch it again"
                    .into(),
        });
    };
    let release = image
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .unwrap_or_default()
        .to_owned();
    Ok(BootKernel { spec, image, release, machine: BootMachine::Qemu })
}

/// A developer's kernel: a copy of the image in a cache directory named after its
/// release, with `lib/modules/RELEASE` a link to the modules directory, so virtme-ng finds
/// both as it finds a Debian package's.
fn own_build(
    spec: &KernelSpec,
    image: &Path,
    modules: Option<&Path>,
    cache: &Path,
) -> Result<BootKernel, Error> {
    let release = image_release(image)?;
    let dir = cache.join(format!("own-{release}"));
    let boot_image = format!("boot/vmlinuz-{release}");
    let boot_image = copy_own_build(image, &dir, &boot_image, modules, &release)?;
    Ok(BootKernel { spec: spec.clone(), image: boot_image, release, machine: BootMachine::Qemu })
}

/// A kernel of the user's copied into the cache directory `dir` (made anew) at `at`
/// below it, with `lib/modules/RELEASE` a link to its modules directory if it has one: the
/// layout of an unpacked package. The copy's path.
pub(super) fn copy_own_build(
    image: &Path,
    dir: &Path,
    at: &str,
    modules: Option<&Path>,
    release: &str,
) -> Result<PathBuf, Error> {
    let cache_error = |reason: String| Error::Cache { path: dir.to_owned(), reason };
    let modules = modules.map(modules_dir).transpose()?;
    let copy = dir.join(at);
    // Several guests of one command (a table's shards, a benchmark's guests) resolve the
    // kernel at once: under a lock, one that finds the same build there uses it, and a new
    // build is made aside and renamed into place, so that none removes a copy another is
    // booting.
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let lock_path = dir.with_file_name(format!("{name}.lock"));
    let lock = std::fs::File::create(&lock_path).map_err(|e| cache_error(e.to_string()))?;
    let _lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| cache_error(format!("locking {}: {e}", lock_path.display())))?;
    if same_build(&copy, image, dir, modules.as_deref(), release) {
        return Ok(copy);
    }
    let partial = dir.with_file_name(format!(
        ".{name}.partial-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&partial); // a crashed run's leftover, if any
    let made = (|| -> std::io::Result<()> {
        let copy = partial.join(at);
        if let Some(parent) = copy.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(image, &copy)?;
        if let Some(modules) = &modules {
            std::fs::create_dir_all(partial.join("lib/modules"))?;
            std::os::unix::fs::symlink(modules, partial.join("lib/modules").join(release))?;
        }
        Ok(())
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(cache_error(e.to_string()));
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(cache_error(e.to_string()));
        }
        _ => {}
    }
    if let Err(e) = std::fs::rename(&partial, dir) {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(cache_error(e.to_string()));
    }
    Ok(copy)
}

/// Whether the cache's `copy` (in `dir`) is `image`, byte for byte, with the same link to
/// `modules`.
fn same_build(
    copy: &Path,
    image: &Path,
    dir: &Path,
    modules: Option<&Path>,
    release: &str,
) -> bool {
    let link = std::fs::read_link(dir.join("lib/modules").join(release)).ok();
    if link.as_deref() != modules {
        return false;
    }
    match (std::fs::metadata(copy), std::fs::metadata(image)) {
        (Ok(a), Ok(b)) if a.len() == b.len() => {}
        _ => return false,
    }
    matches!((std::fs::read(copy), std::fs::read(image)), (Ok(a), Ok(b)) if a == b)
}

/// `--modules DIR` made absolute, once checked to be a modules directory.
pub(super) fn modules_dir(modules: &Path) -> Result<PathBuf, Error> {
    let modules = std::path::absolute(modules)
        .map_err(|e| Error::Cache { path: modules.to_owned(), reason: e.to_string() })?;
    if !modules.join("modules.order").exists() && !modules.join("modules.dep").exists() {
        return Err(Error::Cache {
            path: modules,
            reason: "not a modules directory (no modules.order or modules.dep): give lib/modules/RELEASE of `make modules_install`".into(),
        });
    }
    Ok(modules)
}

/// The release string an x86 bzImage carries: the boot protocol's `kernel_version` field
/// (offset 0x20e) points, less 0x200, to "RELEASE (builder) #1 ...". Read by hand: it is
/// two fields of a documented header (Documentation/arch/x86/boot.rst), no crate reads it.
fn image_release(image: &Path) -> Result<String, Error> {
    let bad = |reason: &str| Error::Image { path: image.to_owned(), reason: reason.to_owned() };
    let bytes = std::fs::read(image).map_err(|e| bad(&e.to_string()))?;
    if bytes.get(0x202..0x206) != Some(b"HdrS") {
        return Err(bad("not an x86 bzImage (no HdrS boot header)"));
    }
    let pointer = u16::from_le_bytes([bytes[0x20e], bytes[0x20f]]) as usize + 0x200;
    let text = bytes.get(pointer..).ok_or_else(|| bad("kernel_version points past the file"))?;
    let release: String =
        text.iter().take_while(|&&b| b != 0 && b != b' ').map(|&b| b as char).collect();
    if release.is_empty() {
        return Err(bad("empty kernel_version"));
    }
    Ok(release)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guests_resolving_one_build_at_once_share_one_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let image = tmp.path().join("linux");
        std::fs::write(&image, vec![7u8; 1 << 20]).unwrap();
        let modules = tmp.path().join("modules");
        std::fs::create_dir_all(&modules).unwrap();
        std::fs::write(modules.join("modules.order"), "").unwrap();
        let dir = tmp.path().join("cache/own-uml-1.2.3");
        std::fs::create_dir_all(tmp.path().join("cache")).unwrap();
        let copies: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| copy_own_build(&image, &dir, "linux", Some(&modules), "1.2.3"))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for copy in copies {
            assert_eq!(std::fs::read(copy.unwrap()).unwrap(), std::fs::read(&image).unwrap());
        }
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join("cache"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let mut leftovers = leftovers;
        leftovers.sort();
        assert_eq!(leftovers, ["own-uml-1.2.3", "own-uml-1.2.3.lock"], "no partial copy is left");
        // The same build again is used as it is; a new one replaces it.
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = inode(&dir.join("linux"));
        copy_own_build(&image, &dir, "linux", Some(&modules), "1.2.3").unwrap();
        assert_eq!(inode(&dir.join("linux")), before);
        std::fs::write(&image, vec![8u8; 1 << 20]).unwrap();
        let copy = copy_own_build(&image, &dir, "linux", Some(&modules), "1.2.3").unwrap();
        assert_eq!(std::fs::read(copy).unwrap(), vec![8u8; 1 << 20]);
    }

    #[test]
    fn specs_parse_and_name_themselves() {
        assert_eq!(KernelSpec::parse("host", None).unwrap(), KernelSpec::Host);
        let d = KernelSpec::parse("debian:6.12", None).unwrap();
        assert_eq!((d.to_string(), d.label()), ("debian:6.12".into(), "debian-6.12".into()));
        let err = KernelSpec::parse("debian:5.10", None).unwrap_err();
        assert!(err.contains("known: debian:6.1, debian:6.12"), "{err}");
        let v = KernelSpec::parse("debian:6.1.174", None).unwrap();
        assert_eq!((v.to_string(), v.label()), ("debian:6.1.174".into(), "debian-6.1.174".into()));
        assert!(KernelSpec::parse("debian:6.1.x", None).is_err());
        let u = KernelSpec::parse("uml:7.2", None).unwrap();
        assert_eq!((u.to_string(), u.label()), ("uml:7.2".into(), "uml-7.2".into()));
        let err = KernelSpec::parse("uml:5.10", None).unwrap_err();
        assert!(err.contains("known: uml:6.1, uml:6.12, uml:7.2"), "{err}");
        let err = KernelSpec::parse("/no/such/bzImage", None).unwrap_err();
        assert!(err.starts_with("/no/such/bzImage: not host"), "{err}");
    }

    #[test]
    fn an_exact_version_is_found_among_the_abi_packages() {
        let show = "Package: linux-image-6.1.0-48-amd64\nVersion: 6.1.172-1\n\n\
                    Package: linux-image-6.1.0-49-amd64\nVersion: 6.1.174-1\n\n\
                    Package: linux-image-6.1.0-47-amd64\nVersion: 6.1.170-3\n";
        let found = matching_package(show, "6.1.174");
        assert_eq!(found.as_deref(), Some("linux-image-6.1.0-49-amd64"));
        assert_eq!(matching_package(show, "6.1.17"), None, "6.1.17 is not 6.1.170");
        assert_eq!(matching_package(show, "6.1.171"), None);
    }

    #[test]
    fn series_own_their_packages_only() {
        assert!(DebianSeries::V6_1.owns("linux-image-6.1.0-56-amd64"));
        assert!(!DebianSeries::V6_1.owns("linux-image-6.12.117+deb12-amd64"));
        assert!(DebianSeries::V6_12.owns("linux-image-6.12.117+deb12-amd64"));
        assert!(!DebianSeries::V6_12.owns("linux-image-6.1.0-56-amd64"));
    }

    #[test]
    fn a_bzimage_release_is_read_from_its_boot_header_and_junk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut image = vec![0u8; 0x400];
        image[0x202..0x206].copy_from_slice(b"HdrS");
        image[0x20e..0x210].copy_from_slice(&(0x300u16 - 0x200).to_le_bytes());
        image[0x300..0x300 + 30].copy_from_slice(b"6.13.0-rc1-dev (me@box) #1 SMP");
        let path = dir.path().join("bzImage");
        std::fs::write(&path, &image).unwrap();
        assert_eq!(image_release(&path).unwrap(), "6.13.0-rc1-dev");
        std::fs::write(&path, b"not a kernel").unwrap();
        let err = image_release(&path).unwrap_err().to_string();
        assert!(err.contains("not an x86 bzImage"), "{err}");
    }

    #[test]
    fn a_cache_where_the_guest_mounts_a_tmpfs_is_refused() {
        let env = |cache: &'static str| {
            move |name: &str| match name {
                "BOB_KERNEL_CACHE" => Some(cache.into()),
                _ => None,
            }
        };
        let err = cache_dir_with(env("/var/cache/bob/kernels")).unwrap_err().to_string();
        assert!(err.contains("fresh tmpfs on /var/cache"), "{err}");
        assert_eq!(cache_dir_with(env("/srv/k")).unwrap(), PathBuf::from("/srv/k"));
        let home = |name: &str| (name == "HOME").then(|| "/home/me".into());
        assert_eq!(cache_dir_with(home).unwrap(), PathBuf::from("/home/me/.cache/bob/kernels"));
    }
}
