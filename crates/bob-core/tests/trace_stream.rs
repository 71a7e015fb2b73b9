//! Traces are streamed to disk and mapped, never held or copied whole in memory:
//!
//! * a real recording (ext4 on bob's FUSE disk under a loop device, and a research design
//!   recorded in process) is its log file: every payload lies inside the mapping, the file
//!   is byte for byte `write_log` of the entries, and saving the trace copies it;
//! * streaming random entries into a log file and mapping it back round-trips them, and
//!   the streamed file is byte for byte what `write_log` produces (a property test).
//!
//! The recordings mount real images with the real kernel and need root. The memory bound
//! of a long recording is in `record_memory.rs`, a test binary of its own.

use std::path::Path;

use bob_core::fs::{self, Timeouts};
use bob_core::record::{self, RecordRequest, Recording};
use bob_core::trace::file::LogStream;
use bob_core::trace::log::{read_log_file, write_log};
use bob_core::trace::{flags, Entry, EntryKind, Trace, TraceDir};
use proptest::prelude::*;
use workloads::Property;

fn encoded(trace: &Trace) -> Vec<u8> {
    let mut bytes = Vec::new();
    write_log(&mut bytes, trace).expect("encodes");
    bytes
}

fn record_in(config: &str, property: Property, work: &Path) -> Recording {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test binds loop devices and mounts images: run it as root (scripts/test.sh)"
    );
    let config = fs::by_name(config).expect("config");
    std::fs::create_dir_all(work).unwrap();
    let workload = workloads::workload_for(property, &config.workload_params());
    record::record(&RecordRequest {
        config: &config,
        workload: &workload,
        device: None,
        work_dir: work,
        timeouts: Timeouts::default(),
        setup: None,
        recorder: record::Recorder::Fuse,
    })
    .expect("record")
}

/// The recorded trace is the streamed file, mapped: payloads inside the mapping, the file
/// the encoding of the entries; saving copies it and loading it back maps the copy.
fn assert_is_its_log_file(rec: &Recording, work: &Path) {
    let trace = &rec.trace;
    let file = trace.file.as_ref().expect("a recorded trace is backed by its log file");
    assert_eq!(file.path(), work.join(record::LOG_FILE));
    let writes: Vec<&Entry> =
        trace.entries.iter().filter(|e| matches!(e.kind(), EntryKind::Write { .. })).collect();
    assert!(!writes.is_empty(), "the workload wrote nothing");
    for (i, e) in trace.entries.iter().enumerate() {
        assert!(e.data.is_empty() || file.contains(&e.data), "entry {i} is not in the mapping");
    }
    // Payload bytes read through the mapping are the file's bytes at that place.
    let on_disk = std::fs::read(file.path()).unwrap();
    assert_eq!(on_disk, encoded(trace), "the streamed log is not write_log of its entries");
    assert_eq!(file.byte_len(), on_disk.len() as u64);
    assert!(file.holds(trace), "the trace no longer matches its file");

    let out = work.join("saved");
    TraceDir::write(&out, trace, &rec.sidecar).expect("save");
    assert_eq!(std::fs::read(TraceDir::log_path(&out)).unwrap(), on_disk);
    let loaded = TraceDir::open(&out).expect("load");
    assert_eq!(&loaded.trace, trace);
    let loaded_file = loaded.trace.file.as_ref().expect("a loaded trace is mapped");
    for e in &loaded.trace.entries {
        assert!(e.data.is_empty() || loaded_file.contains(&e.data));
    }
}

#[test]
fn an_ext4_recording_is_its_mapped_log_file() {
    let tmp = tempfile::Builder::new().prefix("bob-stream-test-").tempdir().unwrap();
    let work = tmp.path().join("ext4");
    let rec = record_in("ext4-ordered", Property::MultiBlockAppend, &work);
    assert_is_its_log_file(&rec, &work);
}

