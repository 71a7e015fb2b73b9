//! A signature's reproducers: a standalone shell script (bob records the minimal
//! workload on a fresh file system, `bob replay` rebuilds the failing crash image and
//! checks it), and an xfstests generic test in the form of Ace's xfstests adapter
//! (dm-log-writes records the workload, `replay-log` replays the log up to each mark
//! after a persistence point, and the test checks what the call promised there).

use std::fmt::Write as _;
use std::path::Path;

use workloads::{Op, Workload};

use crate::fs::FsConfig;
use crate::output::SignatureWitness;

/// Quotes `s` for a POSIX shell.
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The shell reproducer of a signature's minimal workload `w` on `config`: records it
/// afresh (mkfs, setup, the ops, the drain) with `bob run --workload`, then rebuilds the
/// first failing crash state's image with `bob replay --check` and checks it again. Exits
/// as `bob replay --check` does: 1 when the failure reproduces, 0 when it did not this
/// time, 2 when bob could not run.
pub(crate) fn shell(
    config: &FsConfig,
    w: &Workload,
    witness: &SignatureWitness,
    file: &Path,
    run_args: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "#!/bin/sh");
    let _ = writeln!(s, "# bob explore reproducer: {} on {}", w.name, config.name);
    let _ = writeln!(s, "# expected: {}", witness.story.replace('\n', " "));
    let _ = writeln!(s, "# mkfs: {} DEVICE", config.mkfs.join(" "));
    let _ = writeln!(s, "# the workload (setup in the base image, then recorded):");
    for op in &w.setup {
        let _ = writeln!(s, "#   setup: {op}");
    }
    for op in &w.ops {
        let _ = writeln!(s, "#   op:    {op}");
    }
    let _ = writeln!(s, "# the crash image found first: {}", witness.replay);
    let _ = writeln!(s, "# Run as root: BOB=/path/to/bob sh reproduce.sh");
    let _ = writeln!(s, "set -u");
    let _ = writeln!(s, "BOB=${{BOB:-bob}}");
    let _ = writeln!(s, "HERE=$(cd \"$(dirname \"$0\")\" && pwd)");
    let _ = writeln!(s, "WORKLOAD=${{WORKLOAD:-$HERE/{}}}", file_name(file));
    let _ = writeln!(s, "OUT=${{OUT:-$(mktemp -d)}}");
    let _ =
        writeln!(s, "# 1. mkfs, the workload and its crash states, recorded and checked afresh.");
    let _ = writeln!(
        s,
        "\"$BOB\" run --fs {} --workload \"$WORKLOAD\" --schedules sync{run_args} --out \"$OUT\"",
        config.name
    );
    let _ = writeln!(s, "status=$?");
    let _ = writeln!(
        s,
        "if [ \"$status\" -eq 0 ]; then echo \"not reproduced: every state held\"; exit 0; fi"
    );
    let _ = writeln!(s, "if [ \"$status\" -ne 1 ]; then exit \"$status\"; fi");
    let _ =
        writeln!(s, "# 2. The failing crash image, rebuilt from the trace, recovered and checked.");
    let _ = writeln!(
        s,
        "\"$BOB\" replay \"$OUT\"/{}/{} --to \"$OUT/crash.img\" --check",
        config.name,
        q(&w.name)
    );
    s
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workload.json".into())
}

/// How an xfstests test runs an op: as `xfs_io` commands on one file (`-c` arguments,
/// after an `open` of that file), which a test joins into one `xfs_io` process with the
/// ops around it, or as a shell command of its own.
enum XfsIo {
    /// `xfs_io` commands; `file` is opened first (with `-d` for O_DIRECT) unless `None`.
    Commands { file: Option<String>, direct: bool, cmds: Vec<String> },
    /// A shell line.
    Shell(String),
}

/// The fill byte of the `n`-th write of a test: each write its own (never zero, the
/// byte of a hole), so that old data reads differently from what overwrote it.
fn fill_byte(n: usize) -> String {
    format!("0x{:02x}", 0x41 + n % 190)
}

