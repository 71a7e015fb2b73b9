//! The HTML site (`bob report`) in a real browser, and `bob diff`, on real `bob table`
//! runs: Debian's chromium driven headless through chromedriver's WebDriver protocol
//! (fantoccini). Every page loads without a console error, every link between pages
//! resolves, the witness page draws one box per write of its trace with the crash state's
//! fates, and the index's cells link to their pages. Skips, saying so, only when chromium
//! or chromedriver is not installed (scripts/test.sh installs both).

mod util;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use util::{assert_no_leaks, run, Dir};

const CHROMIUM_ARGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
];

/// `program` on PATH, if it is there.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// chromedriver on a free loopback port; killed (and reaped) on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start(path: &Path) -> Driver {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        Driver { child, url: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver's browser console log (`POST /session/{id}/se/log`), which the
/// `goog:loggingPrefs` capability fills: every message since the last call.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or("")))
    }
    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

/// The console messages of level SEVERE (errors) since the last call.
async fn console_errors(client: &Client) -> Vec<String> {
    let log = client.issue_cmd(BrowserLog).await.expect("read the browser log");
    log.as_array()
        .expect("the log is an array")
        .iter()
        .filter(|m| m["level"] == "SEVERE")
        .map(|m| m["message"].as_str().unwrap_or("").to_owned())
        .collect()
}

