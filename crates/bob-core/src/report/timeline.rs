//! A witness's trace as a picture: the epochs between barriers, each write a box sized by
//! its sectors and coloured by what bob knows it holds, flushes and FUA writes as walls,
//! the workload's ops marked above, and the crash state drawn on it (which writes
//! persisted, which tore and in which units, which never reached the disk). The layout
//! ([`Timeline`]) is computed apart from its drawing ([`Timeline::svg`]) so that tests can
//! check what is drawn without parsing SVG.

use maud::{html, Markup};
use workloads::stamp::{Stamp, DRAIN_OP, SETUP_OP};

use crate::check::Subject;
use crate::crash::disk::FuaModel;
use crate::crash::StateId;
use crate::fs::regions::Regions;
use crate::trace::{Entry, EntryKind};

/// Epochs further than this from the crash epoch collapse into one box, when the trace
/// has more than [`COLLAPSE_ABOVE`] write boxes: a long trace stays readable around the
/// crash.
const KEEP_EPOCHS_AROUND_CRASH: usize = 3;
/// In a long trace, a big epoch other than the crash epoch shows this many writes at
/// each end and collapses its middle.
const KEEP_WRITES_AT_EPOCH_ENDS: usize = 8;
/// Write boxes above which far epochs collapse.
const COLLAPSE_ABOVE: usize = 150;

/// What a write holds, as far as bob knows: the role a research design recorded, the
/// workload's stamp in its first sector, a superblock or journal region of the image, the
/// kernel's REQ_META flag, or nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WriteRole {
    /// The CSS class (`role-data`, `role-meta`, ...): one colour per kind of role.
    pub class: &'static str,
    /// In words (`data of /A/log (op 0)`, `metadata`, `journal-superblock`).
    pub label: String,
}

/// What became of one write in the crash state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Persisted whole (every write of an earlier epoch, and the crash epoch's applied).
    Applied,
    /// Persisted in part: the write's atomic units in order, each `(first sector, last
    /// sector, persisted)` within the request.
    Torn(Vec<(u32, u32, bool)>),
    /// A write of the crash epoch that did not persist.
    Missing,
    /// A write of a later epoch: the crash came before it was issued.
    Later,
}

impl Fate {
    /// Its name (the `data-fate` attribute and the legend).
    pub fn name(&self) -> &'static str {
        match self {
            Fate::Applied => "applied",
            Fate::Torn(_) => "torn",
            Fate::Missing => "missing",
            Fate::Later => "later",
        }
    }
}

/// One write (or discard) of the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WriteBox {
    /// Entry index in the trace.
    pub entry: usize,
    /// Its epoch.
    pub epoch: usize,
    /// First sector.
    pub sector: u64,
    /// Sectors.
    pub sectors: u64,
    /// A discard rather than a write.
    pub discard: bool,
    /// Carries FUA.
    pub fua: bool,
    /// What it holds.
    pub role: WriteRole,
    /// What became of it.
    pub fate: Fate,
}

/// What a wall between boxes is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wall {
    /// An empty cache flush (a barrier).
    Flush,
    /// A flush that only emulated a FUA on the recording device: no barrier under the
    /// `real` FUA model.
    FuaEmulation,
    /// The flush before a REQ_PREFLUSH write.
    Preflush,
    /// The completion of a FUA write: a barrier under the `barrier` model, under `real`
    /// only that write's own durability.
    Fua {
        /// Whether it closes the epoch (the `barrier` FUA model).
        barrier: bool,
    },
}

/// One item of the timeline, left to right.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Item {
    /// A write box.
    Write(WriteBox),
    /// A wall, at trace entry `entry`.
    Wall {
        /// Entry index.
        entry: usize,
        /// Which.
        wall: Wall,
    },
    /// Epochs far from the crash (or the middle of a big epoch), drawn as one box.
    Collapsed {
        /// First and last epoch collapsed.
        epochs: (usize, usize),
        /// Writes in them.
        writes: usize,
    },
    /// Where the crash fell: after the crash epoch's last entry.
    Crash,
}

