//! The thesis' reliability experiment (table 5.6), run in process on [`MemDevice`].
//!
//! For each of the twenty scenarios and each design: build the scenario's starting tree
//! and unmount cleanly; remount over a [`RecordingDevice`] and run the operation(s) under
//! test, logging every block write with its role; then build the crash image that keeps
//! every write except exactly the listed ones (the role's writes to the named object's
//! blocks, e.g. "C-inode" = inode-table writes to the block holding the child's inode),
//! remount it (running the design's recovery and, for NoFS, its scan) and classify every
//! access with [`crate::check::classify`] against the states before and after each
//! operation. The thesis dropped sectors with a pseudo-device driver; bob will build the
//! same states from traces through its own permuter.
//!
//! Unwritten blocks read as zeros (a fresh, trimmed disk): a dropped data block reads as
//! zeros where the file's data should be, a dropped indirect block as holes.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::check::{classify, Model};
use crate::design::{Design, Options};
use crate::device::{MemDevice, RecordingDevice, Request, Role};
use crate::fs::{mkfs, Action, Fs};
use crate::layout::{BLOCK, NDIRECT, ROOT};
use crate::{ErrorKind, Result};

const IMAGE: u64 = 8 << 20;

/// An object whose writes a scenario drops (the thesis' key: C child, P parent, O old,
/// N new; inode, dir block, data block, indirect block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// The child's inode.
    #[serde(rename = "C-inode")]
    CInode,
    /// The child directory's blocks.
    #[serde(rename = "C-dir")]
    CDir,
    /// The parent directory's blocks.
    #[serde(rename = "P-dir")]
    PDir,
    /// The old parent directory's blocks.
    #[serde(rename = "O-dir")]
    ODir,
    /// The new parent directory's blocks.
    #[serde(rename = "N-dir")]
    NDir,
    /// The child file's data blocks.
    #[serde(rename = "C-data")]
    CData,
    /// The child file's indirect blocks.
    #[serde(rename = "C-ind")]
    CInd,
    /// The old file's inode.
    #[serde(rename = "O-inode")]
    OInode,
}

impl Target {
    /// The thesis' name for it.
    pub fn name(self) -> &'static str {
        match self {
            Target::CInode => "C-inode",
            Target::CDir => "C-dir",
            Target::PDir => "P-dir",
            Target::ODir => "O-dir",
            Target::NDir => "N-dir",
            Target::CData => "C-data",
            Target::CInd => "C-ind",
            Target::OInode => "O-inode",
        }
    }
    fn role(self) -> Role {
        match self {
            Target::CInode | Target::OInode => Role::Inode,
            Target::CDir | Target::PDir | Target::ODir | Target::NDir => Role::Directory,
            Target::CData => Role::Data,
            Target::CInd => Role::Indirect,
        }
    }
}

/// One row of the thesis' table: an operation and the writes dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// The system call(s): mkdir, link, unlink, rename, write, delete-create,
    /// truncate-write, unlink-link.
    pub op: String,
    /// The writes dropped.
    pub dropped: Vec<Target>,
    /// The error the thesis lists for the row (for comparison).
    pub thesis_error: String,
}

/// The twenty scenarios of table 5.6, in its order.
pub fn scenarios() -> Vec<Scenario> {
    use Target::*;
    let rows: [(&str, &[Target], &str); 20] = [
        ("mkdir", &[CInode], "P-BD, C-OB"),
        ("mkdir", &[CDir], "C-BD"),
        ("mkdir", &[PDir], "C-OI, C-OB"),
        ("mkdir", &[CInode, CDir], "P-BD, C-BD"),
        ("mkdir", &[CInode, PDir], "C-OB"),
        ("mkdir", &[CDir, PDir], "C-OI"),
        ("link", &[CInode], "C-HL"),
        ("link", &[PDir], "C-OI"),
        ("unlink", &[CInode], "C-HL"),
        ("unlink", &[ODir], "P-BD"),
        ("rename", &[NDir], "O-BD"),
        ("rename", &[ODir], "C-OI"),
        ("write", &[CData], "C-GD"),
        ("write", &[CInd], "C-GD"),
        ("write", &[CInode, CData], "C-OB"),
        ("write", &[CInode, CInd], "C-OB"),
        ("write", &[CData, CInd], "C-GD"),
        ("delete-create", &[ODir], "O-BD"),
        ("truncate-write", &[OInode], "O-TP"),
        ("unlink-link", &[ODir], "O-BD"),
    ];
    rows.iter()
        .map(|(op, d, e)| Scenario {
            op: op.to_string(),
            dropped: d.to_vec(),
            thesis_error: e.to_string(),
        })
        .collect()
}