/// How `op` runs in an xfstests test, on `$SCRATCH_MNT`; `fill` is the byte its data is
/// written with, if it writes any.
fn xfstests_op(op: &Op, fill: &str) -> Option<XfsIo> {
    let m = |p: &str| format!("$SCRATCH_MNT{p}");
    let io = |path: &str, direct: bool, cmds: Vec<String>| XfsIo::Commands {
        file: Some(m(path)),
        direct,
        cmds,
    };
    Some(match op {
        Op::Mkdir { path } => XfsIo::Shell(format!("mkdir {}", m(path))),
        Op::Rmdir { path } => XfsIo::Shell(format!("rmdir {}", m(path))),
        Op::Creat { path, .. } => XfsIo::Shell(format!("touch {}", m(path))),
        Op::Write { path, offset, len } | Op::Append { path, offset, len } => {
            io(path, false, vec![format!("pwrite -S {fill} {offset} {len}")])
        }
        Op::DirectWrite { path, offset, len } => {
            io(path, true, vec![format!("pwrite -S {fill} {offset} {len}")])
        }
        Op::SyncWrite { path, offset, len, flag, direct } => {
            // O_SYNC on the descriptor (xfs_io -s); O_DSYNC as the write's RWF_DSYNC
            // (pwrite -D), which Linux runs as O_DSYNC's write does.
            let (open, each) = match flag {
                workloads::SyncFlag::Sync => ("-s ", ""),
                workloads::SyncFlag::Dsync => ("", "-D "),
            };
            let d = if *direct { "-d " } else { "" };
            XfsIo::Shell(format!(
                "$XFS_IO_PROG {d}{open}-c \"pwrite {each}-S {fill} {offset} {len}\" {} >> $seqres.full",
                m(path)
            ))
        }
        Op::MmapWrite { path, offset, len } => io(
            path,
            false,
            vec![
                format!("truncate {}", offset + len),
                format!("mmap -w {offset} {len}"),
                format!("mwrite -S {fill} {offset} {len}"),
                format!("msync -s {offset} {len}"),
                "munmap".into(),
            ],
        ),
        Op::OtruncWrite { path, len, chunk } => XfsIo::Shell(format!(
            "$XFS_IO_PROG -t -c \"pwrite -S {fill} -b {chunk} 0 {len}\" {} >> $seqres.full",
            m(path)
        )),
        Op::Falloc { path, mode, offset, len } => {
            let (cmd, keep) = falloc_command(*mode);
            io(path, false, vec![format!("{cmd} {keep}{offset} {len}")])
        }
        Op::Truncate { path, size } => io(path, false, vec![format!("truncate {size}")]),
        Op::Link { from, to } => XfsIo::Shell(format!("ln {} {}", m(from), m(to))),
        Op::Symlink { target, path } => XfsIo::Shell(format!("ln -s {} {}", m(target), m(path))),
        Op::Unlink { path } => XfsIo::Shell(format!("rm -f {}", m(path))),
        Op::Rename { from, to } => XfsIo::Shell(format!("mv {} {}", m(from), m(to))),
        Op::Setxattr { path, name, value } => {
            XfsIo::Shell(format!("$SETFATTR_PROG -n {name} -v {value} {}", m(path)))
        }
        Op::Removexattr { path, name } => {
            XfsIo::Shell(format!("$SETFATTR_PROG -x {name} {}", m(path)))
        }
        Op::Rename2 { from, to, how } => {
            let flag = match how {
                workloads::RenameHow::Exchange => "-x",
                workloads::RenameHow::Noreplace => "-n",
                workloads::RenameHow::Whiteout => "-w",
            };
            XfsIo::Shell(format!("$here/src/renameat2 {} {} {flag}", m(from), m(to)))
        }
        Op::Chmod { path, mode } => XfsIo::Shell(format!("chmod {mode:04o} {}", m(path))),
        Op::Chown { path, uid, gid } => XfsIo::Shell(format!("chown -h {uid}:{gid} {}", m(path))),
        Op::Utimes { path, mtime } => XfsIo::Shell(format!("touch -h -d @{mtime} {}", m(path))),
        Op::TmpfileLink { path, len } => {
            let dir = Path::new(path).parent().and_then(Path::to_str).unwrap_or("/");
            XfsIo::Shell(format!(
                "$XFS_IO_PROG -T -c \"pwrite -S {fill} 0 {len}\" -c \"flink {}\" {} >> $seqres.full",
                m(path),
                m(dir).trim_end_matches('/')
            ))
        }
        Op::Clone { from, to } => io(to, false, vec![format!("reflink {}", m(from))]),
        Op::CloneRange { from, to, offset, len } => {
            io(to, false, vec![format!("reflink {} {offset} {offset} {len}", m(from))])
        }
        Op::CopyRange { from, to, offset, len } => {
            io(to, false, vec![format!("copy_range -s {offset} -d {offset} -l {len} {}", m(from))])
        }
        Op::DedupeRange { from, to, offset, len } => {
            io(to, false, vec![format!("dedupe {} {offset} {offset} {len}", m(from))])
        }
        Op::Fsync { path } => io(path, false, vec!["fsync".into()]),
        Op::Fdatasync { path } => io(path, false, vec!["fdatasync".into()]),
        Op::Sync => XfsIo::Commands { file: None, direct: false, cmds: vec!["sync".into()] },
        Op::Syncfs => XfsIo::Shell("$XFS_IO_PROG -c syncfs $SCRATCH_MNT".into()),
        Op::WritebackStart { path } => io(path, false, vec!["sync_range -w 0 0".into()]),
        Op::DropCaches => XfsIo::Shell("echo 2 > /proc/sys/vm/drop_caches".into()),
        // A descriptor kept across other ops is a shell's: exec N< opens it (a file or a
        // directory), the fd-* ops reopen it through /proc/self/fd/N (the same inode,
        // named or not).
        Op::Open { path, fd } => XfsIo::Shell(format!("exec {}< {}", fd_number(fd), m(path))),
        Op::Close { fd } => XfsIo::Shell(format!("exec {}>&-", fd_number(fd))),
        Op::FdFsync { fd } => fd_io(fd, vec!["fsync".into()]),
        Op::FdFdatasync { fd } => fd_io(fd, vec!["fdatasync".into()]),
        Op::FdWrite { fd, offset, len } => {
            fd_io(fd, vec![format!("pwrite -S {fill} {offset} {len}")])
        }
        // OptFS's, Valor's and xsyncfs' calls exist only on bob's own file systems, which
        // xfstests cannot mount.
        Op::Osync | Op::Dsync | Op::Output | Op::TxnBegin | Op::TxnCommit { .. } | Op::TxnAbort => {
            return None
        }
    })
}

/// The shell descriptor number of the workload's descriptor `fd`: one of 10-99, the
/// same for the same name (a workload keeps one or two open, so names rarely share one).
fn fd_number(fd: &str) -> u32 {
    10 + fd.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % 90
}

/// xfs_io running `cmds` on the open file behind the shell's descriptor for `fd`.
fn fd_io(fd: &str, cmds: Vec<String>) -> XfsIo {
    XfsIo::Commands { file: Some(format!("/proc/self/fd/{}", fd_number(fd))), direct: false, cmds }
}

/// The xfs_io command that runs fallocate in `mode`, and its keep-size flag (`-k `, or
/// nothing), for a test's ops and for its `_require_xfs_io_command` lines.
fn falloc_command(mode: workloads::FallocMode) -> (&'static str, &'static str) {
    use workloads::FallocMode as M;
    match mode {
        M::Default => ("falloc", ""),
        M::KeepSize => ("falloc", "-k "),
        M::ZeroRange => ("fzero", ""),
        M::ZeroRangeKeepSize => ("fzero", "-k "),
        M::PunchHole => ("fpunch", ""),
        M::CollapseRange => ("fcollapse", ""),
        M::InsertRange => ("finsert", ""),
        M::UnshareRange => ("funshare", ""),
    }
}