/// A workload op's place in the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpMark {
    /// Index in the workload.
    pub index: usize,
    /// The op in words.
    pub text: String,
    /// Entry of its begin mark.
    pub begin: usize,
    /// Entry of its end mark.
    pub end: usize,
}

/// The whole picture's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Timeline {
    /// Items, in trace order.
    pub items: Vec<Item>,
    /// The workload's ops.
    pub ops: Vec<OpMark>,
    /// The crash epoch.
    pub crash_epoch: usize,
    /// Epochs of the trace.
    pub epochs: usize,
}

/// The role of `entry` (see [`WriteRole`]); `names` maps model file ids to paths.
fn role_of(entry: &Entry, regions: &Regions, names: &dyn Fn(u32) -> String) -> WriteRole {
    let role = |class, label: String| WriteRole { class, label };
    if let Some(r) = crate::fs::roles::entry_role(entry) {
        let class = match r {
            researchfs::Role::Data => "role-data",
            researchfs::Role::Superblock => "role-super",
            researchfs::Role::Journal => "role-journal",
            researchfs::Role::Inode => "role-inode",
            researchfs::Role::Directory => "role-dir",
            _ => "role-meta",
        };
        return role(class, r.to_string());
    }
    if entry.kind() == EntryKind::Discard {
        return role("role-discard", "discard".into());
    }
    if let Some(s) = entry.data.get(..512).and_then(Stamp::decode) {
        let by = match s.op {
            SETUP_OP => "setup".to_owned(),
            DRAIN_OP => "drain".to_owned(),
            op => format!("op {op}"),
        };
        return role("role-data", format!("data of {} ({by})", names(s.file)));
    }
    let start = entry.sector * 512;
    let end = start + entry.nr_sectors * 512;
    if let Some(r) = regions.regions.iter().find(|r| r.start < end && start < r.end) {
        let class = match r.role {
            crate::fs::regions::RegionRole::JournalSuperblock
            | crate::fs::regions::RegionRole::LogStart => "role-journal",
            _ => "role-super",
        };
        return role(class, r.role.name().into());
    }
    if entry.is_metadata() {
        role("role-meta", "metadata (REQ_META)".into())
    } else {
        role("role-unknown", "not known (no stamp, no REQ_META)".into())
    }
}

/// Which writes a long trace shows: all of them in a short trace; in a long one, the
/// epochs near the crash, and of a big epoch other than the crash epoch its ends (the
/// middle writes all share one fate).
struct Shown<'a> {
    epochs: &'a [crate::crash::Epoch],
    crash: usize,
    collapse: bool,
}

impl Shown<'_> {
    fn new(epochs: &[crate::crash::Epoch], crash: usize) -> Shown<'_> {
        let total_writes: usize = epochs.iter().map(|e| e.writes.len()).sum();
        Shown { epochs, crash, collapse: total_writes > COLLAPSE_ABOVE }
    }

    /// Whether the write at `position` of `epoch` gets a box of its own.
    fn shows(&self, epoch: usize, position: u32) -> bool {
        if !self.collapse {
            return true;
        }
        if epoch.abs_diff(self.crash) > KEEP_EPOCHS_AROUND_CRASH {
            return false;
        }
        let n = self.epochs.get(epoch).map_or(0, |e| e.writes.len()) as u32;
        let keep = KEEP_WRITES_AT_EPOCH_ENDS as u32;
        epoch == self.crash || n <= 3 * keep || position < keep || position >= n - keep
    }
}

/// A write's (epoch, position in the epoch's writes).
type Place = (usize, u32);

