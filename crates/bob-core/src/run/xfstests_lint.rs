//! A lint for xfstests tests, bob's exports and the hand-written tests of its findings:
//! the rules a maintainer of fstests applies on review, checked before anything leaves.
//! It reads the test as text (no shell runs): each rule names what it wants and why.

/// fstests' group names (its `doc/group-names.txt`); `_begin_fstest` takes no other.
const GROUPS: &[&str] = &[
    "all",
    "auto",
    "quick",
    "deprecated",
    "acl",
    "admin",
    "aio",
    "atime",
    "atomicwrites",
    "attr",
    "attr2",
    "balance",
    "bigtime",
    "blockdev",
    "broken",
    "cap",
    "casefold",
    "ci",
    "clone",
    "clone_stress",
    "collapse",
    "compress",
    "convert",
    "copy",
    "copy_range",
    "copyup",
    "dangerous",
    "dangerous_fuzzers",
    "dangerous_selftest",
    "data",
    "dax",
    "db",
    "dedupe",
    "defrag",
    "dir",
    "dump",
    "eio",
    "encrypt",
    "enospc",
    "exportfs",
    "fiemap",
    "filestreams",
    "fiexchange",
    "freeze",
    "fsck",
    "fsmap",
    "fsproperties",
    "fsr",
    "fsstress_online_repair",
    "fsstress_scrub",
    "fuzzers",
    "fuzzers_bothrepair",
    "fuzzers_norepair",
    "fuzzers_online_repair",
    "fuzzers_repair",
    "growfs",
    "hardlink",
    "health",
    "idmapped",
    "inobtcount",
    "insert",
    "ioctl",
    "io_uring",
    "label",
    "limit",
    "locks",
    "log",
    "logical_resolve",
    "logprint",
    "long_rw",
    "metacopy",
    "metadata",
    "metadump",
    "mkfs",
    "mmap",
    "mount",
    "nested",
    "nfs4_acl",
    "nonsamefs",
    "online_repair",
    "other",
    "parent",
    "pattern",
    "perms",
    "pipe",
    "pnfs",
    "posix",
    "prealloc",
    "preallocrw",
    "punch",
    "qgroup",
    "quota",
    "raid",
    "read_repair",
    "realtime",
    "recoveryloop",
    "redirect",
    "remote",
    "remount",
    "rename",
    "repair",
    "replace",
    "replay",
    "resize",
    "rmap",
    "rotate",
    "rw",
    "samefs",
    "scrub",
    "seed",
    "seek",
    "selftest",
    "send",
    "shrinkfs",
    "shutdown",
    "smoketest",
    "snapshot",
    "soak",
    "spaceman",
    "splice",
    "stress",
    "subvol",
    "swap",
    "swapext",
    "symlink",
    "tape",
    "tempfsid",
    "thin",
    "trim",
    "udf",
    "union",
    "unlink",
    "unreliable_in_parallel",
    "unshare",
    "v2log",
    "verity",
    "volume",
    "whiteout",
    "xino",
    "zero",
    "zone",
];

/// One broken rule: the line (1-based, 0 for the whole file) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lint {
    /// The line, from 1; 0 for a rule about the whole file.
    pub line: usize,
    /// What is wrong, and what fstests wants instead.
    pub message: String,
}

