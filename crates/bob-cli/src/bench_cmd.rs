//! `bob bench`: bob's engine against the naive per-state pipeline and the mount floor on
//! one list of crash states, plus the recorder's overhead (see `bob_core::bench`).
//! Exit 0 when both pipelines reach the same verdict on every state, 2 otherwise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use bob_core::bench::{self, BenchOptions};
use bob_core::device::cmd;
use bob_core::fs::{self, Timeouts};
use bob_core::run::Progress;
use indicatif::{ProgressBar, ProgressStyle};
use workloads::Property;

use crate::cli::Format;
use crate::exit;
use crate::signals::CANCEL;

/// `bob bench` arguments.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Configuration (see `bob list`).
    #[arg(long = "fs", default_value = "ext4-ordered")]
    pub fs: String,
    /// Property whose workload is recorded (see `bob list`).
    #[arg(long, default_value = "single-block-append")]
    pub property: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Timed mount + umount rounds of the floor.
    #[arg(long, default_value_t = bench::DEFAULT_FLOOR_RUNS)]
    pub floor_runs: usize,
    /// The engine's parallel workers (default: number of cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Size of the multi-block workloads (e.g. 256K, 1M, 4M; a multiple of 4 KiB), to
    /// measure how the cost grows with the trace.
    #[arg(long, value_parser = parse_size)]
    pub multi_block_bytes: Option<u64>,
    /// Run the naive pipeline on at most this many evenly spaced states (default: all).
    #[arg(long)]
    pub naive_sample: Option<usize>,
    /// MiB the recorder-overhead workload writes (0 skips that measurement).
    #[arg(long, default_value_t = bench::DEFAULT_RECORDER_BYTES >> 20)]
    pub recorder_mib: u64,
    /// Timeout for each recovery step (mount, repairing fsck), in seconds.
    #[arg(long, default_value_t = 30)]
    pub recovery_timeout: u64,
    /// Directory for scratch files (default: the system temp dir).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
}

/// Parses `4096`, `256K`, `1M`, `4MiB` into bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => lower.split_at(i),
        None => (lower.as_str(), ""),
    };
    let shift = match unit {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err(format!("{t:?}: expected a size like 4096, 256K, 1M or 4MiB")),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{t:?}: expected a size like 256K"))?;
    n.checked_shl(shift).filter(|v| v >> shift == n).ok_or_else(|| format!("{t:?}: too large"))
}

/// One progress bar per phase on stderr; a finished phase stays as one line.
struct PhaseBars {
    enabled: bool,
    current: Mutex<Option<ProgressBar>>,
}

impl PhaseBars {
    fn new(enabled: bool) -> PhaseBars {
        PhaseBars { enabled, current: Mutex::new(None) }
    }

    fn finish(&self) {
        if let Some(bar) = self.current.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish();
        }
    }
}

impl Progress for PhaseBars {
    fn phase(&self, name: &str, total: usize) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bar) = current.take() {
            bar.finish();
        }
        let bar = if self.enabled { ProgressBar::new(total as u64) } else { ProgressBar::hidden() };
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg:<12} [{bar:30}] {pos}/{len} {per_sec} {elapsed_precise}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(name.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        *current = Some(bar);
    }

    fn state_done(&self, done: usize, total: usize) {
        if let Some(bar) = self.current.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }
}

/// Root, /dev/fuse and the configuration's programs, each named when missing.
fn check_environment(config: &fs::FsConfig) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("bob bench binds loop devices and mounts file systems: run it as root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse is missing: bob's FUSE disk needs the fuse module".into());
    }
    for program in config.programs() {
        if !cmd::available(program) {
            return Err(format!(
                "{program} not found; install it (Debian: apt-get install {})",
                cmd::package_of(program)
            ));
        }
    }
    if let Some(reason) = config.unavailable {
        return Err(format!("{}: {reason}", config.name));
    }
    if !config.kernel_supports() {
        return Err(format!("{}: this kernel has no {} driver", config.name, config.fstype));
    }
    Ok(())
}

/// Runs `bob bench`.
pub fn run(args: BenchArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let config = fs::by_name(&args.fs).ok_or_else(|| {
        format!("unknown configuration {:?}; known: {}", args.fs, fs::names().join(", "))
    })?;
    let property: Property =
        args.property.parse().map_err(|e: workloads::ParsePropertyError| e.to_string())?;
    if args.floor_runs == 0 {
        return Err("--floor-runs must be at least 1".into());
    }
    if args.naive_sample == Some(0) {
        return Err("--naive-sample must be at least 1".into());
    }
    if args.jobs == Some(0) {
        return Err("--jobs must be at least 1".into());
    }
    if let Some(m) = args.multi_block_bytes {
        if m == 0 || m % 4096 != 0 {
            return Err(
                format!("--multi-block-bytes {m}: must be a positive multiple of 4096").into()
            );
        }
    }
    check_environment(&config)?;

    let mut options = BenchOptions::new(config, property);
    options.multi_block_bytes = args.multi_block_bytes;
    options.naive_sample = args.naive_sample;
    options.floor_runs = args.floor_runs;
    if let Some(j) = args.jobs {
        options.jobs = j;
    }
    options.recorder_bytes = args
        .recorder_mib
        .checked_shl(20)
        .filter(|v| v >> 20 == args.recorder_mib)
        .ok_or("--recorder-mib is too large")?;
    options.timeouts =
        Timeouts { recovery: Duration::from_secs(args.recovery_timeout), ..Timeouts::default() };
    options.scratch = args.scratch;

    let bars = PhaseBars::new(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let report = bench::run(&options, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    match args.format {
        Format::Text => print!("{}", report.to_text()),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    if let Some(d) = &report.first_disagreement {
        eprintln!(
            "bob: error: naive and engine verdicts disagree on {} states; first: state {} \
             (#{}): naive {}, engine {}",
            report.disagreements, d.state, d.index, d.naive, d.engine
        );
        return Ok(ExitCode::from(exit::ERROR));
    }
    Ok(ExitCode::from(exit::HELD))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("256K"), Ok(256 << 10));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }
}