/// Each entry's place if it is a write of an epoch, and the place of every entry: its
/// own, or for one that is no write the next write's.
fn places(entries: usize, epochs: &[crate::crash::Epoch]) -> (Vec<Option<Place>>, Vec<Place>) {
    let mut place = vec![None; entries];
    for e in epochs {
        for (p, &w) in e.writes.iter().enumerate() {
            if let Some(slot) = place.get_mut(w) {
                *slot = Some((e.index, p as u32));
            }
        }
    }
    let last = (epochs.len().saturating_sub(1), 0);
    let mut context = vec![last; entries];
    let mut next = last;
    for i in (0..entries).rev() {
        if let Some(p) = place[i] {
            next = p;
        }
        context[i] = next;
    }
    let context = (0..entries).map(|i| place[i].unwrap_or(context[i])).collect();
    (place, context)
}

/// Adds a hidden entry of `epoch` to the collapsed box it joins (or a new one).
fn collapse_into(items: &mut Vec<Item>, epoch: usize, writes: usize) {
    match items.last_mut() {
        Some(Item::Collapsed { epochs: (_, last), writes: n }) => {
            *last = (*last).max(epoch);
            *n += writes;
        }
        _ => items.push(Item::Collapsed { epochs: (epoch, epoch), writes }),
    }
}

/// What the crash state `id` did to the write at `position` of epoch `epoch`.
fn fate_of(
    entry: &Entry,
    epoch: &crate::crash::Epoch,
    position: u32,
    crash: usize,
    id: &StateId,
) -> Fate {
    match epoch.index.cmp(&crash) {
        std::cmp::Ordering::Less => Fate::Applied,
        std::cmp::Ordering::Greater => Fate::Later,
        std::cmp::Ordering::Equal => match id.applied.iter().find(|a| a.write == position) {
            None => Fate::Missing,
            Some(a) if a.sectors.is_none() => Fate::Applied,
            Some(a) => Fate::Torn(units(entry, epoch.unit_sectors.max(1), |k| a.has_sector(k))),
        },
    }
}

impl Timeline {
    /// The timeline of `subject`'s trace with crash state `id` drawn on it; `regions` are
    /// the image's superblocks and journal (may be empty), `names` names model files.
    pub fn of(
        subject: &Subject,
        id: &StateId,
        regions: &Regions,
        names: &dyn Fn(u32) -> String,
    ) -> Timeline {
        let trace = &subject.trace;
        let epochs = &subject.epochs;
        let crash = id.epoch as usize;
        let (place, context) = places(trace.entries.len(), epochs);
        let shown = Shown::new(epochs, crash);
        let crash_end = epochs.get(crash).map(|e| e.end_entry(trace)).unwrap_or(0);
        let mut items = Vec::new();
        for (i, entry) in trace.entries.iter().enumerate() {
            if i == crash_end {
                items.push(Item::Crash);
            }
            let (epoch, position) = context[i];
            if !shown.shows(epoch, position) {
                collapse_into(&mut items, epoch, usize::from(place[i].is_some()));
                continue;
            }
            let drawn = place[i].map(|(e, position)| {
                let fate = fate_of(entry, &epochs[e], position, crash, id);
                (e, fate, role_of(entry, regions, names))
            });
            push_entry(&mut items, i, entry, drawn, subject.disk.fua == FuaModel::Real);
        }
        if !items.contains(&Item::Crash) {
            items.push(Item::Crash);
        }
        let ops = subject
            .spans
            .iter()
            .map(|s| OpMark {
                index: s.index,
                text: s.text.clone(),
                begin: s.begin_entry,
                end: s.end_entry,
            })
            .collect();
        Timeline { items, ops, crash_epoch: crash, epochs: epochs.len() }
    }

    /// The write boxes drawn.
    pub fn writes(&self) -> impl Iterator<Item = &WriteBox> {
        self.items.iter().filter_map(|i| match i {
            Item::Write(w) => Some(w),
            _ => None,
        })
    }
}