/// The rules `text` (the test named `name`, e.g. `788`) breaks; `golden` is its `.out`
/// file, if there is one.
pub(crate) fn lint(name: &str, text: &str, golden: Option<&str>) -> Vec<Lint> {
    let mut out = Vec::new();
    let mut whole = |message: String| out.push(Lint { line: 0, message });
    let lines: Vec<&str> = text.lines().collect();
    let has = |needle: &str| lines.iter().any(|l| l.trim_start().starts_with(needle));
    if lines.first() != Some(&"#! /bin/bash") {
        whole("the first line is not `#! /bin/bash`".into());
    }
    if lines.get(1) != Some(&"# SPDX-License-Identifier: GPL-2.0") {
        whole("the second line is not `# SPDX-License-Identifier: GPL-2.0`".into());
    }
    if !lines.iter().take(6).any(|l| l.starts_with("# Copyright (c) ")) {
        whole("no `# Copyright (c) YEAR NAME` line in the header".into());
    }
    if !lines.iter().any(|l| *l == format!("# FS QA Test No. {name}")) {
        whole(format!("no `# FS QA Test No. {name}` line (the file's name)"));
    }
    if !has(". ./common/preamble") {
        whole("does not source ./common/preamble".into());
    }
    let groups = lines.iter().find_map(|l| l.strip_prefix("_begin_fstest "));
    match groups {
        None => whole("no `_begin_fstest` line".into()),
        Some(g) => {
            for group in g.split_whitespace().filter(|g| !GROUPS.contains(g)) {
                whole(format!("`{group}` is not one of fstests' group names"));
            }
        }
    }
    let group = |g: &str| groups.is_some_and(|gs| gs.split_whitespace().any(|x| x == g));
    if has("_log_writes_init") {
        log_writes_rules(&lines, &group, &mut whole);
    }
    for (i, l) in lines.iter().enumerate() {
        // A bare sync syncs every file system of the machine; fstests syncs the
        // scratch one. sync(2) as the call under test is passed as an argument instead.
        if l.trim() == "sync" {
            out.push(Lint {
                line: i + 1,
                message:
                    "bare `sync`: use `_scratch_sync` (or name sync(2) as the call under test)"
                        .into(),
            });
        }
    }
    if !lines.iter().any(|l| l.contains("_fixed_by_kernel_commit")) {
        out.push(Lint {
            line: 0,
            message: "no `_fixed_by_kernel_commit` (xxxxxxxxxxxx until the fix is merged)".into(),
        });
    }
    let last = lines.last().map_or("", |l| l.trim());
    let ends = (has("status=0") && last == "exit") || last == "_exit 0";
    if !ends {
        out.push(Lint { line: 0, message: "does not end with `status=0` and `exit`".into() });
    }
    match golden {
        None => out.push(Lint { line: 0, message: format!("no {name}.out beside it") }),
        Some(g) if !g.starts_with(&format!("QA output created by {name}\n")) => out.push(Lint {
            line: 0,
            message: format!("{name}.out does not start with `QA output created by {name}`"),
        }),
        Some(_) => {}
    }
    out
}

/// The rules of a test that replays a dm-log-writes log.
fn log_writes_rules(lines: &[&str], group: &dyn Fn(&str) -> bool, whole: &mut dyn FnMut(String)) {
    let has = |needle: &str| lines.iter().any(|l| l.trim_start().starts_with(needle));
    let any = |needle: &str| lines.iter().any(|l| l.contains(needle));
    for (rule, why) in [
        ("_require_log_writes", "it needs dm-log-writes"),
        ("_require_no_logdev", "an external log device is not logged"),
    ] {
        if !has(rule) {
            whole(format!("no `{rule}` ({why})"));
        }
    }
    if !group("replay") {
        whole("replays a dm-log-writes log but is not in the `replay` group".into());
    }
    // A replay starts from the discard mkfs logged: only a device whose discard zeroes
    // (a thin volume) starts from zeros on every machine.
    let onto_scratch = lines.iter().any(|l| {
        (l.contains("_log_writes_replay_log") || l.contains("--replay"))
            && l.contains("$SCRATCH_DEV")
    });
    if onto_scratch {
        whole("replays onto $SCRATCH_DEV, whose discard need not zero: replay onto a thin volume (_dmthin_init, $DMTHIN_VOL_DEV)".into());
    }
    if any("$DMTHIN_VOL_DEV") {
        if !has("_require_dm_target thin-pool") {
            whole("uses a thin volume without `_require_dm_target thin-pool`".into());
        }
        if !group("thin") {
            whole("uses a thin volume but is not in the `thin` group".into());
        }
        if !any("_dmthin_cleanup") {
            whole("its _cleanup does not call `_dmthin_cleanup`".into());
        }
        if has("_require_scratch") && !has("_require_scratch_nocheck") {
            whole("the scratch device holds the thin pool: `_require_scratch_nocheck`".into());
        }
    }
}

