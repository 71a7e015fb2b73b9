//! `bob replay`: rebuild a witness's crash image (or another state of its trace) into an
//! image file and, on request, recover and check it again, independently of the engine
//! that found it.

use std::path::{Path, PathBuf};

use super::{environment, scratch_dir, Error};
use crate::check::{self, OutcomeKind};
use crate::fs::Timeouts;
use crate::output::ReplayReport;
use crate::report::witness;

/// What to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// The witness directory.
    pub witness: PathBuf,
    /// The image file to write: created; an existing file is replaced only with `force`,
    /// and a path inside the witness directory is always refused.
    pub to: PathBuf,
    /// Replace `to` (and the PM image beside it) if it exists.
    pub force: bool,
    /// Another crash state of the witness's trace than its recorded one.
    pub state: Option<String>,
    /// Also recover and check the rebuilt image.
    pub check: bool,
    /// Where scratch directories go (default: the system temp dir).
    pub scratch: Option<PathBuf>,
    /// For a design with a persistent-memory region: where to write the PM image too
    /// (it is always written to `<to>.pm`, where checking looks for it).
    pub pm_out: Option<PathBuf>,
}

/// Refuses to write `to` when it lies inside the witness directory (whatever `force`
/// says: the witness's trace or base image would be gone), or when it exists and `force`
/// is not given. Both paths are resolved first (symbolic links, `..`), so that no other
/// spelling of a witness file gets through.
pub(crate) fn vet_target(to: &Path, witness: &Path, force: bool) -> Result<(), Error> {
    let refused = |why: String| Error::RefusedTarget { path: to.to_owned(), why };
    let resolved = match std::fs::canonicalize(to) {
        Ok(p) => Some(p),
        // A new file: its directory resolved, and its name.
        Err(_) => match (to.parent(), to.file_name()) {
            (Some(parent), Some(name)) => {
                let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
                std::fs::canonicalize(parent).ok().map(|p| p.join(name))
            }
            _ => None,
        },
    };
    if let (Some(target), Ok(dir)) = (&resolved, std::fs::canonicalize(witness)) {
        if target.starts_with(&dir) {
            return Err(refused(format!(
                "lies inside the witness directory {}; bob replay never writes there \
                 (name a file outside it)",
                witness.display()
            )));
        }
    }
    if !force && std::fs::symlink_metadata(to).is_ok() {
        return Err(refused("exists; bob replay does not overwrite it without --force".into()));
    }
    Ok(())
}

/// The id of the crash state a witness records, read from the witness without
/// rebuilding its image.
pub fn witness_state(witness: &Path) -> Result<String, Error> {
    Ok(witness::load_record(witness)?.id)
}

/// Writes the crash state into `opts.to` and, with `opts.check`, checks it; the file holds
/// the crash state (before recovery) when this returns.
pub fn replay_witness(opts: &ReplayOptions) -> Result<ReplayReport, Error> {
    vet_target(&opts.to, &opts.witness, opts.force)?;
    let mut loaded = witness::load_for(&opts.witness, opts.state.as_deref())?;
    if loaded.subject.pm.is_some() {
        vet_target(&check::pm_image_path(&opts.to), &opts.witness, opts.force)?;
        if let Some(out) = &opts.pm_out {
            vet_target(out, &opts.witness, opts.force)?;
        }
    }
    // Ids compare with their schedule prefix (`syncfs/e3:0-4`); a bare id means the
    // witness's own schedule.
    let recorded = loaded.subject.state_id(&loaded.record.id).map(|id| loaded.subject.qualify(&id));
    if let Some(id) = &opts.state {
        let state = loaded.subject.state_id(id).map_err(|e| witness::Error::Invalid {
            path: "--state".into(),
            message: e.to_string(),
        })?;
        let qualified = loaded.subject.qualify(&state);
        if recorded.as_ref().is_ok_and(|r| *r == qualified) {
            loaded.record.id = qualified;
        } else {
            // Another state of the same trace: nothing was recorded about it but its id.
            loaded.record.description =
                state.describe(&loaded.subject.trace, &loaded.subject.epochs);
            loaded.record.id = qualified;
            loaded.record.outcome = "unknown".into();
            loaded.record.story = "(not the witness's recorded state)".into();
        }
    }
    witness::replay(&loaded, &opts.to)?;
    let pm_image = match &loaded.subject.pm {
        Some(_) => {
            let written = check::pm_image_path(&opts.to);
            match &opts.pm_out {
                Some(out) if *out != written => {
                    std::fs::copy(&written, out)
                        .map_err(|source| Error::Io { path: out.clone(), source })?;
                    Some(out.display().to_string())
                }
                _ => Some(written.display().to_string()),
            }
        }
        None => None,
    };
    let record = &loaded.record;
    let mut report = ReplayReport {
        schema_version: crate::report::SCHEMA_VERSION,
        witness: opts.witness.display().to_string(),
        image: opts.to.display().to_string(),
        state: record.id.clone(),
        schedule: loaded.sidecar.schedule.clone(),
        description: record.description.clone(),
        recorded_outcome: record.outcome.clone(),
        recorded_story: record.story.clone(),
        config: record.config.clone(),
        property: record.property.clone(),
        fstype: loaded.subject.config.fstype.into(),
        outcome: None,
        story: None,
        reproduced: None,
        scenarios: Vec::new(),
        pm_image,
    };
    if opts.check {
        let subject = &loaded.subject;
        environment::check(&subject.config)?;
        let work = scratch_dir(opts.scratch.as_deref())?;
        let mnt = work.path().join("mnt");
        std::fs::create_dir_all(&mnt).map_err(|source| Error::Io { path: mnt.clone(), source })?;
        let id = subject.state_id(&record.id)?;
        let durable = subject.durable_ops(&id);
        let checked = check::check_image(subject, &opts.to, &mnt, durable, &Timeouts::default())?;
        // Recovery wrote into the image; put the crash state back so the file is what it says.
        witness::replay(&loaded, &opts.to)?;
        let kind = checked.outcome.kind();
        report.outcome = Some(kind);
        report.story = Some(checked.outcome.detail());
        // Records of schema 1 name outcomes the table has since renamed (mount-failed).
        report.reproduced = OutcomeKind::from_name(&record.outcome).map(|r| r == kind);
        report.scenarios = checked.scenarios;
    }
    Ok(report)
}