/// The items of entry `i`: a flush's wall, or a write's box (with its epoch, fate and
/// role, `drawn`) between its preflush and FUA walls; a mark, or a write of no epoch,
/// draws nothing.
fn push_entry(
    items: &mut Vec<Item>,
    i: usize,
    entry: &Entry,
    drawn: Option<(usize, Fate, WriteRole)>,
    real_fua: bool,
) {
    let kind = entry.kind();
    let (preflush, fua) = match kind {
        EntryKind::Flush => {
            let wall =
                if real_fua && entry.is_fua_postflush() { Wall::FuaEmulation } else { Wall::Flush };
            items.push(Item::Wall { entry: i, wall });
            return;
        }
        EntryKind::Mark => return,
        EntryKind::Write { preflush, fua } => (preflush, fua),
        _ => (false, false),
    };
    let Some((epoch, fate, role)) = drawn else { return };
    if preflush {
        items.push(Item::Wall { entry: i, wall: Wall::Preflush });
    }
    items.push(Item::Write(WriteBox {
        entry: i,
        epoch,
        sector: entry.sector,
        sectors: entry.nr_sectors,
        discard: kind == EntryKind::Discard,
        fua,
        role,
        fate,
    }));
    if fua {
        items.push(Item::Wall { entry: i, wall: Wall::Fua { barrier: !real_fua } });
    }
}

/// The atomic units of `entry` (split at absolute multiples of `unit` sectors), each with
/// whether `persisted` says its first sector persisted (a unit persists whole or not).
fn units(entry: &Entry, unit: u64, persisted: impl Fn(u32) -> bool) -> Vec<(u32, u32, bool)> {
    let mut out = Vec::new();
    let mut k = 0u64;
    while k < entry.nr_sectors {
        let abs = entry.sector + k;
        let len = (unit - abs % unit).min(entry.nr_sectors - k);
        out.push((k as u32, (k + len - 1) as u32, persisted(k as u32)));
        k += len;
    }
    out
}

/// Width of a write box: grows with the log of its sectors, so that a 1 MiB write is
/// visibly bigger than a 4 KiB one without hiding the small ones.
fn box_width(sectors: u64) -> f64 {
    14.0 + 6.0 * (sectors.max(1) as f64).log2()
}

/// The boxes' top with no more than three rows of op labels above them.
const TOP: f64 = 58.0;
const BOX_H: f64 = 60.0;
const GAP: f64 = 3.0;
const WALL_W: f64 = 7.0;
/// The first row of op labels, and the distance between rows.
const LABEL_Y: f64 = 12.0;
const LABEL_ROW: f64 = 13.0;
/// An op label's font size, and a width per character no glyph of its text exceeds at
/// that size ("op", a space, digits), so that labels placed apart are drawn apart.
const LABEL_FONT: f64 = 10.0;
const LABEL_CHAR_W: f64 = 6.5;
/// Room kept between two labels of one row.
const LABEL_PAD: f64 = 4.0;

/// Where an op's label and span are drawn.
#[derive(Clone, Debug, PartialEq)]
struct OpLabel {
    /// Where its span starts and ends (its begin and end marks' items).
    x0: f64,
    x1: f64,
    /// Its row's y.
    y: f64,
}

/// Where everything goes: computed in steps (items left to right, op labels in rows,
/// epoch bands), then drawn.
struct Layout {
    /// x of each item.
    xs: Vec<f64>,
    width: f64,
    height: f64,
    /// The boxes' top: below the op labels' rows.
    top: f64,
    labels: Vec<OpLabel>,
    /// (epoch, first x, last x) of each run of an epoch's boxes.
    bands: Vec<(usize, f64, f64)>,
}

/// The label text of op `index`.
fn op_label(index: usize) -> String {
    format!("op {index}")
}

/// Each op's label in the first row where it clears the labels and spans already there
/// (ops often begin at the same item: several ops before one write), so that no two
/// labels overlap however many ops share an x.
fn label_rows(spans: &[(usize, f64, f64)]) -> Vec<(f64, f64, usize)> {
    let mut row_ends: Vec<f64> = Vec::new();
    let mut out = Vec::with_capacity(spans.len());
    for &(index, x0, x1) in spans {
        let text_end = x0 + 2.0 + LABEL_CHAR_W * op_label(index).len() as f64;
        let end = text_end.max(x1.max(x0 + 4.0)) + LABEL_PAD;
        let row = match row_ends.iter().position(|&e| e <= x0) {
            Some(r) => r,
            None => {
                row_ends.push(f64::MIN);
                row_ends.len() - 1
            }
        };
        row_ends[row] = end;
        out.push((x0, x1, row));
    }
    out
}