/// How one design fared in one scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cell {
    /// Writes actually dropped (0 would mean the scenario tested nothing).
    pub dropped_writes: usize,
    /// Kinds of silently wrong results.
    pub silent: Vec<ErrorKind>,
    /// Accesses that returned an error.
    pub errors_returned: usize,
    /// What the file system itself reported ("BD error-returned", "OI reclaimed", ...).
    pub fs_actions: Vec<String>,
    /// The kinds among `fs_actions`.
    pub fs_kinds: Vec<ErrorKind>,
    /// No silent inconsistency remained.
    pub detected: bool,
    /// The silent results, one line each.
    pub findings: Vec<String>,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Row {
    /// The system call(s).
    pub scenario: String,
    /// The writes dropped, as in the thesis ("C-inode, P-dir").
    pub dropped: String,
    /// The thesis' error for the row.
    pub thesis_error: String,
    /// The kinds of inconsistency produced: what orderless got silently wrong plus what
    /// NoFS caught.
    pub error: Vec<ErrorKind>,
    /// The ext2-like negative control.
    pub orderless: Cell,
    /// NoFS.
    pub nofs: Cell,
}

/// Operations a fixture runs on the live file system.
type Step = Box<dyn Fn(&Fs) -> Result<()>>;

struct Fixture {
    setup: Step,
    ops: Step,
    states: Vec<Model>,
    c: &'static str,
    p: &'static str,
    o: &'static str,
    n: &'static str,
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| b'a' + ((i as u8).wrapping_mul(7).wrapping_add(seed)) % 26).collect()
}

fn write_file(fs: &Fs, path: &str, data: &[u8]) -> Result<()> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let d = fs.resolve(dir)?;
    let f = fs.create(d, name)?;
    fs.write(f, 0, data)?;
    Ok(())
}

/// Sixteen empty files (and their directory), so the next inode lands in another inode
/// block: dropping one inode's block then loses only that inode's update.
const FILLERS: usize = 16;
fn fill(fs: &Fs) -> Result<()> {
    let d = fs.mkdir(ROOT, "fill")?;
    for i in 0..FILLERS {
        fs.create(d, format!("{i:02}"))?;
    }
    Ok(())
}
fn with_fill(mut m: Model) -> Model {
    m = m.dir("fill");
    for i in 0..FILLERS {
        m = m.file(&format!("fill/{i:02}"), b"");
    }
    m
}

/// The fixture of scenario `op` on `design`.
fn fixture(op: &str, design: Design) -> Fixture {
    match op {
        "mkdir" => mkdir_fixture(),
        "link" => link_fixture(),
        "unlink" => unlink_fixture(),
        "rename" => rename_fixture(),
        "write" => write_fixture(design),
        "delete-create" => delete_create_fixture(),
        "truncate-write" => truncate_write_fixture(design),
        "unlink-link" => unlink_link_fixture(),
        other => unreachable!("no fixture for scenario {other}"),
    }
}

fn mkdir_fixture() -> Fixture {
    Fixture {
        setup: Box::new(|fs| fs.mkdir(ROOT, "p").map(drop)),
        ops: Box::new(|fs| fs.mkdir(fs.resolve("p")?, "c").map(drop)),
        states: vec![Model::new().dir("p"), Model::new().dir("p").dir("p/c")],
        c: "p/c",
        p: "p",
        o: "",
        n: "",
    }
}

/// The second name in the same directory: only the back link's name hash tells the two
/// entries apart.
fn link_fixture() -> Fixture {
    let base = Model::new().dir("a").file("a/f", b"linked file data");
    Fixture {
        setup: Box::new(|fs| {
            fs.mkdir(ROOT, "a")?;
            write_file(fs, "a/f", b"linked file data")
        }),
        ops: Box::new(|fs| fs.link(fs.resolve("a/f")?, fs.resolve("a")?, "g")),
        states: vec![base.clone(), base.file("a/g", b"linked file data")],
        c: "a/f",
        p: "a",
        o: "",
        n: "",
    }
}

