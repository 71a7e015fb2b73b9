//! What the kernel says is mounted and what backs each loop device, read in one place.
//!
//! The kernel writes a mount point, root or source into `/proc/self/mountinfo` with space,
//! tab, newline and backslash escaped as `\ooo` (three octal digits); every other byte,
//! UTF-8 or not, is written as is. A loop device's backing file in
//! `/sys/block/loopN/loop/backing_file` is its path unescaped, ended by one newline. Each
//! is parsed here as bytes, so a scratch directory whose name holds any of those
//! characters is found where it is; the registry's cleanup, replay-log's refusal of a
//! mounted device and the recorder's search for tracefs all read through this module.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One line of mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The device number of the mounted file system (`major`, `minor`).
    pub dev: (u32, u32),
    /// The directory of the file system mounted here (`/` unless a bind of a subtree).
    pub root: PathBuf,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The file system type (`ext4`, `fuse`, `fuse.bob`, ...).
    pub fstype: String,
    /// The mount source (a device path for most file systems).
    pub source: OsString,
}

/// A bound loop device and its backing file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopBacking {
    /// The device node (`/dev/loopN`).
    pub device: PathBuf,
    /// The backing file as the kernel names it.
    pub backing: PathBuf,
}

/// Undoes mountinfo's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134`
/// backslash, and any other `\ooo`); a backslash not followed by three octal digits is
/// kept.
fn unescape(field: &[u8]) -> OsString {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (field[i], octal) {
            (b'\\', Some(d)) => {
                let value = u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8;
                // `\400` and above are no byte; the kernel never writes them.
                out.push((value + u32::from(d[2] - b'0')) as u8);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    OsString::from(OsStr::from_bytes(&out))
}

/// Parses the text of a mountinfo file; malformed lines are left out.
fn parse_mountinfo(text: &[u8]) -> Vec<MountEntry> {
    text.split(|b| *b == b'\n').filter_map(parse_line).collect()
}

fn parse_line(line: &[u8]) -> Option<MountEntry> {
    let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
    let dash = fields.iter().position(|f| *f == b"-")?;
    let dev = std::str::from_utf8(fields.get(2)?).ok()?;
    let (major, minor) = dev.split_once(':')?;
    Some(MountEntry {
        dev: (major.parse().ok()?, minor.parse().ok()?),
        root: unescape(fields.get(3)?).into(),
        mount_point: unescape(fields.get(4)?).into(),
        fstype: unescape(fields.get(dash + 1)?).to_string_lossy().into_owned(),
        source: unescape(fields.get(dash + 2)?),
    })
}

/// The mounts of this process's mount namespace, in mount order; empty if unreadable.
pub fn mountinfo() -> Vec<MountEntry> {
    parse_mountinfo(&std::fs::read("/proc/self/mountinfo").unwrap_or_default())
}

/// Mount points at or below `dir`, deepest first (the order they can be unmounted in).
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        mountinfo().into_iter().map(|m| m.mount_point).filter(|m| m.starts_with(dir)).collect();
    v.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    v
}

/// A backing_file's content as a path: the kernel ends it with exactly one newline, and
/// a name may itself end in a space, tab or newline.
fn backing_path(content: &[u8]) -> PathBuf {
    let name = content.strip_suffix(b"\n").unwrap_or(content);
    PathBuf::from(OsStr::from_bytes(name))
}

/// Every bound loop device with its backing file.
pub(crate) fn loop_backings() -> Vec<LoopBacking> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    let mut v: Vec<LoopBacking> = entries
        .flatten()
        .filter(|e| e.file_name().as_bytes().starts_with(b"loop"))
        .filter_map(|e| {
            let content = std::fs::read(e.path().join("loop/backing_file")).ok()?;
            let device = Path::new("/dev").join(e.file_name());
            Some(LoopBacking { device, backing: backing_path(&content) })
        })
        .collect();
    v.sort_by(|a, b| a.device.cmp(&b.device));
    v
}