impl Timeline {
    /// x of each item, the x of each trace entry drawn (for the op marks), and the width.
    fn item_xs(&self) -> (Vec<f64>, Vec<(usize, f64)>, f64) {
        let mut xs = Vec::with_capacity(self.items.len());
        let mut x = 10.0;
        let mut entry_x: Vec<(usize, f64)> = Vec::new();
        for item in &self.items {
            xs.push(x);
            let w = match item {
                Item::Write(b) => {
                    entry_x.push((b.entry, x));
                    box_width(b.sectors)
                }
                Item::Wall { entry, .. } => {
                    entry_x.push((*entry, x));
                    WALL_W
                }
                Item::Collapsed { .. } => 90.0,
                Item::Crash => 14.0,
            };
            x += w + GAP;
        }
        (xs, entry_x, x + 10.0)
    }

    /// Epoch bands under the boxes.
    fn bands(&self, xs: &[f64]) -> Vec<(usize, f64, f64)> {
        let mut bands: Vec<(usize, f64, f64)> = Vec::new();
        for (item, &x) in self.items.iter().zip(xs) {
            if let Item::Write(b) = item {
                let end = x + box_width(b.sectors);
                match bands.last_mut() {
                    Some((e, _, last)) if *e == b.epoch => *last = end,
                    _ => bands.push((b.epoch, x, end)),
                }
            }
        }
        bands
    }

    fn layout(&self) -> Layout {
        let (xs, entry_x, width) = self.item_xs();
        // An entry's x: the nearest drawn item at or after it (marks have no item).
        let at = |entry: usize| {
            entry_x.iter().find(|(e, _)| *e >= entry).map(|p| p.1).unwrap_or(width - 20.0)
        };
        let spans: Vec<(usize, f64, f64)> =
            self.ops.iter().map(|op| (op.index, at(op.begin), at(op.end))).collect();
        let rows = label_rows(&spans);
        let deepest = rows.iter().map(|r| r.2).max().unwrap_or(0).max(2);
        let top = TOP + (deepest - 2) as f64 * LABEL_ROW;
        let labels = rows
            .into_iter()
            .map(|(x0, x1, row)| OpLabel { x0, x1, y: LABEL_Y + row as f64 * LABEL_ROW })
            .collect();
        let bands = self.bands(&xs);
        Layout { xs, width, height: top + BOX_H + 44.0, top, labels, bands }
    }

    /// The picture as inline SVG (maud escapes every label).
    pub fn svg(&self) -> Markup {
        let l = self.layout();
        html! {
            svg xmlns="http://www.w3.org/2000/svg" class="timeline" width=(l.width) height=(l.height)
                viewBox={ "0 0 " (l.width) " " (l.height) } role="img"
                aria-label="the trace's writes by epoch, with the crash state" {
                defs {
                    pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse"
                        patternTransform="rotate(45)" {
                        line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2" {}
                    }
                }
                @for (op, label) in self.ops.iter().zip(&l.labels) {
                    (draw_op(op, label, l.top))
                }
                @for (epoch, x0, x1) in &l.bands {
                    @let bottom = l.top + BOX_H;
                    text.epoch x=((x0 + x1) / 2.0) y=(bottom + 16.0) font-size="11"
                        text-anchor="middle" { "e" (epoch) }
                    line x1=(x0) y1=(bottom + 5.0) x2=(x1) y2=(bottom + 5.0)
                        stroke=(if *epoch == self.crash_epoch { "#c00" } else { "#888" }) stroke-width="2" {}
                }
                @for (item, &x) in self.items.iter().zip(&l.xs) {
                    (self.draw_item(item, x, l.top))
                }
            }
        }
    }