fn unlink_fixture() -> Fixture {
    let base = Model::new()
        .dir("a")
        .dir("b")
        .file("a/f", b"unlinked file data")
        .file("b/g", b"unlinked file data");
    Fixture {
        setup: Box::new(|fs| {
            fs.mkdir(ROOT, "a")?;
            fs.mkdir(ROOT, "b")?;
            write_file(fs, "a/f", b"unlinked file data")?;
            fs.link(fs.resolve("a/f")?, fs.resolve("b")?, "g")
        }),
        ops: Box::new(|fs| fs.unlink(fs.resolve("a")?, "f")),
        states: vec![base.clone(), base.without("a/f")],
        c: "a/f",
        p: "",
        o: "a",
        n: "",
    }
}

fn rename_fixture() -> Fixture {
    let base = Model::new().dir("a").dir("b");
    Fixture {
        setup: Box::new(|fs| {
            fs.mkdir(ROOT, "a")?;
            fs.mkdir(ROOT, "b")?;
            write_file(fs, "a/f", b"renamed file data")
        }),
        ops: Box::new(|fs| fs.rename(fs.resolve("a")?, "f", fs.resolve("b")?, "f")),
        states: vec![
            base.clone().file("a/f", b"renamed file data"),
            base.file("b/f", b"renamed file data"),
        ],
        c: "b/f",
        p: "",
        o: "a",
        n: "b",
    }
}

/// Twelve blocks fill the direct pointers: the appended block needs the indirect block,
/// so all of C-inode, C-data and C-ind are written.
fn write_fixture(design: Design) -> Fixture {
    let p = design.payload();
    let old = pattern(NDIRECT * p, 1);
    let mut new = old.clone();
    new.extend_from_slice(&pattern(p, 2));
    let (o2, n2) = (old.clone(), new.clone());
    Fixture {
        setup: Box::new(move |fs| write_file(fs, "f", &o2)),
        ops: Box::new(move |fs| {
            fs.write(fs.resolve("f")?, (NDIRECT * p) as u64, &n2[NDIRECT * p..]).map(drop)
        }),
        states: vec![Model::new().file("f", &old), Model::new().file("f", &new)],
        c: "f",
        p: "",
        o: "",
        n: "",
    }
}

/// Created in the same directory: the new file reuses the deleted one's inode number (and
/// block) under a name whose back link differs only by name hash, and the stale entry
/// differs from the new one only by generation.
fn delete_create_fixture() -> Fixture {
    let base = Model::new().dir("a");
    Fixture {
        setup: Box::new(|fs| {
            fs.mkdir(ROOT, "a")?;
            write_file(fs, "a/o", b"deleted file data")
        }),
        ops: Box::new(|fs| {
            fs.unlink(fs.resolve("a")?, "o")?;
            write_file(fs, "a/c", b"created file data")
        }),
        states: vec![
            base.clone().file("a/o", b"deleted file data"),
            base.clone(),
            base.clone().file("a/c", b""),
            base.file("a/c", b"created file data"),
        ],
        c: "a/c",
        p: "",
        o: "a",
        n: "",
    }
}

fn truncate_write_fixture(design: Design) -> Fixture {
    let p = design.payload();
    let old = vec![b'O'; p];
    let o2 = old.clone();
    let base = with_fill(Model::new().dir("a")).file("a/c", b"");
    Fixture {
        setup: Box::new(move |fs| {
            fs.mkdir(ROOT, "a")?;
            write_file(fs, "a/o", &o2)?;
            fill(fs)?;
            write_file(fs, "a/c", b"")
        }),
        ops: Box::new(|fs| {
            fs.truncate(fs.resolve("a/o")?, 0)?;
            fs.write(fs.resolve("a/c")?, 0, b"new data written to c").map(drop)
        }),
        states: vec![
            base.clone().file("a/o", &old),
            base.clone().file("a/o", b""),
            base.file("a/o", b"").file("a/c", b"new data written to c"),
        ],
        c: "a/c",
        p: "",
        o: "a/o",
        n: "",
    }
}