/// `bob record --annotate tracefs`: the annotation sets METADATA after the log was sealed;
/// the bits are written back into the file, which stays the trace's encoding and is still
/// what saving copies.
#[test]
fn an_annotated_recording_writes_its_flags_back() {
    let tmp = tempfile::Builder::new().prefix("bob-stream-test-").tempdir().unwrap();
    let work = tmp.path().join("annotated");
    std::fs::create_dir_all(&work).unwrap();
    let config = fs::by_name("ext4-ordered").expect("config");
    let command: Vec<String> =
        ["sh", "-c", "echo hello > a; mkdir d; echo world > d/b; sync"].map(String::from).into();
    let rec = record::custom::record_command(&record::custom::CommandRequest {
        config: &config,
        command: &command,
        device: None,
        work_dir: &work,
        timeouts: Timeouts::default(),
        annotate: record::custom::Annotate::Tracefs,
        backend: record::custom::Backend::Fuse,
        latency: record::latency::Latency::None,
    })
    .expect("record");
    assert_eq!(rec.exit_code, Some(0));
    let metadata = rec.trace.entries.iter().filter(|e| e.flags & flags::METADATA != 0).count();
    assert!(metadata > 0, "tracefs marked no ext4 write as metadata");
    let file = rec.trace.file.as_ref().expect("still backed by its log file");
    assert!(file.holds(&rec.trace));
    assert_eq!(std::fs::read(file.path()).unwrap(), encoded(&rec.trace));
}

#[test]
fn a_research_recording_streams_too() {
    let tmp = tempfile::Builder::new().prefix("bob-stream-test-").tempdir().unwrap();
    let work = tmp.path().join("orderless");
    let rec = record_in("orderless", Property::SingleBlockAppend, &work);
    assert_is_its_log_file(&rec, &work);
    // The research recorder's role bits travel in the entries' flags, hence in the file.
    assert!(!rec.sidecar.roles.is_empty(), "no write carries a role");
}

fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn arb_entry() -> impl Strategy<Value = Entry> {
    let write_flags = prop::sample::select(vec![
        0,
        flags::FUA,
        flags::FLUSH,
        flags::METADATA,
        flags::FLUSH | flags::FUA | flags::METADATA,
    ]);
    prop_oneof![
        5 => (0u64..1 << 24, 1usize..=24, write_flags, any::<u64>()).prop_map(|(s, n, f, seed)| {
            let mut e = Entry::write(s, fill(seed, n * 512));
            e.flags |= f;
            e
        }),
        1 => Just(Entry::flush()),
        1 => (0u64..1 << 30, 1u64..1 << 16).prop_map(|(s, n)| Entry::discard(s, n)),
        2 => "[a-z0-9 :/._-]{0,120}".prop_map(|t| Entry::mark(&t)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Stream random entries (writes from borrowed buffers, the rest as entries), read the
    /// payloads back mid-stream, finish, then map the file afresh: every path gives the
    /// same entries, all payloads slice the mapping, and the file is write_log's bytes.
    #[test]
    fn streaming_then_mapping_round_trips(entries in prop::collection::vec(arb_entry(), 0..40)) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.log");
        let mut stream = LogStream::create(&path, 512).unwrap();
        let mut written = Vec::new();
        for e in &entries {
            if matches!(e.kind(), EntryKind::Write { .. }) {
                written.push((stream.append_write(e.sector, e.flags, &e.data).unwrap(), e));
            } else {
                stream.append(e).unwrap();
            }
        }
        for (at, e) in &written {
            let mut buf = vec![0u8; e.data.len()];
            stream.read_at(*at, &mut buf).unwrap();
            prop_assert_eq!(&buf[..], &e.data[..]);
        }
        let expected = Trace::new(512, entries);
        let finished = stream.finish().unwrap();
        prop_assert_eq!(&finished, &expected);
        let bytes = std::fs::read(&path).unwrap();
        prop_assert_eq!(&bytes, &encoded(&expected));

        let mapped = read_log_file(&path).unwrap();
        prop_assert_eq!(&mapped, &expected);
        for t in [&finished, &mapped] {
            let file = t.file.as_ref().unwrap();
            prop_assert!(file.holds(t));
            for e in &t.entries {
                prop_assert!(e.data.is_empty() || file.contains(&e.data));
            }
        }
    }
}