async fn connect(driver: &Driver, chromium: &Path) -> Client {
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": { "binary": chromium, "args": CHROMIUM_ARGS },
        "goog:loggingPrefs": { "browser": "ALL" },
    });
    let caps = caps.as_object().unwrap().clone();
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    // chromedriver takes a moment to listen.
    let mut last = None;
    for _ in 0..100 {
        match ClientBuilder::new(connector.clone())
            .capabilities(caps.clone())
            .connect(&driver.url)
            .await
        {
            Ok(c) => return c,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("could not start a chromium session: {last:?}");
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// A `bob table --format json` run of one configuration under one atomic write unit,
/// with its `--out` in `dir/name`; the exit code, and the JSON file it printed.
fn table(
    dir: &Dir,
    name: &str,
    fs: &str,
    properties: &str,
    schedules: &str,
    unit: &str,
    extra: &[&str],
) -> (i32, PathBuf, PathBuf) {
    let out = dir.path().join(name);
    let scratch = dir.scratch();
    let out_s = out.to_str().unwrap();
    let mut args = vec![
        "table",
        "--fs",
        fs,
        "--property",
        properties,
        "--schedules",
        schedules,
        "--atomic-write-unit",
        unit,
        "--format",
        "json",
        "--scratch",
        scratch.to_str().unwrap(),
        "--out",
        out_s,
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_no_leaks(&scratch);
    let json = dir.path().join(format!("{name}.json"));
    std::fs::write(&json, &o.stdout).unwrap();
    (o.status.code().unwrap_or(-1), out, json)
}

#[test]
fn the_site_in_a_browser_and_diff_between_disk_models() {
    let (Some(chromium), Some(chromedriver)) = (which("chromium"), which("chromedriver")) else {
        let missing = "the browser tests need Debian's chromium and chromium-driver \
                       (apt-get install chromium chromium-driver; scripts/test.sh installs them)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{missing}");
        }
        eprintln!("NOT TESTED: {missing}");
        return;
    };
    let dir = Dir::new();
    // The same configuration and property under 512 B and 4 KiB atomic writes: a 4 KiB
    // overwrite tears under 512 B units only. The first table has a second row, which
    // the second lacks.
    let (code_a, out_a, json_a) = table(
        &dir,
        "awu512",
        "ext4-ordered",
        "single-block-overwrite,single-block-append",
        "sync,syncfs",
        "512",
        &[],
    );
    let site_b = dir.path().join("site4096");
    let (code_b, _, json_b) = table(
        &dir,
        "awu4096",
        "ext4-ordered",
        "single-block-overwrite",
        // The same drain schedules as the first: `bob diff` compares whole cells only
        // when both tables drained the same way.
        "sync,syncfs",
        "4096",
        &["--html-site", site_b.to_str().unwrap()],
    );
    assert!(site_b.join("index.html").is_file(), "bob table --html-site builds the site");
    assert!(site_b.join("cell-ext4-ordered--single-block-overwrite--awu-4096.html").is_file());
    assert_eq!(code_a, 1, "512 B units tear the overwrite");
    let grid_a: Value = serde_json::from_slice(&std::fs::read(&json_a).unwrap()).unwrap();
    let grid_b: Value = serde_json::from_slice(&std::fs::read(&json_b).unwrap()).unwrap();
    let overwrite = |g: &Value| {
        g["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["property"] == "single-block-overwrite")
            .cloned()
            .unwrap()
    };
    assert_eq!(overwrite(&grid_a)["verdict"], "violated");
    assert_eq!(overwrite(&grid_b)["verdict"], "held", "{code_b}");

    // bob diff: the overwrite changed; identical inputs change nothing.
    let (a, b) = (json_a.to_str().unwrap(), json_b.to_str().unwrap());
    let text = run(&["diff", a, b]);
    assert_eq!(text.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("single-block-overwrite / ext4-ordered: violated -> held"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "no colour into a pipe: {stdout}");
    let d: Value =
        serde_json::from_slice(&run(&["diff", a, b, "--format", "json"]).stdout).unwrap();
    let changes = d["changes"].as_array().unwrap();
    assert!(!changes.is_empty());
    let cell_change = changes.iter().find(|c| c["schedule"].is_null()).unwrap();
    assert_eq!(
        (cell_change["a"]["verdict"].as_str(), cell_change["b"]["verdict"].as_str()),
        (Some("violated"), Some("held"))
    );
    assert!(cell_change["a"]["witness"].is_string() && cell_change["a"]["state"].is_string());
    assert_eq!(d["matched_on"], json!(["config", "property", "schedule"]));
    assert_eq!(d["only_in_a"][0]["property"], "single-block-append");
    let md = run(&["diff", a, b, "--format", "md"]);
    assert!(String::from_utf8_lossy(&md.stdout)
        .contains("| single-block-overwrite / ext4-ordered | violated | held |"));
    // On a terminal (util-linux's `script` gives it one) the verdicts are in colour,
    // unless NO_COLOR is set.
    if let Some(script) = which("script") {
        let line = format!("{} diff {a} {b}", env!("CARGO_BIN_EXE_bob"));
        let tty = |no_color: Option<&str>| {
            let mut c = Command::new(&script);
            c.args(["-qec", &line, "/dev/null"]);
            if let Some(v) = no_color {
                c.env("NO_COLOR", v);
            } else {
                c.env_remove("NO_COLOR");
            }
            let o = c.output().unwrap();
            assert_eq!(o.status.code(), Some(1), "script passes bob diff's exit on");
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        assert!(tty(None).contains("\x1b[1;31mviolated\x1b[0m -> \x1b[32mheld"), "{}", tty(None));
        assert!(!tty(Some("1")).contains('\x1b'), "NO_COLOR");
    }
    let same = run(&["diff", a, a]);
    assert_eq!(same.status.code(), Some(0), "identical tables: nothing changed");
    assert!(String::from_utf8_lossy(&same.stdout).contains("no verdict changed"));

    // The site of the first run, with the page of what changed against the second.
    let site = dir.path().join("site");
    let r = run(&["report", out_a.to_str().unwrap(), "--to", site.to_str().unwrap(), "--diff", b]);
    assert_eq!(r.status.code(), Some(0));
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&site)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .collect();
    pages.sort();
    let cells = grid_a["cells"].as_array().unwrap();
    let witness_page = site.join("witness-ext4-ordered--single-block-overwrite--awu-512.html");
    assert!(witness_page.is_file(), "{pages:?}");
    // A witness page per cross, and one per other drain schedule's first state.
    let witness_pages: usize = cells
        .iter()
        .filter(|c| c["witness"].is_string())
        .map(|c| {
            let other =
                |s: &&Value| s["first_state"].is_string() && s["first_state"] != c["witness_state"];
            1 + c["schedules"].as_array().unwrap().iter().filter(other).count()
        })
        .sum();
    assert!(witness_pages > 2, "the syncfs recordings' states get pages too: {pages:?}");
    assert_eq!(
        pages.len(),
        1 + cells.len() + witness_pages + 1,
        "index, cells, witnesses, diff: {pages:?}"
    );

    // The witness's trace and crash state, as bob's log reader and `bob explain` see them
    // (neither goes through the drawing).
    let witness = out_a.join("ext4-ordered/single-block-overwrite");
    let rows: Value = serde_json::from_slice(
        &run(&["log", "--list", "--format", "json", witness.to_str().unwrap()]).stdout,
    )
    .unwrap();
    let mut writes: Vec<u64> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["nr_sectors"].as_u64().unwrap() > 0 && r["mark"].is_null())
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    writes.sort();
    let explanation: Value = serde_json::from_slice(
        &run(&["explain", "--format", "json", witness.to_str().unwrap()]).stdout,
    )
    .unwrap();
    let crash = explanation["earlier_epochs_applied"].as_u64().unwrap();
    let mut applied = Vec::new();
    let mut torn = Vec::new();
    for line in explanation["writes_applied_in_crash_epoch"].as_array().unwrap() {
        let line = line.as_str().unwrap();
        let entry: u64 = line["entry ".len()..].split(':').next().unwrap().parse().unwrap();
        if line.contains("torn") {
            torn.push(entry)
        } else {
            applied.push(entry)
        }
    }
    assert!(!torn.is_empty(), "a mix of old and new sectors comes from a torn write");

    // A witness whose ops crowd before one write: on xfs, append-then-rename's first ops
    // all come before the crash epoch's first write, so their labels start at one x.
    let (code_x, out_x, _) = table(&dir, "xfs", "xfs", "append-then-rename", "sync", "4096", &[]);
    assert_eq!(code_x, 1, "xfs persists the rename before the append");
    let site_x = dir.path().join("site-xfs");
    let r = run(&["report", out_x.to_str().unwrap(), "--to", site_x.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0));
    let crowded = site_x.join("witness-xfs--append-then-rename--awu-4096.html");
    assert!(crowded.is_file());

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let driver = Driver::start(&chromedriver);
        let client = connect(&driver, &chromium).await;

        // The console collector sees an error when there is one.
        let broken = dir.path().join("broken.html");
        std::fs::write(
            &broken,
            "<!DOCTYPE html><title>x</title><script>throw new Error('planted')</script>",
        )
        .unwrap();
        client.goto(&file_url(&broken)).await.unwrap();
        let planted = console_errors(&client).await;
        assert!(planted.iter().any(|m| m.contains("planted")), "{planted:?}");

        for page in &pages {
            client.goto(&file_url(page)).await.unwrap();
            let errors = console_errors(&client).await;
            assert!(errors.is_empty(), "{}: console errors {errors:?}", page.display());
            for a in client.find_all(Locator::Css("a[href]")).await.unwrap() {
                let href = a.prop("href").await.unwrap().unwrap();
                let target = href.strip_prefix("file://").unwrap_or_else(|| {
                    panic!("{}: a link leaves the site: {href}", page.display())
                });
                let target = Path::new(target.split('#').next().unwrap());
                assert!(
                    target.starts_with(&site) && target.is_file(),
                    "{}: broken link {href}",
                    page.display()
                );
            }
        }

        // The index: every cell a link to its page, its breakdown on hover.
        client.goto(&file_url(&site.join("index.html"))).await.unwrap();
        let links = client.find_all(Locator::Css("td a.cell")).await.unwrap();
        assert_eq!(links.len(), cells.len());
        for cell in cells {
            let page = format!(
                "cell-{}--{}--awu-512.html",
                cell["config"].as_str().unwrap(),
                cell["property"].as_str().unwrap()
            );
            let a = client.find(Locator::Css(&format!("td a.cell[href='{page}']"))).await.unwrap();
            let td = a.find(Locator::XPath("..")).await.unwrap();
            let title = td.attr("title").await.unwrap().unwrap();
            let held = format!("{} held", cell["counts"]["held"]);
            assert!(
                title.starts_with(cell["verdict"].as_str().unwrap()) && title.contains(&held),
                "{title}"
            );
            assert!(!a.text().await.unwrap().trim().is_empty(), "a letter, not only a colour");
        }

        // The witness page: one box per write, each with its fate in the crash state.
        client.goto(&file_url(&witness_page)).await.unwrap();
        let boxes = client
            .execute(
                "return [...document.querySelectorAll('svg.timeline rect.write')].map(r => ({
                    entry: +r.dataset.entry, epoch: +r.dataset.epoch, fate: r.dataset.fate,
                    kept: r.parentNode.querySelectorAll('rect.unit.kept').length,
                    lost: r.parentNode.querySelectorAll('rect.unit.lost').length }))",
                vec![],
            )
            .await
            .unwrap();
        let boxes = boxes.as_array().unwrap();
        let mut drawn: Vec<u64> = boxes.iter().map(|b| b["entry"].as_u64().unwrap()).collect();
        drawn.sort();
        assert_eq!(drawn, writes, "one box per write of the trace");
        for b in boxes {
            let (entry, epoch) = (b["entry"].as_u64().unwrap(), b["epoch"].as_u64().unwrap());
            let want = if epoch < crash {
                "applied"
            } else if epoch > crash {
                "later"
            } else if torn.contains(&entry) {
                "torn"
            } else if applied.contains(&entry) {
                "applied"
            } else {
                "missing"
            };
            assert_eq!(b["fate"], want, "entry {entry} (epoch {epoch}, crash in {crash})");
            if want == "torn" {
                assert!(b["kept"].as_u64() > Some(0) && b["lost"].as_u64() > Some(0), "{b}");
            }
        }
        let crash_marks = client.find_all(Locator::Css("svg.timeline g.crash")).await.unwrap();
        assert_eq!(crash_marks.len(), 1);
        if let Some(path) = std::env::var_os("BOB_SITE_SCREENSHOT") {
            std::fs::write(path, client.screenshot().await.unwrap()).unwrap();
        }

        // No two op labels overlap, on any witness page, crowded or not.
        let witnesses = pages.iter().filter(|p| p.to_string_lossy().contains("witness-"));
        for page in witnesses.chain([&crowded]) {
            client.goto(&file_url(page)).await.unwrap();
            let labels = client
                .execute(
                    "const r = [...document.querySelectorAll('svg.timeline g.op text')]
                        .map(t => t.getBoundingClientRect());
                    const hits = [];
                    for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++) {
                        const [a, b] = [r[i], r[j]];
                        if (a.left < b.right && b.left < a.right && a.top < b.bottom
                            && b.top < a.bottom) hits.push([i, j]);
                    }
                    return { labels: r.length, empty: r.filter(b => b.width == 0).length, hits };",
                    vec![],
                )
                .await
                .unwrap();
            assert_eq!(labels["empty"], 0, "{}: every label is drawn: {labels}", page.display());
            assert_eq!(labels["hits"], json!([]), "{}: labels overlap: {labels}", page.display());
            if page == &crowded {
                assert!(labels["labels"].as_u64() >= Some(4), "{labels}");
            }
        }

        // The page of what changed.
        client.goto(&file_url(&site.join("diff.html"))).await.unwrap();
        assert!(!client.find_all(Locator::Css("tr.change")).await.unwrap().is_empty());
        client.close().await.unwrap();
    });
}
