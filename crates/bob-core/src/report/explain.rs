//! `bob explain`: a witness told in words. Which writes of the crash epoch reached the
//! disk, which ops persisted after recovery, and which byte ranges of which files hold
//! something other than their own data (zeros, garbage, another file's data).

use std::path::Path;

use workloads::{SectorClass, Snapshot};

use super::witness;
use crate::output::{Explanation, OpPersistence};

/// Explains the witness in `dir` (its recorded state).
pub fn explain(dir: &Path) -> Result<Explanation, witness::Error> {
    let loaded = witness::load(dir)?;
    let subject = &loaded.subject;
    let record = &loaded.record;
    let id = subject.state_id(&record.id).map_err(|e| witness::Error::Invalid {
        path: dir.join("state.json"),
        message: e.to_string(),
    })?;
    // A witness without a readable snapshot (a state that did not mount) still explains
    // its writes; only the per-op and per-byte parts need the snapshot.
    let snapshot: Option<Snapshot> = std::fs::read_to_string(dir.join("snapshot.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .flatten();
    let epoch = &subject.epochs[id.epoch as usize];
    let writes = id
        .applied
        .iter()
        .map(|a| {
            let entry_index = epoch.writes[a.write as usize];
            let e = &subject.trace.entries[entry_index];
            let kind = if e.is_metadata() { "metadata write" } else { "write" };
            let torn = match &a.sectors {
                None => String::new(),
                Some(r) => format!(
                    ", torn: only sectors {} persisted",
                    r.iter()
                        .map(|(x, y)| if x == y { format!("{x}") } else { format!("{x}-{y}") })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            format!(
                "entry {entry_index}: {kind} of {} sectors at sector {}{torn}",
                e.nr_sectors, e.sector
            )
        })
        .collect();
    let oracle = workloads::Oracle::new(&subject.workload);
    let persisted = snapshot
        .as_ref()
        .map(|s| oracle.persisted(&subject.observed, s))
        .unwrap_or_else(|| vec![None; subject.workload.ops.len()]);
    let ops = subject
        .workload
        .ops
        .iter()
        .zip(&persisted)
        .enumerate()
        .map(|(index, (op, p))| {
            let (state, why) = match p {
                Some(Ok(())) => ("persisted", String::new()),
                Some(Err(why)) => ("not persisted", why.clone()),
                None => ("no persistent effect of its own", String::new()),
            };
            OpPersistence { index, op: op.to_string(), state: state.into(), why }
        })
        .collect();
    Ok(Explanation {
        schema_version: super::SCHEMA_VERSION,
        witness: dir.display().to_string(),
        config: record.config.clone(),
        property: record.property.clone(),
        state: record.id.clone(),
        schedule: loaded.sidecar.schedule.clone(),
        outcome: record.outcome.clone(),
        story: record.story.clone(),
        where_: record.description.clone(),
        writes_applied_in_crash_epoch: writes,
        earlier_epochs_applied: id.epoch,
        disk_model: record.disk_model,
        earlier_op: record.earlier_op.clone(),
        later_op: record.later_op.clone(),
        ops,
        wrong_bytes: snapshot.as_ref().map(wrong_bytes).unwrap_or_default(),
    })
}

/// What a run of sectors holds, in words.
fn describe_class(c: SectorClass) -> &'static str {
    match c {
        SectorClass::Zero => "zeros",
        SectorClass::Garbage => "garbage",
        SectorClass::Foreign { .. } => "another file's or offset's data",
        SectorClass::Data { .. } => "data",
    }
}

/// Runs of sectors within each file's size that hold no data of their own file: zeros,
/// garbage, foreign data; one line each.
pub fn wrong_bytes(snapshot: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (path, node) in &snapshot.entries {
        let Some(content) = &node.content else { continue };
        let size_sectors = node.size.div_ceil(512);
        let mut sector = 0u64;
        for &(class, n) in content.runs() {
            let wrong = !matches!(class, SectorClass::Data { .. });
            if wrong && sector < size_sectors {
                let end = (sector + n).min(size_sectors);
                out.push(format!(
                    "{path}: bytes {}..{} ({} sectors) are {}",
                    sector * 512,
                    end * 512,
                    end - sector,
                    describe_class(class)
                ));
            }
            sector += n;
        }
    }
    out
}

impl Explanation {
    /// The story as `bob explain` prints it.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{} / {}: {} in crash state {}\n  {}\n",
            self.config,
            self.property.as_deref().unwrap_or("-"),
            self.outcome,
            self.state,
            self.story
        );
        if let (Some(a), Some(b)) = (&self.earlier_op, &self.later_op) {
            s.push_str(&format!(
                "  the property's pair: op {} ({} {}) did not persist, op {} ({} {}) did\n",
                a.index,
                a.kind.name(),
                a.paths.join(" "),
                b.index,
                b.kind.name(),
                b.paths.join(" ")
            ));
        }
        if let Some(schedule) = &self.schedule {
            let summary =
                schedule.parse::<workloads::Schedule>().map(|s| s.summary()).unwrap_or("");
            s.push_str(&format!("\nRecorded under the {schedule} drain schedule ({summary}).\n"));
        }
        s.push_str(&format!("\nThe disk: {}.\n", self.disk_model));
        s.push_str(&format!("The crash: {}\n", self.where_));
        let epoch = self.earlier_epochs_applied;
        s.push_str(&format!(
            "  every write of epochs 0..{epoch} reached the disk; of epoch {epoch}:\n"
        ));
        if self.writes_applied_in_crash_epoch.is_empty() {
            s.push_str("    none\n");
        }
        for w in &self.writes_applied_in_crash_epoch {
            s.push_str(&format!("    {w}\n"));
        }
        s.push_str("\nThe workload's ops after recovery:\n");
        for op in &self.ops {
            let why = if op.why.is_empty() { String::new() } else { format!(" ({})", op.why) };
            s.push_str(&format!("  op {}: {:<32} {}{why}\n", op.index, op.op, op.state));
        }
        if !self.wrong_bytes.is_empty() {
            s.push_str("\nBytes that are not data of their own file:\n");
            for b in &self.wrong_bytes {
                s.push_str(&format!("  {b}\n"));
            }
        }
        s.push_str(&format!(
            "\nSee it: bob replay {} --state {} --to crash.img --check\n",
            self.witness, self.state
        ));
        s
    }
}
