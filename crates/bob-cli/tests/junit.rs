//! `--format junit`: the JUnit XML of a real table (and of `bob merge`, `bob diff` and
//! `bob run` of it) validates against the Ant JUnit schema CI reporters accept
//! (fixtures/junit/JUnit.xsd, with `xmllint --schema`), and says what the table says.

mod util;

use std::path::{Path, PathBuf};

use util::{assert_no_leaks, run, Dir};

/// `xmllint` on PATH, or why the test cannot run (a failure under CI=true).
fn xmllint() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join("xmllint")).find(|p| p.is_file())
    });
    if found.is_none() {
        let missing = "the JUnit schema test needs xmllint (apt-get install libxml2-utils; \
                       scripts/test.sh installs it)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{missing}");
        }
        eprintln!("NOT TESTED: {missing}");
    }
    found
}

/// Asserts that `xml` validates against the JUnit schema.
fn assert_valid(xmllint: &Path, dir: &Dir, what: &str, xml: &[u8]) {
    let file = dir.path().join(format!("{what}.xml"));
    std::fs::write(&file, xml).unwrap();
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/junit/JUnit.xsd");
    let out = std::process::Command::new(xmllint)
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .arg(&file)
        .output()
        .expect("run xmllint");
    assert!(
        out.status.success(),
        "{what}: not valid JUnit XML: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(xml)
    );
}

/// How many times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn junit_of_a_real_table_validates_and_names_each_cell() {
    let Some(xmllint) = xmllint() else { return };
    let dir = Dir::new();
    let (scratch, out) = (dir.scratch(), dir.out());
    let table = run(&[
        "table",
        "--fs",
        "ext2,ext4-ordered",
        "--property",
        "single-block-append",
        "--schedules",
        "sync",
        "--format",
        "junit",
        "--scratch",
        scratch.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_no_leaks(&scratch);
    assert_valid(&xmllint, &dir, "table", &table.stdout);
    let xml = String::from_utf8(table.stdout).unwrap();
    // The table JSON the run left is the truth the XML must tell.
    let grid: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("table.json")).unwrap()).unwrap();
    let cells = grid["cells"].as_array().unwrap();
    assert_eq!(count(&xml, "<testcase "), cells.len(), "{xml}");
    assert!(xml.contains(&format!(
        r#"<property name="kernel" value="{}"/>"#,
        grid["kernel"].as_str().unwrap()
    )));
    let failing = cells.iter().filter(|c| c["witness"].is_string()).count();
    assert_eq!(count(&xml, "<failure "), failing, "{xml}");
    assert_eq!(table.status.code(), Some(i32::from(failing > 0)));
    for c in cells {
        let name = format!(
            r#"classname="{}" name="{} ["#,
            c["config"].as_str().unwrap(),
            c["property"].as_str().unwrap()
        );
        assert!(xml.contains(&name), "no test case {name}: {xml}");
        if let Some(w) = c["witness"].as_str() {
            let replay = format!("bob replay {w} --state {}", c["witness_state"].as_str().unwrap());
            assert!(xml.contains(&replay), "the failure names no replay ({replay}): {xml}");
            assert!(xml.contains(&format!(r#"type="{}""#, c["verdict"].as_str().unwrap())));
        }
    }

    let table_json = out.join("table.json");
    let table_json = table_json.to_str().unwrap();
    let merged = run(&["merge", table_json, "--format", "junit"]);
    assert_valid(&xmllint, &dir, "merge", &merged.stdout);
    let merged = String::from_utf8(merged.stdout).unwrap();
    assert_eq!(count(&merged, "<testcase "), cells.len());
    assert_eq!(count(&merged, "<failure "), failing);

    // A table against itself: every cell unchanged, so every case passes.
    let diff = run(&["diff", table_json, table_json, "--format", "junit"]);
    assert_eq!(diff.status.code(), Some(0));
    assert_valid(&xmllint, &dir, "diff", &diff.stdout);
    let diff = String::from_utf8(diff.stdout).unwrap();
    assert_eq!(count(&diff, "<testcase "), cells.len(), "{diff}");
    assert!(diff.contains(r#"failures="0" errors="0""#), "{diff}");

    // `bob run` of a configuration that cannot run here is a skipped case with the reason.
    let unavailable =
        run(&["run", "--fs", "reiserfs", "--property", "single-block-append", "--format", "junit"]);
    assert_valid(&xmllint, &dir, "run", &unavailable.stdout);
    let unavailable = String::from_utf8(unavailable.stdout).unwrap();
    assert!(
        unavailable
            .contains(r#"<skipped message="unavailable: this kernel has no reiserfs driver"#),
        "{unavailable}"
    );
}