/// Shell lines for a run of ops: consecutive `xfs_io` commands share one process, so
/// ops that race the clock (an overwrite in the same timestamp tick as the write
/// before it) run as close together as a test can run them.
#[derive(Default)]
struct OpLines {
    lines: Vec<String>,
    pending: Vec<String>,
    writes: usize,
}

impl OpLines {
    fn push(&mut self, op: &Op) {
        let fill = fill_byte(self.writes);
        let Some(run) = xfstests_op(op, &fill) else { return };
        if matches!(
            op,
            Op::Write { .. }
                | Op::Append { .. }
                | Op::DirectWrite { .. }
                | Op::SyncWrite { .. }
                | Op::FdWrite { .. }
                | Op::MmapWrite { .. }
                | Op::OtruncWrite { .. }
                | Op::TmpfileLink { .. }
        ) {
            self.writes += 1;
        }
        match run {
            XfsIo::Commands { file, direct, cmds } => {
                if let Some(f) = file {
                    let d = if direct { "-d " } else { "" };
                    self.pending.push(format!("-c \"open {d}{f}\""));
                }
                self.pending.extend(cmds.iter().map(|c| format!("-c \"{c}\"")));
            }
            XfsIo::Shell(line) => {
                self.end();
                self.lines.push(line);
            }
        }
    }

    /// Ends the current `xfs_io` process (before a mark, a shell op, the end).
    fn end(&mut self) {
        if !self.pending.is_empty() {
            self.lines.push(format!("$XFS_IO_PROG {} >> $seqres.full", self.pending.join(" ")));
            self.pending.clear();
        }
    }

    fn take(&mut self) -> Vec<String> {
        self.end();
        std::mem::take(&mut self.lines)
    }
}

/// Where an exported test goes in xfstests, and what it forces: a configuration with the
/// file system's default options is a `generic` test; one with its own mount options or
/// mkfs features belongs to that file system's directory (`ext4/`, `xfs/`, ...), where
/// the test may force them, since a generic test run under default options could never
/// fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct XfstestsTarget {
    /// `generic`, or the directory of the configuration's file system.
    pub dir: &'static str,
    /// Mount options the test passes (`-o ...`), beyond the kernel's defaults.
    pub mount_options: Option<String>,
    /// mkfs features the test passes (`-O ...`), beyond mkfs' defaults.
    pub mkfs_features: Option<String>,
}

/// The [`XfstestsTarget`] of a configuration.
pub(crate) fn xfstests_target(config: &FsConfig) -> XfstestsTarget {
    // What the kernel does without options, which a test need not force.
    let default = |o: &str| match config.fstype {
        "ext3" | "ext4" => o == "data=ordered",
        _ => false,
    };
    let options: Vec<&str> =
        config.mount_options.split(',').filter(|o| !o.is_empty() && !default(o)).collect();
    let features =
        config.mkfs.windows(2).filter(|w| w[0] == "-O").map(|w| w[1]).collect::<Vec<_>>().join(",");
    let forced = !options.is_empty() || !features.is_empty();
    let dir = match config.fstype {
        _ if !forced => "generic",
        "ext2" | "ext3" | "ext4" => "ext4",
        "xfs" => "xfs",
        "btrfs" => "btrfs",
        "f2fs" => "f2fs",
        "nilfs2" => "nilfs2",
        _ => "generic",
    };
    XfstestsTarget {
        dir,
        mount_options: (!options.is_empty()).then(|| options.join(",")),
        mkfs_features: (!features.is_empty()).then_some(features),
    }
}

/// An xfstests test (a `tests/DIR/NNN` body) for a signature's minimal workload, written
/// to fstests' conventions: the setup, then the ops recorded through dm-log-writes with
/// a mark after each persistence point, and for each mark the log replayed up to it,
/// mounted, and what was promised there checked (the files and directories the call
/// persisted exist, with the size and data they had), as Ace's adapter checks at its
/// checkpoints.
///
/// The log is replayed onto a dm-thin volume, not the scratch device it was written
/// through: replay-log zeroes the device with the discard mkfs logged, and only a thin
/// volume (or a loop device) is sure to read zeros after a discard. On another disk a
/// replay would start from the final image and the test could pass where the bug is.
///
/// With `lost_writes` (a signature about recovery: a state that does not mount, needs
/// repair or fails fsck), the test also builds, for each write of the workload, the crash
/// state a volatile cache may leave without that one write (the log replayed up to the
/// next flush, the write's sectors given back what they held before it), and requires
/// each to mount: a reordering inside one flush interval, which no prefix up to a mark
/// shows.
pub fn xfstests(
    seq: &str,
    config: &FsConfig,
    w: &Workload,
    story: &str,
    lost_writes: bool,
) -> String {
    let target = xfstests_target(config);
    let mut s = String::new();
    xfstests_preamble(&mut s, seq, config, &target, w, story, lost_writes);
    let marks = xfstests_workload(&mut s, w, lost_writes);
    xfstests_replays(&mut s, &marks, &target);
    if lost_writes {
        let mount = format!("_dmthin_mount{}", mount_args(&target));
        s.push_str(&LOST_WRITES.replace("END_MARK", "bob_end").replace("MOUNT", &mount));
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "echo \"Silence is golden\"");
    let _ = writeln!(s, "status=0");
    let _ = writeln!(s, "exit");
    s
}

/// ` -o OPTS` where the target forces mount options, else nothing.
fn mount_args(target: &XfstestsTarget) -> String {
    target.mount_options.as_ref().map(|o| format!(" -o {o}")).unwrap_or_default()
}

/// The lost-write states of [`xfstests`] between the marks `bob_begin` (before the first
/// op) and END_MARK (after bob's drain), each mounted with MOUNT.
const LOST_WRITES: &str = r#"
# each write of the workload lost, everything else up to the next flush written:
# a crash state a volatile write cache may leave; recovery must mount it
replay=$here/src/log-writes/replay-log
start=$(_log_writes_mark_to_entry_number bob_begin)
end=$(_log_writes_mark_to_entry_number END_MARK)
[ -z "$start" -o -z "$end" ] && _fail "the marks are not in the log"
$replay -v --log $LOGWRITES_DEV --start-entry $start --limit $((end - start)) \
	--replay /dev/null --no-discard | \
	sed -n 's/^replaying \([0-9]*\)@[0-9]*: sector \([0-9]*\), size \([0-9]*\), flags 0x[0-9a-f]*(\(.*\))$/\1 \2 \3 \4/p' \
	> $tmp.entries