    /// One item at `x`, its boxes' top at `top`.
    fn draw_item(&self, item: &Item, x: f64, top: f64) -> Markup {
        match item {
            Item::Write(b) => draw_write(b, x, top),
            Item::Wall { entry, wall } => {
                let (class, words) = wall_words(*wall);
                html! {
                    g {
                        title { "entry " (entry) ": " (words) }
                        rect class={ "wall " (class) } data-entry=(entry)
                            x=(x + 1.5) y=(top - 8.0) width=(WALL_W - 3.0) height=(BOX_H + 16.0) {}
                    }
                }
            }
            Item::Collapsed { epochs: (a, b), writes } => html! {
                g.collapsed {
                    title { "epochs " (a) "-" (b) ": " (writes) " writes, all " (if *a > self.crash_epoch { "issued after the crash" } else { "persisted" }) }
                    rect x=(x) y=(top) width="90" height=(BOX_H) fill="#eee" stroke="#999" stroke-dasharray="4,3" {}
                    text x=(x + 45.0) y=(top + 17.0) font-size="10" text-anchor="middle" {
                        "e" (a) @if b > a { "–e" (b) }
                    }
                    text x=(x + 45.0) y=(top + 31.0) font-size="10" text-anchor="middle" { (writes) " writes" }
                }
            },
            Item::Crash => html! {
                g.crash {
                    title { "the crash: in epoch " (self.crash_epoch) }
                    line x1=(x + 7.0) y1=(top - 14.0) x2=(x + 7.0) y2=(top + BOX_H + 10.0)
                        stroke="#c00" stroke-width="3" {}
                    text x=(x + 7.0) y=(top + BOX_H + 30.0) font-size="11" fill="#c00"
                        text-anchor="middle" { "crash" }
                }
            },
        }
    }
}

/// An op's span, its dashed drop to the boxes at `top`, and its label.
fn draw_op(op: &OpMark, l: &OpLabel, top: f64) -> Markup {
    html! {
        g.op data-op=(op.index) {
            title { "op " (op.index) ": " (op.text) }
            line x1=(l.x0) y1=(l.y) x2=(l.x1.max(l.x0 + 4.0)) y2=(l.y) stroke="#333" stroke-width="2" {}
            line x1=(l.x0) y1=(l.y) x2=(l.x0) y2=(top - 2.0) stroke="#333" stroke-dasharray="2,2" {}
            text.op-label x=(l.x0 + 2.0) y=(l.y - 2.0) font-size=(LABEL_FONT) { (op_label(op.index)) }
        }
    }
}

/// A write's box at `x` (its top at `top`), with its atomic units when it tore.
fn draw_write(b: &WriteBox, x: f64, top: f64) -> Markup {
    let w = box_width(b.sectors);
    let label = format!(
        "entry {}: {} of {} sectors at sector {}{}; {}; {}",
        b.entry,
        if b.discard { "discard" } else { "write" },
        b.sectors,
        b.sector,
        if b.fua { " (FUA)" } else { "" },
        b.role.label,
        fate_words(&b.fate),
    );
    html! {
        g {
            title { (label) }
            rect class={ "write " (b.role.class) " " (b.fate.name()) }
                data-entry=(b.entry) data-epoch=(b.epoch) data-fate=(b.fate.name())
                x=(x) y=(top) width=(w) height=(BOX_H) {}
            @if let Fate::Torn(units) = &b.fate {
                @for (first, last, kept) in units {
                    @let ux = x + w * f64::from(*first) / b.sectors as f64;
                    @let uw = w * f64::from(last - first + 1) / b.sectors as f64;
                    rect class={ "unit " (if *kept { "kept" } else { "lost" }) }
                        data-unit={ (first) "-" (last) }
                        x=(ux) y=(top + 6.0) width=(uw) height=(BOX_H - 12.0) {}
                }
            }
        }
    }
}

