//! `bob bench --fs valor --latency MODEL`: Valor's serial overwrite (valor.txt §4.3-4.4)
//! on bob's recording disk with its latency model: a file overwritten from start to end
//! in transactions of [`TXN_PAGES`] pages (one write of the 16 pages, a non-durable
//! commit each, the paper's focus) against the same writes without transactions on the
//! same design (`valor_vs_plain`, the elapsed-time factor; the paper's Valor converges on
//! 2.9x ext3's).
//!
//! In process (no FUSE), so only the file system and the disk model are measured. Both
//! runs end with an fsync, so the plain run pays for writing its data back too (the
//! paper's asynchronous overwrite of files larger than memory does).

use std::sync::Arc;
use std::time::Instant;

use researchfs::{layout::ROOT, mkfs, Design, Fs, Options};
use serde::{Deserialize, Serialize};

use super::FsBenchError;
use crate::record::latency::Latency;
use crate::record::{RecordingDisk, RoleRecorder};

/// Pages per transaction (the paper's transaction size in Figure 5).
pub(crate) const TXN_PAGES: usize = 16;
/// Pages of the overwritten file (8 MiB: 128 transactions).
pub const VALOR_PAGES: usize = 2048;
/// The paper's converged factor of Valor's elapsed time over ext3's (§4.4).
const PAPER_FACTOR: f64 = 2.9;
const PAGE: usize = 4096;
const IMAGE: u64 = 64 << 20;

/// One run of the overwrite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValorRun {
    /// Configuration name.
    pub config: String,
    /// Whether each 16 pages were a transaction.
    pub transactions: bool,
    /// Seconds of the timed overwrite (the final fsync included).
    pub seconds: f64,
    /// Flushes issued (the log's, and the final fsync).
    pub flushes: u64,
}

/// `bob bench --fs valor --latency MODEL`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValorBenchReport {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The latency model (`hdd`, `ssd`, `none`).
    pub latency: Latency,
    /// Pages overwritten.
    pub pages: usize,
    /// Pages per transaction.
    pub txn_pages: usize,
    /// Valor with transactions.
    pub valor: ValorRun,
    /// The same writes on the same design without transactions.
    pub plain: ValorRun,
    /// `valor.seconds / plain.seconds`.
    pub valor_vs_plain: f64,
    /// The paper's figure for the same ratio (Valor over ext3).
    pub paper_factor: f64,
}

fn overwrite(latency: Latency, pages: usize, txns: bool) -> Result<ValorRun, FsBenchError> {
    let design = Design::Valor;
    let fs_err = |source| FsBenchError::Fs { design, source };
    let tmp = tempfile::tempdir()?;
    let disk = Arc::new(RecordingDisk::create(&tmp.path().join("base.img"), IMAGE)?);
    let dev = Arc::new(RoleRecorder(disk.clone()));
    mkfs(design, dev.as_ref(), IMAGE).map_err(fs_err)?;
    let fs = Fs::open(design, dev, Options::default()).map_err(fs_err)?;
    let f = fs.create(ROOT, "big").map_err(fs_err)?;
    fs.write(f, 0, &vec![1u8; pages * PAGE]).map_err(fs_err)?;
    fs.fsync(f).map_err(fs_err)?;
    disk.set_latency(latency);
    disk.start(&tmp.path().join("record.log"))?;
    let before = fs.valor_stats().map_or(0, |s| s.flushes);
    let data = vec![2u8; TXN_PAGES * PAGE];
    let started = Instant::now();
    let run = || -> researchfs::Result<()> {
        for chunk in 0..pages / TXN_PAGES {
            let off = (chunk * TXN_PAGES * PAGE) as u64;
            if txns {
                fs.txn_begin()?;
                fs.write(f, off, &data)?;
                fs.txn_commit(false)?;
            } else {
                fs.write(f, off, &data)?;
            }
        }
        fs.fsync(f)
    };
    let done = run();
    let seconds = started.elapsed().as_secs_f64();
    let flushes = fs.valor_stats().map_or(0, |s| s.flushes) - before + 1;
    fs.crash();
    disk.stop()?;
    done.map_err(fs_err)?;
    Ok(ValorRun {
        config: if txns { "valor" } else { "valor (no transactions)" }.into(),
        transactions: txns,
        seconds,
        flushes,
    })
}

/// Runs the serial overwrite of `pages` pages with and without transactions.
pub fn run_valor_bench(latency: Latency, pages: usize) -> Result<ValorBenchReport, FsBenchError> {
    let valor = overwrite(latency, pages, true)?;
    let plain = overwrite(latency, pages, false)?;
    Ok(ValorBenchReport {
        schema_version: crate::SCHEMA_VERSION,
        latency,
        pages,
        txn_pages: TXN_PAGES,
        valor_vs_plain: valor.seconds / plain.seconds.max(1e-9),
        valor,
        plain,
        paper_factor: PAPER_FACTOR,
    })
}

impl ValorBenchReport {
    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let row =
            |r: &ValorRun| format!("{:<24}: {:.3} s, {} flushes\n", r.config, r.seconds, r.flushes);
        format!(
            "Serial overwrite of {} pages in transactions of {}, latency model {}\n{}{}valor_vs_plain: {:.2} (the paper: Valor {:.1}x ext3)\n",
            self.pages,
            self.txn_pages,
            self.latency,
            row(&self.valor),
            row(&self.plain),
            self.valor_vs_plain,
            self.paper_factor
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_shape() {
        let run = |config: &str, transactions, seconds, flushes| ValorRun {
            config: config.into(),
            transactions,
            seconds,
            flushes,
        };
        let report = ValorBenchReport {
            schema_version: crate::SCHEMA_VERSION,
            latency: Latency::Hdd,
            pages: VALOR_PAGES,
            txn_pages: TXN_PAGES,
            valor: run("valor", true, 4.0, 257),
            plain: run("valor (no transactions)", false, 1.0, 1),
            valor_vs_plain: 4.0,
            paper_factor: PAPER_FACTOR,
        };
        insta::assert_json_snapshot!("valor_bench", report);
    }

    #[test]
    fn transactions_cost_two_flushes_each_on_the_hdd_model() {
        let r = run_valor_bench(Latency::Hdd, 8 * TXN_PAGES).unwrap();
        assert_eq!(r.valor.flushes, 2 * 8 + 1, "log flush and commit flush per txn: {r:?}");
        assert_eq!(r.plain.flushes, 1, "{r:?}");
        assert!(r.valor_vs_plain > 1.5, "{r:?}");
    }
}