fn unlink_link_fixture() -> Fixture {
    let base = Model::new().dir("a").dir("b").dir("c").file("b/x", b"kept file data");
    Fixture {
        setup: Box::new(|fs| {
            for d in ["a", "b", "c"] {
                fs.mkdir(ROOT, d)?;
            }
            write_file(fs, "a/o", b"unlinked file data")?;
            write_file(fs, "b/x", b"kept file data")
        }),
        ops: Box::new(|fs| {
            fs.unlink(fs.resolve("a")?, "o")?;
            fs.link(fs.resolve("b/x")?, fs.resolve("c")?, "y")
        }),
        states: vec![
            base.clone().file("a/o", b"unlinked file data"),
            base.clone(),
            base.file("c/y", b"kept file data"),
        ],
        c: "b/x",
        p: "",
        o: "a",
        n: "",
    }
}

/// The blocks each target names in the live file system.
fn target_blocks(fs: &Fs, fx: &Fixture, t: Target) -> BTreeSet<u64> {
    let ino = |p: &str| if p.is_empty() { None } else { fs.resolve(p).ok() };
    let blocks = |p: &str, role: Role| -> BTreeSet<u64> {
        ino(p)
            .and_then(|i| fs.blocks_of(i).ok())
            .map(|v| v.into_iter().filter(|(r, _)| *r == role).map(|(_, b)| b).collect())
            .unwrap_or_default()
    };
    match t {
        Target::CInode => ino(fx.c).map(|i| fs.inode_block(i)).into_iter().collect(),
        Target::OInode => ino(fx.o).map(|i| fs.inode_block(i)).into_iter().collect(),
        Target::CDir => blocks(fx.c, Role::Directory),
        Target::PDir => blocks(fx.p, Role::Directory),
        Target::ODir => blocks(fx.o, Role::Directory),
        Target::NDir => blocks(fx.n, Role::Directory),
        Target::CData => blocks(fx.c, Role::Data),
        Target::CInd => blocks(fx.c, Role::Indirect),
    }
}