cat $tmp.entries >> $seqres.full
while read entry sector bytes flags; do
	[ "$bytes" -eq 0 ] && continue
	echo "$flags" | grep -q FLUSH && continue
	stop=$(awk -v after=$entry -v end=$end \
		'$1 > after && $4 ~ /FLUSH/ { print $1; f = 1; exit } END { if (!f) print end }' \
		$tmp.entries)
	# from the zeroed volume (the log starts with mkfs's discard) up to the write
	$replay --log $LOGWRITES_DEV --replay $DMTHIN_VOL_DEV --limit $entry \
		>> $seqres.full 2>&1 || _fail "replay to entry $entry failed"
	dd if=$DMTHIN_VOL_DEV of=$tmp.before bs=512 skip=$sector \
		count=$((bytes / 512)) status=none || _fail "reading sectors at $sector failed"
	$replay --log $LOGWRITES_DEV --replay $DMTHIN_VOL_DEV --start-entry $entry \
		--limit $((stop - entry)) >> $seqres.full 2>&1 || _fail "replay failed"
	dd if=$tmp.before of=$DMTHIN_VOL_DEV bs=512 seek=$sector conv=notrunc \
		status=none || _fail "writing sectors at $sector failed"
	if ! MOUNT >> $seqres.full 2>&1; then
		echo "entries up to $((stop - 1)) without entry $entry" \
			"(sector $sector, $bytes bytes, $flags): mount failed"
		continue
	fi
	_unmount $SCRATCH_MNT
done < $tmp.entries
"#;

/// The test's header, cleanup, requirements, and the log-writes device over a thin
/// volume.
fn xfstests_preamble(
    s: &mut String,
    seq: &str,
    config: &FsConfig,
    target: &XfstestsTarget,
    w: &Workload,
    story: &str,
    lost_writes: bool,
) {
    let _ = writeln!(s, "#! /bin/bash");
    let _ = writeln!(s, "# SPDX-License-Identifier: GPL-2.0");
    // fstests wants the submitter's copyright; bob cannot know who that is.
    let year = &crate::host::utc_now()[..4];
    let _ = writeln!(s, "# Copyright (c) {year} Your Name.  All Rights Reserved.");
    let _ = writeln!(s, "#");
    let _ = writeln!(s, "# FS QA Test No. {seq}");
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# Test that what each persistence point promised holds after a crash right after it"
    );
    if lost_writes {
        let _ = writeln!(
            s,
            "# returned, and that every state a volatile write cache may leave mounts."
        );
    } else {
        let _ = writeln!(s, "# returned.");
    }
    let _ = writeln!(
        s,
        "# Generated by bob explore from workload {} (found on {}):",
        w.name, config.name
    );
    let _ = writeln!(s, "#   {}", story.replace('\n', " "));
    let _ = writeln!(
        s,
        "# dm-log-writes logs a write once a flush or its own FUA covers it; the log is"
    );
    let _ = writeln!(s, "# replayed onto a thin volume, whose discards zero it, up to each mark.");
    let _ = writeln!(s, "#");
    let _ = writeln!(s, ". ./common/preamble");
    let mut groups = vec!["auto", "quick", "log", "replay", "thin", "metadata", "data"];
    if lost_writes {
        groups.push("recoveryloop");
    }
    let _ = writeln!(s, "_begin_fstest {}", groups.join(" "));
    let _ = writeln!(s);
    let _ = writeln!(s, "_cleanup()");
    let _ = writeln!(s, "{{");
    let _ = writeln!(s, "\tcd /");
    let _ = writeln!(s, "\t_log_writes_cleanup &> /dev/null");
    let _ = writeln!(s, "\t_dmthin_cleanup");
    let _ = writeln!(s, "\trm -f $tmp.*");
    let _ = writeln!(s, "}}");
    let _ = writeln!(s);
    // The fix is not known when bob exports: fstests' placeholder until it is merged.
    let guard = if target.dir == "generic" {
        format!("[ \"$FSTYP\" = \"{}\" ] && ", config.fstype)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "{guard}_fixed_by_kernel_commit xxxxxxxxxxxx \\\n\t\"the fix's subject, once there is one\""
    );
    let _ = writeln!(s);
    let _ = writeln!(s, ". ./common/filter");
    let _ = writeln!(s, ". ./common/dmthin");
    let _ = writeln!(s, ". ./common/dmlogwrites");
    let (sources, requires) = xfstests_requirements(w);
    for source in sources {
        let _ = writeln!(s, ". ./common/{source}");
    }
    let _ = writeln!(s);
    // The scratch device holds the thin pool, not a file system to check.
    let _ = writeln!(s, "_require_scratch_nocheck");
    let _ = writeln!(s, "_require_no_logdev");
    let _ = writeln!(s, "_require_log_writes");
    let _ = writeln!(s, "_require_dm_target thin-pool");
    for line in requires {
        let _ = writeln!(s, "{line}");
    }
    if let (Some(features), "ext4") = (&target.mkfs_features, target.dir) {
        for f in features.split(',') {
            let _ = writeln!(s, "_require_scratch_ext4_feature {f}");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "sectors=$((1024 * 1024 * $(_small_fs_size_mb 200) / 512))");
    let _ = writeln!(s, "_dmthin_init $sectors $sectors");
    let _ = writeln!(s, "_log_writes_init $DMTHIN_VOL_DEV");
    let mkfs_args = target.mkfs_features.as_ref().map(|f| format!(" -O {f}")).unwrap_or_default();
    let _ = writeln!(s, "_log_writes_mkfs{mkfs_args} >> $seqres.full 2>&1");
    match &target.mount_options {
        Some(o) => {
            let _ = writeln!(s, "_log_writes_mount -o {o} || _notrun \"mount -o {o} failed\"");
        }
        None => {
            let _ = writeln!(s, "_log_writes_mount");
        }
    }
    let _ = writeln!(s);
}