/// Loop devices whose backing file lies below `dir`.
pub fn loops_below(dir: &Path) -> Vec<LoopBacking> {
    loop_backings().into_iter().filter(|l| l.backing.starts_with(dir)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;
    use std::time::Duration;

    #[test]
    fn every_octal_escape_is_undone_and_a_lone_backslash_kept() {
        assert_eq!(unescape(br"/a\040b\011c\012d\134e"), OsString::from("/a b\tc\nd\\e"));
        assert_eq!(unescape(br"/x\04"), OsString::from(r"/x\04"), "too few digits");
        assert_eq!(unescape(br"/x\089"), OsString::from(r"/x\089"), "not octal");
        assert_eq!(unescape(b"/\xff"), OsString::from_vec(b"/\xff".to_vec()));
    }

    #[test]
    fn a_mountinfo_line_gives_its_device_mount_point_type_and_source() {
        let text = b"36 35 7:3 / /tmp/a\\040b\\134c rw,relatime shared:1 master:2 - ext4 \
/dev/loop3 rw\n37 35 0:52 /sub /mnt/fuse rw - fuse.bob bob\\040disk rw\nnot a line\n";
        let got = parse_mountinfo(text);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].dev, (7, 3));
        assert_eq!(got[0].mount_point, Path::new("/tmp/a b\\c"));
        assert_eq!(got[0].fstype, "ext4");
        assert_eq!(got[0].source, OsString::from("/dev/loop3"));
        assert_eq!(got[1].root, Path::new("/sub"));
        assert_eq!(got[1].fstype, "fuse.bob");
        assert_eq!(got[1].source, OsString::from("bob disk"));
    }

    #[test]
    fn a_backing_file_loses_only_the_kernels_newline() {
        assert_eq!(backing_path(b"/a b\t\n\n"), Path::new("/a b\t\n"));
        assert_eq!(backing_path(b"/plain"), Path::new("/plain"));
    }

    /// A real ext4 image bound to a loop device through a file whose name holds a space,
    /// a tab, a newline and a backslash, mounted at a directory named the same way: the
    /// module finds the loop device by its backing file and the mount by its point.
    #[test]
    fn a_real_loop_device_and_mount_with_awkward_names_are_found() {
        use crate::device::{cmd, loopdev::LoopDevice, mount};
        let ci = std::env::var("CI").as_deref() == Ok("true");
        let missing = if !nix::unistd::Uid::effective().is_root() {
            Some("root")
        } else if !cmd::available("mkfs.ext4") {
            Some("mkfs.ext4")
        } else {
            None
        };
        if let Some(missing) = missing {
            assert!(!ci, "needs {missing}");
            eprintln!("skipped: needs {missing}");
            return;
        }
        let scratch = tempfile::tempdir().unwrap();
        let awkward = "a b\tc\nd\\e";
        let image = scratch.path().join(format!("{awkward}.img"));
        std::fs::File::create(&image).unwrap().set_len(16 << 20).unwrap();
        let out = cmd::Cmd::new("mkfs.ext4", Duration::from_secs(60))
            .args(&[OsStr::new("-q"), OsStr::new("-F"), image.as_os_str()])
            .run()
            .unwrap();
        assert_eq!(out.code, Some(0), "mkfs.ext4: {}", out.last_line());
        let target = scratch.path().join(awkward);
        std::fs::create_dir(&target).unwrap();
        // Guards: the mount drops before the loop device, the loop device before the
        // directory, on every path out of this test, a failed assertion included.
        let dev = LoopDevice::attach_free(&image).unwrap();
        let mounted = mount::mount(dev.path(), &target, "ext4", "").unwrap();

        let loops = loops_below(scratch.path());
        assert_eq!(loops, vec![LoopBacking { device: dev.path().to_owned(), backing: image }]);
        assert_eq!(mounts_below(scratch.path()), vec![target.clone()]);
        let entry = mountinfo().into_iter().find(|m| m.mount_point == target).unwrap();
        assert_eq!(entry.fstype, "ext4");
        let rdev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(dev.path()).unwrap());
        assert_eq!(entry.dev, (libc::major(rdev), libc::minor(rdev)));

        mounted.unmount().unwrap();
        dev.detach().unwrap();
        assert!(mounts_below(scratch.path()).is_empty());
        assert!(loops_below(scratch.path()).is_empty());
    }
}
