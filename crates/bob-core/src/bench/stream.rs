//! `bob bench --stream-states N`: N crash states of one recorded trace generated
//! ([`crate::crash::stream`]) and deduped by content as the engine does it (overlay digest
//! and due promises: the check key), without mounting anything, and the process's
//! resident memory after the first tenth of the states against after the last: whether
//! memory stays flat in the number of states.
//!
//! What can make that many: the default strategies and then `random` up to the budget,
//! on a trace cut under 512-byte atomic units (every sector of a write may be lost
//! alone), where multi-sector writes give far more distinct states than any budget here.
//! `random` stops drawing from an epoch after 64 draws in a row that it had already
//! made, so a trace of one-block writes runs dry early (ext4-ordered /
//! single-block-append: about 7,000 states); `multi-block-append` with a small
//! `--multi-block-bytes` (16 KiB: 32 units per request) gives millions of cheap states. What the stream holds grows by a digest per state (see
//! [`crate::crash::stream`]), and the dedup by a 32-byte key per distinct state: the
//! figures show how much that is.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use workloads::Property;

use super::Error;
use crate::check;
use crate::crash::{self, DiskModel, FuaModel, Limits, OverlayBuilder, Strategy};
use crate::fs::{FsConfig, Timeouts};
use crate::host::{load_average, peak_rss_kib, rss_kib};
use crate::output::StreamStatesReport;
use crate::run::{Progress, WorkDir};

/// States between two progress reports.
const PROGRESS_EVERY: usize = 4096;

/// What `bob bench --stream-states` measures.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// The configuration recorded.
    pub config: FsConfig,
    /// The property whose workload is recorded.
    pub property: Property,
    /// States to generate (the budget, `--max-states`).
    pub states: usize,
    /// Overrides the workload's multi-block size (bytes, a multiple of the block size).
    pub multi_block_bytes: Option<u64>,
    /// External step timeouts of the recording.
    pub timeouts: Timeouts,
    /// Where the scratch directory goes (default: the system temp dir).
    pub scratch: Option<PathBuf>,
}

/// The disk model the states are cut under: 512-byte units, real FUA.
pub(crate) const STREAM_DISK: DiskModel = DiskModel { atomic_write_unit: 512, fua: FuaModel::Real };

/// Records the workload, then streams and dedups `options.states` states of its trace.
pub fn run_stream_bench(
    options: &StreamOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<StreamStatesReport, Error> {
    if options.states == 0 {
        return Err(Error::Options("--stream-states needs at least one state".into()));
    }
    let load_start = load_average();
    let work = WorkDir::new(options.scratch.as_deref()).map_err(super::work_dir_err)?;
    progress.phase("recording", 0);
    let params = super::params_with_multi_block(&options.config, options.multi_block_bytes)?;
    let (workload, recording) = super::record_property(
        &options.config,
        options.property,
        &params,
        work.path(),
        options.timeouts,
    )?;
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::Interrupted);
    }
    let (subject, _) =
        crate::run::subject_of(options.config.clone(), workload, recording, None, STREAM_DISK)?;

    let strategies: Vec<Strategy> = [Strategy::DEFAULT, &[Strategy::Random]].concat();
    let limits = Limits { max_states: Some(options.states), ..Limits::default() };
    let tenth = (options.states / 10).max(1);
    progress.phase("streaming", options.states);
    let rss_kib_start = rss_kib();
    let started = Instant::now();
    let builder = OverlayBuilder::new(&subject.trace, &subject.epochs);
    let mut stream = crash::stream(&subject.trace, &subject.epochs, &strategies, &limits);
    let mut keys: HashSet<[u8; 32]> = HashSet::new();
    let (mut states, mut random) = (0, 0);
    let mut rss_kib_first_tenth = 0;
    for state in stream.by_ref() {
        let digest = builder.state(&state.id).digest(&subject.trace);
        keys.insert(check::check_key(&digest, &subject.durable_ops(&state.id)));
        random += usize::from(state.strategy == Strategy::Random);
        states += 1;
        if states == tenth {
            rss_kib_first_tenth = rss_kib();
        }
        if states % PROGRESS_EVERY == 0 {
            progress.state_done(states, options.states);
            if cancel.load(Ordering::Relaxed) {
                return Err(Error::Interrupted);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let rss_kib_last_tenth = rss_kib();
    if states < tenth {
        rss_kib_first_tenth = rss_kib_last_tenth;
    }
    progress.state_done(states, options.states);
    Ok(StreamStatesReport {
        schema_version: crate::report::SCHEMA_VERSION,
        config: options.config.name.into(),
        property: options.property.name().into(),
        disk_model: STREAM_DISK,
        strategies: strategies.iter().map(|s| s.name().to_owned()).collect(),
        states_requested: options.states,
        states,
        states_random: random,
        states_unique: keys.len(),
        trace_entries: subject.trace.entries.len(),
        epochs: subject.epochs.len(),
        seconds,
        states_per_s: super::stats::per_s(states, seconds),
        rss_kib_start,
        rss_kib_first_tenth,
        rss_kib_last_tenth,
        peak_rss_kib: peak_rss_kib(),
        id_digests_held: stream.digests_held(),
        check_keys_held: keys.len(),
        load_average: [load_start, load_average()],
    })
}