/// The `common/` files a test sources beyond filter and dmlogwrites, and its
/// `_require_*` lines beyond the scratch device and log-writes: what its ops need, so a
/// machine without them says `notrun`, never a failure.
fn xfstests_requirements(w: &Workload) -> (Vec<&'static str>, Vec<String>) {
    let mut sources = Vec::new();
    let mut requires = vec!["_require_xfs_io_command \"falloc\"".to_string()];
    let mut need = |source: Option<&'static str>, line: String| {
        if let Some(src) = source {
            if !sources.contains(&src) {
                sources.push(src);
            }
        }
        if !requires.contains(&line) {
            requires.push(line);
        }
    };
    for op in w.setup.iter().chain(&w.ops) {
        match op {
            // xfstests' common/attr: setfattr/getfattr and user xattrs on the scratch fs.
            Op::Setxattr { .. } | Op::Removexattr { .. } => {
                need(Some("attr"), "_require_attrs".into())
            }
            Op::Rename2 { how, .. } => {
                need(Some("renameat2"), format!("_require_renameat2 {}", how.name()))
            }
            Op::Clone { .. } | Op::CloneRange { .. } => {
                need(Some("reflink"), "_require_scratch_reflink".into())
            }
            Op::DedupeRange { .. } => need(Some("reflink"), "_require_scratch_dedupe".into()),
            Op::CopyRange { .. } => need(None, "_require_xfs_io_command \"copy_range\"".into()),
            Op::TmpfileLink { .. } => {
                need(None, "_require_xfs_io_command \"-T\"".into());
                need(None, "_require_xfs_io_command \"flink\"".into());
            }
            // Mode 0 and keep-size are the "falloc" every test requires already.
            Op::Falloc { mode, .. } => {
                need(None, format!("_require_xfs_io_command \"{}\"", falloc_command(*mode).0))
            }
            _ => {}
        }
    }
    (sources, requires)
}

/// The setup, then the ops with a mark after each persistence point; returns each mark
/// with the checks of what its persistence point promised.
fn xfstests_workload(s: &mut String, w: &Workload, drain: bool) -> Vec<(String, Vec<String>)> {
    let _ = writeln!(s, "# setup");
    let mut lines = OpLines::default();
    for op in &w.setup {
        lines.push(op);
    }
    for l in lines.take() {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(s, "_scratch_sync");
    let _ = writeln!(s, "_log_writes_mark bob_begin");
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "# the workload, each write with its own byte; a mark after each persistence point,"
    );
    let _ = writeln!(s, "# then the checksums of the files whose data it promised");
    let mut marks: Vec<(String, Vec<String>)> = Vec::new();
    let model = workloads::model_states(w);
    for (k, op) in w.ops.iter().enumerate() {
        lines.push(op);
        if op.is_persistence_point() {
            for l in lines.take() {
                let _ = writeln!(s, "{l}");
            }
            let mark = format!("bob_op{k}");
            let _ = writeln!(s, "_log_writes_mark {mark}");
            let promised = promise_checks(w, &model, k, op, &mark);
            for c in &promised.captures {
                let _ = writeln!(s, "{c}");
            }
            marks.push((mark, promised.checks));
        }
    }
    // The ops after the last persistence point run too: they are what a crash after the
    // mark may or may not keep.
    if drain {
        // With the lost-write states, bob's drain runs too, as in bob's recording: the
        // state that failed recovery may be one of the drain's commits.
        let _ = writeln!(s, "# bob's drain: the rest of the recording");
        for op in &w.drain {
            lines.push(op);
        }
    }
    for l in lines.take() {
        let _ = writeln!(s, "{l}");
    }
    if drain {
        let _ = writeln!(s, "_log_writes_mark bob_end");
    }
    marks
}

/// What a persistence point promised, as shell lines: `captures` run right after its mark
/// (the checksums of the files whose data it promised, as they read when the call
/// returned), `checks` after the replay up to that mark.
struct Promised {
    captures: Vec<String>,
    checks: Vec<String>,
}