/// Runs one scenario on one design and classifies the crash state.
pub fn run_cell(s: &Scenario, design: Design) -> Result<Cell> {
    let fx = fixture(&s.op, design);
    let disk = Arc::new(MemDevice::new(IMAGE));
    mkfs(design, disk.as_ref(), IMAGE)?;
    let fs = Fs::open(design, disk.clone(), Options::default())?;
    fs.wait_scan();
    (fx.setup)(&fs)?;
    fs.shutdown()?;
    let base = disk.snapshot();

    let rec = Arc::new(RecordingDevice::new(Arc::new(MemDevice::from_bytes(base.clone()))));
    let fs = Fs::open(design, rec.clone(), Options::default())?;
    fs.wait_scan();
    let mut targets: Vec<(Role, BTreeSet<u64>)> =
        s.dropped.iter().map(|&t| (t.role(), target_blocks(&fs, &fx, t))).collect();
    let mark = rec.position();
    (fx.ops)(&fs)?;
    // Objects made by the operation exist only now; objects it removed existed only before.
    for (t, (_, set)) in s.dropped.iter().zip(targets.iter_mut()) {
        set.extend(target_blocks(&fs, &fx, *t));
    }
    fs.crash();

    let mut image = base;
    let mut dropped = 0;
    for (i, req) in rec.log().into_iter().enumerate() {
        let Request::Write { offset, info, data } = req else { continue };
        let block = offset / BLOCK as u64;
        if i >= mark && targets.iter().any(|(role, set)| *role == info.role && set.contains(&block))
        {
            dropped += 1;
            continue;
        }
        image[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
    }

    let fs = Fs::open(design, Arc::new(MemDevice::from_bytes(image)), Options::default())?;
    fs.wait_scan();
    let report = classify(fs.as_ref(), &fx.states);
    let detections = fs.detections();
    let mut fs_kinds: Vec<ErrorKind> = detections.iter().filter_map(|d| d.kind).collect();
    fs_kinds.sort();
    fs_kinds.dedup();
    let mut actions: Vec<String> = detections
        .into_iter()
        .filter_map(|d| {
            let action = match d.action {
                Action::ErrorReturned => "error-returned",
                Action::Repaired => "repaired",
                Action::Reclaimed => "reclaimed",
            };
            d.kind.map(|k| format!("{k} {action}"))
        })
        .collect();
    actions.sort();
    actions.dedup();
    fs.crash();
    let silent = report.silent_kinds();
    Ok(Cell {
        dropped_writes: dropped,
        detected: silent.is_empty(),
        findings: report
            .silent()
            .into_iter()
            .map(|a| match &a.outcome {
                crate::check::Outcome::Silent { kind, detail } => {
                    format!("{kind} {} {}: {detail}", a.op, a.path)
                }
                _ => String::new(),
            })
            .collect(),
        silent,
        errors_returned: report.errors(),
        fs_actions: actions,
        fs_kinds,
    })
}

/// Runs all twenty scenarios on orderless and NoFS.
pub fn run_table() -> Result<Vec<Row>> {
    scenarios()
        .into_iter()
        .map(|s| {
            let orderless = run_cell(&s, Design::Orderless)?;
            let nofs = run_cell(&s, Design::Nofs)?;
            let mut error: Vec<ErrorKind> = orderless.silent.clone();
            error.extend(nofs.silent.iter().copied());
            error.extend(nofs.fs_kinds.iter().copied());
            error.sort();
            error.dedup();
            Ok(Row {
                scenario: s.op.clone(),
                dropped: s.dropped.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
                thesis_error: s.thesis_error.clone(),
                error,
                orderless,
                nofs,
            })
        })
        .collect()
}

fn cell_text(c: &Cell) -> String {
    let kinds = |v: &[ErrorKind]| v.iter().map(|k| k.code()).collect::<Vec<_>>().join(", ");
    if !c.detected {
        return format!("no: silent {}", kinds(&c.silent));
    }
    let mut what = Vec::new();
    if c.errors_returned > 0 {
        what.push(format!("EIO x{}", c.errors_returned));
    }
    what.extend(c.fs_actions.iter().filter(|a| !a.ends_with("error-returned")).cloned());
    if what.is_empty() {
        "yes (nothing wrong)".to_string()
    } else {
        format!("yes: {}", what.join("; "))
    }
}

/// The table as Markdown.
pub fn render_markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| System call | Blocks dropped | Thesis' error | Error found | Orderless detected? | NoFS detected? |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in rows {
        let err = r.error.iter().map(|k| k.code()).collect::<Vec<_>>().join(", ");
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.dropped,
            r.thesis_error,
            if err.is_empty() { "none".into() } else { err },
            cell_text(&r.orderless),
            cell_text(&r.nofs)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_the_twenty_rows_of_table_5_6() {
        let s = scenarios();
        assert_eq!(s.len(), 20);
        assert_eq!(s.iter().filter(|x| x.op == "mkdir").count(), 6);
        assert_eq!(s.iter().filter(|x| x.op == "write").count(), 5);
    }

    #[test]
    fn nofs_shows_no_silent_inconsistency_and_orderless_shows_some() {
        let rows = run_table().unwrap();
        let mut orderless_silent = 0;
        for r in &rows {
            assert!(
                r.orderless.dropped_writes > 0,
                "{} {}: nothing dropped",
                r.scenario,
                r.dropped
            );
            assert!(r.nofs.dropped_writes > 0, "{} {}: nothing dropped", r.scenario, r.dropped);
            assert!(
                r.nofs.silent.is_empty(),
                "NoFS silent in {} [{}]: {:?}",
                r.scenario,
                r.dropped,
                r.nofs.findings
            );
            if !r.orderless.silent.is_empty() {
                orderless_silent += 1;
            }
        }
        // The negative control: the checker does see silent inconsistencies.
        assert!(orderless_silent >= 10, "{}", render_markdown(&rows));
        // Each of the thesis' silent kinds shows up somewhere on orderless.
        let seen: BTreeSet<ErrorKind> =
            rows.iter().flat_map(|r| r.orderless.silent.iter().copied()).collect();
        for k in [
            ErrorKind::Bd,
            ErrorKind::Ob,
            ErrorKind::Oi,
            ErrorKind::Hl,
            ErrorKind::Gd,
            ErrorKind::Tp,
        ] {
            assert!(seen.contains(&k), "orderless never showed {k}:\n{}", render_markdown(&rows));
        }
        let json = serde_json::to_string(&rows).unwrap();
        let back: Vec<Row> = serde_json::from_str(&json).unwrap();
        assert_eq!(back.len(), rows.len());
    }
}
