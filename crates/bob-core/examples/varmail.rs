//! A Varmail-like benchmark of OptFS against journal-flush on bob's recording disk with
//! its latency model (issue 14): in process (no FUSE), so that only the file system and
//! the disk model are measured.
//!
//! Filebench's varmail.f, scaled down: one directory of `FILES` files of 16 KiB; each
//! iteration does varmail's flow once: delete a file; create it, append 16 KiB, sync;
//! open another, read it whole, append 16 KiB, sync; read a third whole. Varmail runs 16
//! threads; researchfs serialises every operation on one lock, so one thread issues the
//! same requests in the same order. The sync is `osync()` on optfs (the thesis' modified
//! Varmail) and fsync on journal-flush.
//!
//! `cargo run --release -p bob-core --example varmail -- [hdd|ssd|none] [iterations]`

use std::sync::Arc;
use std::time::Instant;

use bob_core::record::latency::Latency;
use bob_core::record::{RecordingDisk, RoleRecorder};
use researchfs::{layout::ROOT, mkfs, Design, Fs, Options};

const FILES: usize = 100;
const APPEND: usize = 16 << 10;

fn run(design: Design, latency: Latency, iterations: usize) -> (f64, u64) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let disk = Arc::new(RecordingDisk::create(&tmp.path().join("base.img"), 64 << 20).unwrap());
    disk.set_adn(design.adn_requests());
    let dev = Arc::new(RoleRecorder(disk.clone()));
    mkfs(design, dev.as_ref(), 64 << 20).unwrap();
    let fs = Fs::open(design, dev, Options::default()).unwrap();
    let data = vec![7u8; APPEND];
    let mut inos: Vec<u32> = (0..FILES)
        .map(|i| {
            let f = fs.create(ROOT, format!("m{i}")).unwrap();
            fs.write(f, 0, &data).unwrap();
            f
        })
        .collect();
    fs.dsync().unwrap();
    disk.set_latency(latency);
    disk.start(&tmp.path().join("record.log")).unwrap();
    let sync = |f: u32| if design == Design::Optfs { fs.osync() } else { fs.fsync(f) };
    let started = Instant::now();
    for it in 0..iterations {
        let (a, b, c) = (it % FILES, (it * 7 + 3) % FILES, (it * 13 + 5) % FILES);
        fs.unlink(ROOT, format!("m{a}")).unwrap();
        let f = fs.create(ROOT, format!("m{a}")).unwrap();
        inos[a] = f;
        fs.write(f, 0, &data).unwrap();
        sync(f).unwrap();
        let g = inos[b];
        let size = fs.getattr(g).unwrap().size;
        fs.read(g, 0, size as usize).unwrap();
        fs.write(g, size, &data).unwrap();
        sync(g).unwrap();
        let h = inos[c];
        fs.read(h, 0, fs.getattr(h).unwrap().size as usize).unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    let flushes = fs.journal_stats().map_or(0, |s| s.flushes);
    fs.crash();
    let _ = disk.stop();
    (iterations as f64 * 2.0 / seconds, flushes)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let latency: Latency = args.next().as_deref().unwrap_or("hdd").parse().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let iterations: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let (opt, opt_flushes) = run(Design::Optfs, latency, iterations);
    let (jf, jf_flushes) = run(Design::JournalFlush, latency, iterations);
    println!("latency model: {latency}, {iterations} iterations ({FILES} files of 16 KiB)");
    println!("optfs (osync):         {opt:10.1} syncs/s, {opt_flushes} flushes");
    println!("journal-flush (fsync): {jf:10.1} syncs/s, {jf_flushes} flushes");
    println!("optfs_vs_fsync_flush:  {:.2}", opt / jf);
}