/// What the persistence point `op` (the `k`-th op, marked `mark`) promised, as far as a
/// shell can check it: the persisted names and, for files, their size and their data (a
/// sync promises every file's, a fsync its file's).
fn promise_checks(
    w: &Workload,
    model: &[workloads::ModelState],
    k: usize,
    op: &Op,
    mark: &str,
) -> Promised {
    let mut checks = Vec::new();
    let mut captures = Vec::new();
    if let Some(state) = model.get(k + 1) {
        let targets: Vec<String> = match op {
            Op::Fsync { path } | Op::Fdatasync { path } => {
                let mut t: Vec<String> = vec![path.clone()];
                if state.node(path).is_some_and(|n| n.kind == workloads::NodeKind::Dir) {
                    let prefix = if path == "/" { "/".to_owned() } else { format!("{path}/") };
                    t.extend(
                        state
                            .names
                            .keys()
                            .filter(|p| {
                                p.starts_with(&prefix)
                                    && !p[prefix.len()..].contains('/')
                                    && p.as_str() != workloads::DRAIN_FILE
                                    && model[0].id(p).is_some()
                            })
                            .cloned(),
                    );
                }
                t
            }
            // Through a descriptor: the names the inode has at the call (none: nothing
            // a replay can look up).
            Op::FdFsync { fd } | Op::FdFdatasync { fd } => state
                .handles
                .get(fd)
                .map(|&id| state.names_of(id).map(str::to_owned).collect())
                .unwrap_or_default(),
            // A synchronous write promises its range, not the file a checksum covers.
            Op::SyncWrite { .. } => Vec::new(),
            _ => state
                .names
                .keys()
                .filter(|p| p.as_str() != "/" && p.as_str() != workloads::DRAIN_FILE)
                .cloned()
                .collect(),
        };
        for p in targets {
            if p == "/" {
                continue;
            }
            // A fsynced file's name is promised only if it was durable already (the
            // setup's), or under fsync-persists-name; otherwise only its size, if
            // the name is there.
            let file_sync = matches!(
                op,
                Op::Fsync { .. }
                    | Op::Fdatasync { .. }
                    | Op::FdFsync { .. }
                    | Op::FdFdatasync { .. }
            );
            let name_promised = !file_sync
                || model[0].id(&p).is_some() && model[0].id(&p) == state.id(&p)
                || (matches!(op, Op::Fsync { .. } | Op::FdFsync { .. })
                    && w.guarantees.contains(&workloads::Guarantee::FsyncPersistsName));
            let absent_ok =
                if name_promised { String::new() } else { format!("[ ! -e $SCRATCH_MNT{p} ] || ") };
            match state.node(&p) {
                Some(n) if n.kind == workloads::NodeKind::File => {
                    checks.push(format!(
                        "{absent_ok}[ \"$(stat -c %s $SCRATCH_MNT{p} 2>/dev/null)\" = \"{}\" ] || echo \"{p}: size $(stat -c %s $SCRATCH_MNT{p} 2>&1), expected {}\"",
                        n.size, n.size
                    ));
                    let var = format!("sum_{mark}_{}", captures.len());
                    captures.push(format!(
                        "{var}=$(md5sum < $SCRATCH_MNT{p} 2>/dev/null | cut -d' ' -f1)"
                    ));
                    checks.push(format!(
                        "{absent_ok}[ \"$(md5sum < $SCRATCH_MNT{p} 2>/dev/null | cut -d' ' -f1)\" = \"${var}\" ] || echo \"{p}: data differs from what it read when the call of {mark} returned\""
                    ));
                    // The attributes the workload set, which fsync and sync promise
                    // (fdatasync does not).
                    let attrs = [
                        ("%a", n.meta.mode.map(|m| format!("{m:o}")), "mode"),
                        ("%u:%g", n.meta.owner.map(|(u, g)| format!("{u}:{g}")), "owner"),
                        ("%Y", n.meta.mtime.map(|t| t.to_string()), "mtime"),
                    ];
                    for (format, want, what) in attrs {
                        let datasync = matches!(op, Op::Fdatasync { .. } | Op::FdFdatasync { .. });
                        let Some(want) = want.filter(|_| !datasync) else {
                            continue;
                        };
                        checks.push(format!(
                            "{absent_ok}[ \"$(stat -c {format} $SCRATCH_MNT{p} 2>/dev/null)\" = \"{want}\" ] || echo \"{p}: {what} $(stat -c {format} $SCRATCH_MNT{p} 2>&1), expected {want}\""
                        ));
                    }
                }
                Some(_) => checks.push(format!(
                    "[ -e $SCRATCH_MNT{p} -o -L $SCRATCH_MNT{p} ] || echo \"{p}: missing\""
                )),
                None => {}
            }
        }
    }
    Promised { captures, checks }
}

/// The replay up to each mark onto the thin volume, mounted and checked.
fn xfstests_replays(s: &mut String, marks: &[(String, Vec<String>)], target: &XfstestsTarget) {
    let _ = writeln!(s);
    let _ = writeln!(s, "_log_writes_unmount");
    let _ = writeln!(s, "_log_writes_remove");
    let _ = writeln!(s);
    let _ = writeln!(s, "# replay up to each mark, as a crash right after the persistence point");
    for (mark, checks) in marks {
        let _ = writeln!(s, "_log_writes_replay_log {mark} $DMTHIN_VOL_DEV");
        let _ = writeln!(s, "_dmthin_mount{}", mount_args(target));
        for c in checks {
            let _ = writeln!(s, "{c}");
        }
        let _ = writeln!(s, "_unmount $SCRATCH_MNT");
        let _ = writeln!(s, "_dmthin_check_fs");
    }
}