/// What became of a write, in words.
fn fate_words(fate: &Fate) -> String {
    match fate {
        Fate::Applied => "persisted".into(),
        Fate::Missing => "did not persist (crash epoch)".into(),
        Fate::Later => "issued after the crash".into(),
        Fate::Torn(units) => {
            let kept: Vec<String> = units
                .iter()
                .filter(|u| u.2)
                .map(|u| if u.0 == u.1 { u.0.to_string() } else { format!("{}-{}", u.0, u.1) })
                .collect();
            format!("torn: only sectors {} persisted", kept.join(","))
        }
    }
}

/// A wall's CSS class and its meaning.
fn wall_words(wall: Wall) -> (&'static str, &'static str) {
    match wall {
        Wall::Flush => ("flush", "flush (a barrier)"),
        Wall::FuaEmulation => {
            ("fua-emulation", "flush that only emulated FUA on the recording device (no barrier)")
        }
        Wall::Preflush => ("flush", "preflush (a barrier before the write)"),
        Wall::Fua { barrier: true } => ("fua", "FUA completion (a barrier under --fua barrier)"),
        Wall::Fua { barrier: false } => ("fua", "FUA: this write is durable once it completes"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::crash::{self, Applied, DiskModel};
    use crate::image::BaseImage;
    use crate::trace::Trace;

    /// A subject of `entries` (on an empty base image) under the 4 KiB, real FUA model.
    fn subject(entries: Vec<Entry>, base: &std::path::Path) -> Subject {
        std::fs::write(base, vec![0u8; 1 << 16]).unwrap();
        let trace = Arc::new(Trace::new(512, entries));
        let p = workloads::Property::SingleBlockAppend;
        Subject {
            config: crate::fs::by_name("ext4-ordered").unwrap(),
            workload: workloads::workload_for(p, &Default::default()),
            observed: Default::default(),
            epochs: crash::epochs(&trace, &DiskModel::default()),
            trace,
            spans: Vec::new(),
            schedule: None,
            recording: 1,
            disk: DiskModel::default(),
            pm: None,
            base: Arc::new(BaseImage::open(base).unwrap()),
        }
    }

    #[test]
    fn a_long_trace_collapses_the_epochs_far_from_the_crash() {
        let tmp = tempfile::tempdir().unwrap();
        let mut entries = Vec::new();
        for k in 0..200u64 {
            entries.push(Entry::write(k * 8, vec![1u8; 4096]));
            entries.push(Entry::flush());
        }
        let s = subject(entries, &tmp.path().join("base.img"));
        assert_eq!(s.epochs.len(), 201, "the last, empty epoch is kept");
        let id = crash::StateId { epoch: 100, applied: Vec::new(), pm: None };
        let t = Timeline::of(&s, &id, &Regions::default(), &|f| format!("file {f}"));
        let epochs: Vec<usize> = t.writes().map(|w| w.epoch).collect();
        assert_eq!(epochs, (97..=103).collect::<Vec<_>>(), "three epochs either side");
        let collapsed: Vec<((usize, usize), usize)> = t
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Collapsed { epochs, writes } => Some((*epochs, *writes)),
                _ => None,
            })
            .collect();
        assert_eq!(collapsed, vec![((0, 96), 97), ((104, 200), 96)]);
        let fates: Vec<&str> = t.writes().map(|w| w.fate.name()).collect();
        assert_eq!(fates, ["applied", "applied", "applied", "missing", "later", "later", "later"]);
        assert_eq!(t.items.iter().filter(|i| **i == Item::Crash).count(), 1);
    }

    #[test]
    fn a_big_epoch_beside_the_crash_keeps_its_ends_and_collapses_its_middle() {
        let tmp = tempfile::tempdir().unwrap();
        let mut entries = vec![Entry::write(0, vec![1u8; 4096]), Entry::flush()];
        for k in 1..=200u64 {
            entries.push(Entry::write(k * 8, vec![2u8; 4096]));
        }
        let s = subject(entries, &tmp.path().join("base.img"));
        let id = crash::StateId::whole(0, [0]);
        let t = Timeline::of(&s, &id, &Regions::default(), &|f| format!("file {f}"));
        let later: Vec<usize> = t.writes().filter(|w| w.epoch == 1).map(|w| w.entry).collect();
        let ends: Vec<usize> = (2..10).chain(194..202).collect();
        assert_eq!(later, ends, "eight writes at each end of epoch 1");
        assert!(t.items.contains(&Item::Collapsed { epochs: (1, 1), writes: 184 }));
        assert!(t.writes().filter(|w| w.epoch == 1).all(|w| w.fate == Fate::Later));
    }

    #[test]
    fn a_short_trace_draws_every_write_with_its_fate_and_walls() {
        let tmp = tempfile::tempdir().unwrap();
        let mut fua = Entry::write(16, vec![3u8; 4096]);
        fua.flags |= crate::trace::flags::FUA;
        let entries = vec![
            Entry::write(0, vec![1u8; 4096]),
            Entry::flush(),
            Entry::write(8, vec![2u8; 8192]),
            fua,
            Entry::write(40, vec![4u8; 4096]),
        ];
        let s = subject(entries, &tmp.path().join("base.img"));
        // Crash in epoch 1: the 8 KiB write torn (its second 4 KiB unit kept), the FUA
        // write whole, the last write missing.
        let id = crash::StateId {
            epoch: 1,
            applied: vec![Applied { write: 0, sectors: Some(vec![(8, 15)]) }, Applied::whole(1)],
            pm: None,
        };
        let t = Timeline::of(&s, &id, &Regions::default(), &|f| format!("file {f}"));
        let boxes: Vec<(usize, &str)> = t.writes().map(|w| (w.entry, w.fate.name())).collect();
        assert_eq!(boxes, [(0, "applied"), (2, "torn"), (3, "applied"), (4, "missing")]);
        let torn = t.writes().find(|w| w.entry == 2).unwrap();
        assert_eq!(torn.fate, Fate::Torn(vec![(0, 7, false), (8, 15, true)]));
        assert!(t.items.contains(&Item::Wall { entry: 1, wall: Wall::Flush }));
        assert!(t.items.contains(&Item::Wall { entry: 3, wall: Wall::Fua { barrier: false } }));
        let svg = t.svg().into_string();
        assert_eq!(svg.matches("<rect class=\"write ").count(), 4);
        assert_eq!(svg.matches("class=\"unit kept\"").count(), 1);
        assert_eq!(svg.matches("class=\"unit lost\"").count(), 1);
    }

    #[test]
    fn labels_of_ops_at_one_x_take_rows_of_their_own() {
        // Four ops before the same write, then one far to the right.
        let spans = [(0, 10.0, 10.0), (1, 10.0, 10.0), (3, 10.0, 12.0), (4, 10.0, 10.0)];
        let mut spans = spans.to_vec();
        spans.push((5, 400.0, 420.0));
        let rows: Vec<usize> = label_rows(&spans).iter().map(|r| r.2).collect();
        assert_eq!(rows, [0, 1, 2, 3, 0]);
        // Two ops whose labels would touch go to two rows; apart, they share one.
        let close = label_rows(&[(0, 10.0, 10.0), (1, 20.0, 20.0)]);
        assert_eq!((close[0].2, close[1].2), (0, 1));
        let apart = label_rows(&[(0, 10.0, 10.0), (1, 60.0, 60.0)]);
        assert_eq!((apart[0].2, apart[1].2), (0, 0));
    }

    #[test]
    fn units_split_at_aligned_boundaries() {
        let e = Entry::write(6, vec![0u8; 8 * 512]);
        // Units of 4 sectors aligned on absolute sectors: 6-7, 8-11, 12-13.
        let u = units(&e, 4, |k| (2..=5).contains(&k));
        assert_eq!(u, vec![(0, 1, false), (2, 5, true), (6, 7, false)]);
        assert!(fate_words(&Fate::Torn(u)).contains("only sectors 2-5 persisted"));
    }
}
