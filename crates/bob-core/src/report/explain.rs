//! `bob explain`: a witness told in words. Which writes of the crash epoch reached the
//! disk, which ops persisted after recovery, and which byte ranges of which files hold
//! something other than their own data (zeros, garbage, another file's data).

use std::path::Path;

use serde::{Deserialize, Serialize};
use workloads::{SectorClass, Snapshot};

use super::witness;

/// Explains the witness in `dir` (its recorded state).
pub fn explain(dir: &Path) -> Result<Explanation, witness::Error> {
    let (loaded, id) = witness::load_with_state(dir)?;
    let subject = &loaded.subject;
    let record = &loaded.record;
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

/// `bob explain`: a witness told in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// [`super::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The witness directory (not in the JSON: it names this machine's path).
    #[serde(skip)]
    pub witness: String,
    /// Configuration.
    pub config: String,
    /// Property, if any.
    pub property: Option<String>,
    /// The state's id.
    pub state: String,
    /// The drain schedule of its trace.
    pub schedule: Option<String>,
    /// The recorded outcome.
    pub outcome: String,
    /// The recorded story.
    pub story: String,
    /// The state's description.
    #[serde(rename = "where")]
    pub where_: String,
    /// The writes of the crash epoch that reached the disk, one line each.
    pub writes_applied_in_crash_epoch: Vec<String>,
    /// How many earlier epochs reached the disk whole.
    pub earlier_epochs_applied: u32,
    /// The disk model the state is legal under.
    pub disk_model: crate::crash::DiskModel,
    /// The property's earlier op (not persisted), for an ordering cross.
    pub earlier_op: Option<workloads::OpRef>,
    /// ... and its later op (persisted).
    pub later_op: Option<workloads::OpRef>,
    /// Each workload op after recovery.
    pub ops: Vec<OpPersistence>,
    /// Runs of sectors that are not their file's own data.
    pub wrong_bytes: Vec<String>,
}

/// One op of the workload in an [`Explanation`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpPersistence {
    /// Index in the workload.
    pub index: usize,
    /// The op as text.
    pub op: String,
    /// `persisted`, `not persisted` or `no persistent effect of its own`.
    pub state: String,
    /// Why not, when not persisted.
    pub why: String,
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
fn wrong_bytes(snapshot: &Snapshot) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explanation_shape() {
        let explanation = Explanation {
            schema_version: super::super::SCHEMA_VERSION,
            witness: "/tmp/bob-out/ext2/single-block-append".into(),
            config: "ext2".into(),
            property: Some("single-block-append".into()),
            state: "sync/e2:0".into(),
            schedule: Some("sync".into()),
            outcome: "violated".into(),
            story: "op 0 did not persist".into(),
            where_: "epoch 2 of 4, writes 0 of 3".into(),
            writes_applied_in_crash_epoch: vec!["entry 7: write of 8 sectors at sector 96".into()],
            earlier_epochs_applied: 2,
            disk_model: crate::crash::DiskModel::default(),
            earlier_op: None,
            later_op: None,
            ops: vec![OpPersistence {
                index: 0,
                op: "append /f 4096".into(),
                state: "not persisted".into(),
                why: "size 0, expected 4096".into(),
            }],
            wrong_bytes: vec!["/f: bytes 0..4096 (8 sectors) are zeros".into()],
        };
        insta::assert_json_snapshot!("explanation", explanation);
        insta::assert_snapshot!(
            "explanation_text",
            explanation.to_text().replace(&explanation.witness, "[witness]")
        );
    }
}