/// The golden output (`NNN.out`) of [`xfstests`].
pub(crate) fn xfstests_out(seq: &str) -> String {
    format!("QA output created by {seq}\nSilence is golden\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `shell -n` reads the script `f` without running it and finds no syntax error.
    fn assert_parses(shell: &str, f: &std::path::Path) {
        let timeout = std::time::Duration::from_secs(30);
        let args = [std::ffi::OsStr::new("-n"), f.as_os_str()];
        let out = crate::device::cmd::Cmd::new(shell, timeout).args(&args).run().unwrap();
        assert_eq!(out.code, Some(0), "{shell} -n: {}", out.stderr);
    }

    fn workload() -> Workload {
        Workload {
            name: "ace-s1-7".into(),
            property: None,
            setup: vec![
                Op::Creat { path: "/drain".into(), sync: false },
                Op::Mkdir { path: "/A".into() },
            ],
            ops: vec![
                Op::Creat { path: "/A/foo".into(), sync: false },
                Op::Fsync { path: "/A/foo".into() },
            ],
            drain: vec![Op::Sync],
            commit_midway: vec![],
            guarantees: vec![],
        }
    }

    #[test]
    fn xfstests_export_has_the_form_of_a_generic_test() {
        let config = crate::fs::by_name("ext4-ordered").unwrap();
        let t = xfstests("999", &config, &workload(), "lost", false);
        for needle in [
            "#! /bin/bash",
            ". ./common/preamble",
            "_begin_fstest ",
            ". ./common/dmlogwrites",
            "_require_log_writes",
            "_log_writes_init $DMTHIN_VOL_DEV",
            "_log_writes_mkfs",
            "_log_writes_mount",
            "_log_writes_mark bob_op1",
            "_log_writes_replay_log bob_op1 $DMTHIN_VOL_DEV",
            "_dmthin_mount\n",
            "_dmthin_check_fs",
            "_require_no_logdev",
            "_require_dm_target thin-pool",
            "_dmthin_init $sectors $sectors",
            "status=0",
            "touch $SCRATCH_MNT/A/foo",
            "$XFS_IO_PROG -c \"open $SCRATCH_MNT/A/foo\" -c \"fsync\" >> $seqres.full",
        ] {
            assert!(t.contains(needle), "missing {needle:?} in\n{t}");
        }
        // The promise checked at the mark: /A/foo's size if it is there (its name is new
        // and POSIX does not promise it after a fsync of the file alone).
        assert!(
            t.contains("[ ! -e $SCRATCH_MNT/A/foo ] || [ \"$(stat -c %s $SCRATCH_MNT/A/foo"),
            "{t}"
        );
        // Under fsync-persists-name the name is promised too.
        let mut strict = workload();
        strict.guarantees = vec![workloads::Guarantee::FsyncPersistsName];
        assert!(!t.contains("without entry"), "no lost-write states unless asked: {t}");
        let t = xfstests("998", &config, &strict, "lost", true);
        assert!(t.contains("\n[ \"$(stat -c %s $SCRATCH_MNT/A/foo"), "{t}");
        // A signature about recovery: bob's drain runs too, then each write between the
        // first op and the drain's end is lost in turn, and the state must mount.
        for needle in [
            "_scratch_sync\n_log_writes_mark bob_begin\n",
            "-c \"sync\" >> $seqres.full\n_log_writes_mark bob_end\n",
            "end=$(_log_writes_mark_to_entry_number bob_end)",
            "if ! _dmthin_mount >> $seqres.full",
            "--replay $DMTHIN_VOL_DEV --limit $entry",
            "without entry $entry",
        ] {
            assert!(t.contains(needle), "missing {needle:?} in\n{t}");
        }
        assert!(t.trim_end().ends_with("status=0\nexit"), "{t}");
        assert!(!t.contains("$SCRATCH_DEV"), "never replayed onto the logged device: {t}");
        // Both forms pass bob's lint of fstests' conventions.
        let golden = xfstests_out("998");
        assert_eq!(crate::run::xfstests_lint::lint("998", &t, Some(&golden)), vec![]);
        let plain = xfstests("999", &config, &workload(), "lost", false);
        let golden = xfstests_out("999");
        assert_eq!(crate::run::xfstests_lint::lint("999", &plain, Some(&golden)), vec![]);
        // Its sed reads replay-log's verbose lines into "entry sector bytes flags".
        let script = t.split("sed -n '").nth(1).and_then(|r| r.split('\'').next()).unwrap();
        let line = "replaying 12@3400: sector 56, size 4096, flags 0x12(FUA|METADATA)\n";
        let out = crate::device::cmd::Cmd::new("sed", std::time::Duration::from_secs(30))
            .args(&["-n", script])
            .stdin(line)
            .run()
            .unwrap();
        assert_eq!(out.stdout, "12 56 4096 FUA|METADATA\n", "{script}");
        assert_eq!(xfstests_out("999"), "QA output created by 999\nSilence is golden\n");
        // It parses as shell.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("999");
        std::fs::write(&f, &t).unwrap();
        assert_parses("bash", &f);
    }

    /// The xfs finding's workload: a direct write, its fsync, an overwrite in the same
    /// clock tick, sync. The test must tell the overwrite's data from the old (each write
    /// its own byte, checksums taken when each call returned) and run the overwrite as
    /// soon after the write before it as it can (ops between marks in one xfs_io).
    #[test]
    fn xfstests_export_checks_data_and_keeps_ops_together() {
        let w = Workload {
            name: "ace-s2-327978".into(),
            property: None,
            setup: vec![
                Op::Creat { path: "/drain".into(), sync: false },
                Op::Mkdir { path: "/A".into() },
                Op::Creat { path: "/A/foo".into(), sync: false },
                Op::Write { path: "/A/foo".into(), offset: 0, len: 16384 },
            ],
            ops: vec![
                Op::DirectWrite { path: "/A/foo".into(), offset: 8192, len: 4096 },
                Op::Fsync { path: "/A/foo".into() },
                Op::Write { path: "/A/foo".into(), offset: 7680, len: 4096 },
                Op::Sync,
            ],
            drain: vec![Op::Sync],
            commit_midway: vec![],
            guarantees: vec![],
        };
        let config = crate::fs::by_name("xfs").unwrap();
        let t = xfstests("997", &config, &w, "stale data", false);
        let m = "$SCRATCH_MNT/A/foo";
        let io = format!(
            "$XFS_IO_PROG -c \"open -d {m}\" -c \"pwrite -S 0x42 8192 4096\" -c \"open {m}\" -c \"fsync\" >> $seqres.full\n_log_writes_mark bob_op1\n"
        );
        assert!(t.contains(&io), "{t}");
        let io = format!(
            "$XFS_IO_PROG -c \"open {m}\" -c \"pwrite -S 0x43 7680 4096\" -c \"sync\" >> $seqres.full\n_log_writes_mark bob_op3\n"
        );
        assert!(t.contains(&io), "{t}");
        assert!(t.contains("-c \"pwrite -S 0x41 0 16384\""), "setup's own byte: {t}");
        // At the sync's mark, the checksum of every file but the drain's, and after the
        // replay to that mark the same checksums.
        let sum = "sum_bob_op3_0=$(md5sum < $SCRATCH_MNT/A/foo 2>/dev/null | cut -d' ' -f1)";
        assert!(t.contains(sum), "{t}");
        assert!(!t.contains("md5sum < $SCRATCH_MNT/drain"), "{t}");
        let after = t.split("_log_writes_replay_log bob_op3 $DMTHIN_VOL_DEV").nth(1).unwrap();
        assert!(
            after.contains(&format!(
                "[ \"$(md5sum < {m} 2>/dev/null | cut -d' ' -f1)\" = \"$sum_bob_op3_0\" ] || echo \"/A/foo: data differs from what it read when the call of bob_op3 returned"
            )),
            "{t}"
        );
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("997");
        std::fs::write(&f, &t).unwrap();
        assert!(std::process::Command::new("bash").arg("-n").arg(&f).status().unwrap().success());
    }

    /// The ops written by hand for the recall catalog (a synchronous write, an eviction, a
    /// descriptor kept across an unlink) export as xfs_io and shell lines that parse and
    /// pass the lint.
    #[test]
    fn xfstests_export_of_sync_writes_evictions_and_kept_descriptors() {
        let f = |p: &str| p.to_string();
        let w = Workload {
            name: "ops".into(),
            property: None,
            setup: vec![
                Op::Creat { path: f("/drain"), sync: false },
                Op::Mkdir { path: f("/A") },
                Op::Creat { path: f("/A/foo"), sync: false },
            ],
            ops: vec![
                Op::SyncWrite {
                    path: f("/A/foo"),
                    offset: 0,
                    len: 4096,
                    flag: workloads::SyncFlag::Sync,
                    direct: true,
                },
                Op::SyncWrite {
                    path: f("/A/foo"),
                    offset: 4096,
                    len: 4096,
                    flag: workloads::SyncFlag::Dsync,
                    direct: false,
                },
                Op::Open { path: f("/A/foo"), fd: f("h") },
                Op::Unlink { path: f("/A/foo") },
                Op::DropCaches,
                Op::FdWrite { fd: f("h"), offset: 0, len: 4096 },
                Op::FdFsync { fd: f("h") },
                Op::Close { fd: f("h") },
            ],
            drain: vec![Op::Sync],
            commit_midway: vec![],
            guarantees: vec![],
        };
        let config = crate::fs::by_name("ext4-ordered").unwrap();
        let t = xfstests("996", &config, &w, "ops", false);
        let m = "$SCRATCH_MNT/A/foo";
        let n = fd_number("h");
        for line in [
            format!("$XFS_IO_PROG -d -s -c \"pwrite -S 0x41 0 4096\" {m} >> $seqres.full"),
            format!("$XFS_IO_PROG -c \"pwrite -D -S 0x42 4096 4096\" {m} >> $seqres.full"),
            format!("exec {n}< {m}"),
            "echo 2 > /proc/sys/vm/drop_caches".to_string(),
            format!("-c \"open /proc/self/fd/{n}\" -c \"fsync\""),
            format!("exec {n}>&-"),
        ] {
            assert!(t.contains(&line), "{line:?} in {t}");
        }
        // No whole-file checksum after the synchronous write (it promises its range) or
        // after the fsync of a file with no name left.
        for mark in ["bob_op0", "bob_op6"] {
            let replay = format!("_log_writes_replay_log {mark} $DMTHIN_VOL_DEV");
            let after = t.split(&replay).nth(1).unwrap_or_else(|| panic!("{mark} in {t}"));
            let section = after.split("_log_writes_replay_log").next().unwrap();
            assert!(!section.contains("md5sum"), "{mark}: {section}");
        }
        let golden = xfstests_out("996");
        assert_eq!(crate::run::xfstests_lint::lint("996", &t, Some(&golden)), vec![]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("996");
        std::fs::write(&file, &t).unwrap();
        assert!(std::process::Command::new("bash")
            .arg("-n")
            .arg(&file)
            .status()
            .unwrap()
            .success());
    }

    /// A configuration with its own options is a test of its file system's directory
    /// that forces them (a generic test under default options could never fail); one
    /// with the defaults is generic.
    #[test]
    fn xfstests_target_forces_what_the_configuration_adds() {
        let target = |name| xfstests_target(&crate::fs::by_name(name).unwrap());
        let plain = XfstestsTarget { dir: "generic", mount_options: None, mkfs_features: None };
        assert_eq!(target("ext4-ordered"), plain);
        assert_eq!(target("xfs"), plain);
        let forced = target("ext4-async-commit");
        assert_eq!(forced.dir, "ext4");
        let o = "data=writeback,journal_checksum,journal_async_commit";
        assert_eq!(forced.mount_options.as_deref(), Some(o));
        assert_eq!(target("ext4-fast-commit").mkfs_features.as_deref(), Some("fast_commit"));
        assert_eq!(target("btrfs-zstd").dir, "btrfs");
        let config = crate::fs::by_name("ext4-async-commit").unwrap();
        let t = xfstests("309", &config, &workload(), "needs repair", true);
        for needle in [
            format!("_log_writes_mount -o {o} || _notrun"),
            format!("_dmthin_mount -o {o}\n"),
            format!("if ! _dmthin_mount -o {o} >> $seqres.full"),
        ] {
            assert!(t.contains(&needle), "missing {needle:?} in\n{t}");
        }
        assert!(!t.contains("[ \"$FSTYP\""), "an ext4 test needs no guard: {t}");
        let golden = xfstests_out("309");
        assert_eq!(crate::run::xfstests_lint::lint("309", &t, Some(&golden)), vec![]);
    }

    #[test]
    fn shell_reproducer_parses_and_names_its_steps() {
        let config = crate::fs::by_name("ext2").unwrap();
        let witness = SignatureWitness {
            workload: "/x/workload.json".into(),
            ops: vec![],
            story: "violated: it's lost".into(),
            dir: "/x/runs/ext2/ace-s1-7".into(),
            state: "sync/e1:0".into(),
            replay: "bob replay /x/runs/ext2/ace-s1-7 --state sync/e1:0 --to crash.img --check"
                .into(),
            confirmed: Some(true),
            dropped_ops: 0,
            reproducer: None,
        };
        let s = shell(
            &config,
            &workload(),
            &witness,
            Path::new("/x/workload.json"),
            " --atomic-write-unit 512",
        );
        assert!(
            s.contains(
                "run --fs ext2 --workload \"$WORKLOAD\" --schedules sync --atomic-write-unit 512"
            ),
            "{s}"
        );
        assert!(
            s.contains("replay \"$OUT\"/ext2/'ace-s1-7' --to \"$OUT/crash.img\" --check"),
            "{s}"
        );
        assert!(s.contains("# mkfs: mke2fs -q -F -t ext2"), "{s}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.sh");
        std::fs::write(&f, &s).unwrap();
        assert_parses("sh", &f);
    }
}