/// Lints the test file `path` (its `.out` read from beside it).
#[cfg(test)]
fn lint_file(path: &std::path::Path) -> std::io::Result<Vec<Lint>> {
    let text = std::fs::read_to_string(path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // A test kept as DIR-NNN (ext4-309) is test NNN of DIR.
    let number = name.rsplit('-').next().unwrap_or(&name).to_owned();
    let golden = std::fs::read_to_string(path.with_file_name(format!("{name}.out"))).ok();
    Ok(lint(&number, &text, golden.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "#! /bin/bash\n# SPDX-License-Identifier: GPL-2.0\n\
        # Copyright (c) 2026 Someone.  All Rights Reserved.\n#\n# FS QA Test No. 123\n#\n\
        . ./common/preamble\n_begin_fstest auto quick log replay thin\n\
        _cleanup()\n{\n\t_log_writes_cleanup &> /dev/null\n\t_dmthin_cleanup\n}\n\
        _fixed_by_kernel_commit xxxxxxxxxxxx \"fs: fix\"\n\
        _require_scratch_nocheck\n_require_no_logdev\n_require_log_writes\n\
        _require_dm_target thin-pool\n_dmthin_init $sectors $sectors\n\
        _log_writes_init $DMTHIN_VOL_DEV\n_scratch_sync\n\
        _log_writes_replay_log m $DMTHIN_VOL_DEV\nstatus=0\nexit\n";
    const OUT: &str = "QA output created by 123\nSilence is golden\n";

    #[test]
    fn a_test_to_fstests_conventions_passes() {
        assert_eq!(lint("123", GOOD, Some(OUT)), vec![]);
    }

    /// Each rule the review of bob's first tests found broken is caught.
    #[test]
    fn each_rule_is_caught() {
        let broken = [
            ("# Copyright (c) 2026 Someone.  All Rights Reserved.\n", "", "Copyright"),
            ("_require_no_logdev\n", "", "_require_no_logdev"),
            ("replay thin", "thin", "`replay` group"),
            (
                "_log_writes_replay_log m $DMTHIN_VOL_DEV",
                "_log_writes_replay_log m $SCRATCH_DEV",
                "thin volume",
            ),
            ("_scratch_sync", "sync", "bare `sync`"),
            ("_fixed_by_kernel_commit xxxxxxxxxxxx \"fs: fix\"\n", "", "_fixed_by_kernel_commit"),
            ("auto quick", "auto quick recovery", "`recovery` is not"),
            ("_require_scratch_nocheck", "_require_scratch", "_require_scratch_nocheck"),
            ("\t_dmthin_cleanup\n", "", "_dmthin_cleanup"),
        ];
        for (from, to, want) in broken {
            let text = GOOD.replacen(from, to, 1);
            assert_ne!(text, GOOD, "{from}");
            let lints = lint("123", &text, Some(OUT));
            assert!(lints.iter().any(|l| l.message.contains(want)), "{want}: {lints:?}");
        }
        assert!(lint("124", GOOD, Some(OUT)).iter().any(|l| l.message.contains("No. 124")));
        assert!(lint("123", GOOD, None).iter().any(|l| l.message.contains("123.out")));
    }
}

/// The tests of bob's findings (docs/findings/*/xfstests/) pass the lint: what goes to
/// fstests' maintainers follows their rules without hand edits.
#[cfg(test)]
mod findings {
    #[test]
    fn the_findings_tests_pass_the_lint() {
        let findings = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/findings");
        let mut seen = 0;
        for finding in std::fs::read_dir(&findings).unwrap() {
            let dir = finding.unwrap().path().join("xfstests");
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries {
                let path = e.unwrap().path();
                if path.extension().is_some() {
                    continue;
                }
                seen += 1;
                let lints = super::lint_file(&path).unwrap();
                assert!(lints.is_empty(), "{}: {lints:#?}", path.display());
            }
        }
        assert!(seen >= 2, "the findings' tests were not found under {}", findings.display());
    }
}
