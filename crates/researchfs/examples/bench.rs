//! NoFS vs orderless vs ordered-core over a real FUSE mount on an image file:
//! `cargo run --release -p researchfs --example bench [-- --scale N] [-- --dir PATH]`.
//!
//! Three workloads, each on a fresh image: file creation (create + fsync, spread over ten
//! directories, as the thesis' creation benchmark), small-file writes (create, write 16 KiB,
//! close) and one large sequential write ending in a single fsync. The image lives in
//! `--dir` (default: the system temp directory) so that a flush is a real `fdatasync`.
//! Prints throughput and ratios; exits 2 with one line on any failure.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use researchfs::fuse::mount_with;
use researchfs::{mkfs, BlockDevice, Design, FileDevice, Options};

struct Args {
    scale: usize,
    dir: PathBuf,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { scale: 1, dir: std::env::temp_dir() };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--scale" => {
                let v = it.next().ok_or("--scale needs a number")?;
                a.scale =
                    v.parse().map_err(|_| format!("--scale: `{v}` is not a positive number"))?;
                if a.scale == 0 {
                    return Err("--scale must be at least 1".into());
                }
            }
            "--dir" => a.dir = PathBuf::from(it.next().ok_or("--dir needs a path")?),
            other => {
                return Err(format!("unknown argument `{other}` (expected --scale N, --dir PATH)"))
            }
        }
    }
    Ok(a)
}

#[derive(Clone, Copy)]
enum Workload {
    Create,
    SmallWrites,
    Sequential,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Create => "file creation (create+fsync)",
            Workload::SmallWrites => "small-file writes (16 KiB)",
            Workload::Sequential => "large sequential write",
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Workload::Sequential => "MB/s",
            _ => "files/s",
        }
    }
}

/// Runs `w` on a fresh `design` image; returns units per second.
fn run(
    design: Design,
    opts: Options,
    w: Workload,
    scale: usize,
    dir: &Path,
) -> Result<f64, String> {
    let tmp =
        tempfile::tempdir_in(dir).map_err(|e| format!("temp dir in {}: {e}", dir.display()))?;
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
    let image = tmp.path().join("image");
    let dev: Arc<dyn BlockDevice> = Arc::new(
        FileDevice::create(&image, 1 << 30).map_err(|e| format!("{}: {e}", image.display()))?,
    );
    mkfs(design, dev.as_ref(), dev.size()).map_err(|e| e.to_string())?;
    let m = mount_with(design, dev.clone(), &mnt, opts).map_err(|e| e.to_string())?;
    m.fs().wait_scan();
    let io = |p: &Path, e: std::io::Error| format!("{design}: {}: {e}", p.display());
    let start = Instant::now();
    let units = match w {
        Workload::Create => {
            let n = 1000 * scale;
            for d in 0..10 {
                let p = mnt.join(format!("d{d}"));
                fs::create_dir(&p).map_err(|e| io(&p, e))?;
            }
            for i in 0..n {
                let p = mnt.join(format!("d{}/f{i}", i % 10));
                let f = fs::File::create(&p).map_err(|e| io(&p, e))?;
                f.sync_all().map_err(|e| io(&p, e))?;
            }
            n as f64
        }
        Workload::SmallWrites => {
            let n = 1000 * scale;
            let buf = vec![0x5a; 16 << 10];
            for i in 0..n {
                let p = mnt.join(format!("s{i}"));
                let mut f = fs::File::create(&p).map_err(|e| io(&p, e))?;
                f.write_all(&buf).map_err(|e| io(&p, e))?;
            }
            n as f64
        }
        Workload::Sequential => {
            let mb = 128 * scale;
            let p = mnt.join("big");
            let mut f = fs::File::create(&p).map_err(|e| io(&p, e))?;
            let buf = vec![0xa5; 1 << 20];
            for _ in 0..mb {
                f.write_all(&buf).map_err(|e| io(&p, e))?;
            }
            f.sync_all().map_err(|e| io(&p, e))?;
            mb as f64 * (1 << 20) as f64 / 1e6
        }
    };
    let secs = start.elapsed().as_secs_f64();
    m.unmount().map_err(|e| e.to_string())?;
    Ok(units / secs)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::from(2);
        }
    };
    // NoFS twice: as designed (fsync flushes nothing) and mounted durable (fsync flushes),
    // which separates the cost of ordering from the cost of durability.
    let configs = [
        (Design::Nofs, Options::default()),
        (Design::Nofs, Options { durable: true, ..Options::default() }),
        (Design::Orderless, Options::default()),
        (Design::Ordered, Options::default()),
    ];
    let workloads = [Workload::Create, Workload::SmallWrites, Workload::Sequential];
    println!(
        "researchfs benchmark: FUSE mount, 1 GiB image file in {}, scale {}",
        args.dir.display(),
        args.scale
    );
    println!();
    println!(
        "| workload | unit | nofs | nofs (durable) | orderless | ordered-core | nofs / orderless | nofs / ordered-core | nofs durable / ordered-core |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for w in workloads {
        let mut r = Vec::new();
        for (d, o) in configs {
            match run(d, o, w, args.scale, &args.dir) {
                Ok(x) => r.push(x),
                Err(e) => {
                    eprintln!("bench: {}: {e}", w.name());
                    return ExitCode::from(2);
                }
            }
        }
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} |",
            w.name(),
            w.unit(),
            r[0],
            r[1],
            r[2],
            r[3],
            r[0] / r[2],
            r[0] / r[3],
            r[1] / r[3]
        );
    }
    ExitCode::SUCCESS
}
