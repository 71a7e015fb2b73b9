//! The layering rule of ARCHITECTURE.md, checked: a module uses only modules of lower
//! layers, in bob-core's top-level modules and in bob-cli's; `check`'s submodules among
//! themselves and researchfs' modules have no circle.
//!
//! Read from the sources, not the compiler: a module's mentions of `crate::X` (for
//! submodules of `check`, of `super::X`, where X is a submodule or an item `check/mod.rs`
//! imports from one, to export it or for its submodules). Every line of a file is read;
//! comments, the contents of string literals and test code (an item under
//! `#[cfg(test)]`, `tests.rs` files) do not count: a test may use what it checks from
//! anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// bob-core's top-level modules, lowest layer first; a module may use only modules of
/// lower layers.
const LAYERS: &[&[&str]] = &[
    &["host", "files"],
    &["device"],
    &["vm", "trace"],
    &["pm", "fs"],
    &["crash", "record"],
    &["image"],
    &["check"],
    &["report"],
    &["output"],
    &["run"],
    &["bench"],
];

/// bob-cli's modules, lowest layer first (`main`, above them all, declares them).
/// `commands/` is one module here; that no command imports another is checked apart.
const CLI_LAYERS: &[&[&str]] = &[
    &["color", "error", "progress", "signals"],
    &["exit", "limits", "print"],
    &["cli"],
    &["options"],
    &["guest"],
    &["commands"],
];

/// Edges the layer order does not allow yet, each with why it is still there (none today).
const KNOWN: &[(&str, &str, &str)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code, whole, without comments, without the contents of string and character
/// literals, and without its test code (each item under `#[cfg(test)]`: an inline `mod`
/// to its closing brace, a `mod tests;` line, a test-only `fn` or `use`).
fn code_of(path: &Path) -> String {
    without_tests(&lexed(&std::fs::read_to_string(path).unwrap()))
}

/// `code` without the items under `#[cfg(test)]`.
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        rest = &rest[at + "#[cfg(test)]".len()..];
        rest = &rest[item_end(rest)..];
    }
    out.push_str(rest);
    out
}

/// Where the item at the start of `code` ends: after its `;` when that comes before any
/// `{`, else after the brace that closes its first `{`.
fn item_end(code: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in code.char_indices() {
        match c {
            ';' if depth == 0 => return i + 1,
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// `text` with its comments removed and its string and character literals emptied (`""`,
/// `''`), so that neither a word in a comment or a string nor a brace in one counts.
/// Lines are kept.
fn lexed(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r'
            && (at(i + 1) == '"' || at(i + 1) == '#')
            && !at(i.wrapping_sub(1)).is_alphanumeric()
            && at(i.wrapping_sub(1)) != '_'
        {
            // A raw string: r"...", r#"..."#.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if at(i + 1 + hashes) != '"' {
                out.push(c);
                i += 1;
                continue;
            }
            let close: Vec<char> =
                std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            i += 2 + hashes;
            while i < chars.len() && !chars[i..].starts_with(&close) {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A character literal ('x', '\n', '\'', '\u{..}'); a lifetime ('a) is code.
            i += if at(i + 1) == '\\' { 3 } else { 2 };
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("''");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The names after each `prefix` in `code`: `prefix::name`, or each item's first name in
/// `prefix::{a, b::c, d}`.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let mut names = BTreeSet::new();
    let pattern = format!("{prefix}::");
    for (at, _) in code.match_indices(&pattern) {
        // Only a path that starts here: not `foo::crate::x` nor `not_super::x`.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + pattern.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            names.insert(ident(&item));
        } else {
            names.insert(ident(rest));
        }
    }
    names.remove("");
    names
}

/// Module `from` uses module `to`, for each pair.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The graph of the top-level modules of the crate whose sources are in `src`.
fn top_level_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module = |path: &Path| -> String {
        let rel = path.strip_prefix(src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        first.trim_end_matches(".rs").to_owned()
    };
    let modules: BTreeSet<String> =
        files.iter().map(|f| module(f)).filter(|m| m != "lib" && m != "main").collect();
    let mut graph = Graph::new();
    for file in &files {
        let from = module(file);
        if !modules.contains(&from) || file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        for to in names_after(&code_of(file), "crate") {
            if to != from && modules.contains(&to) {
                graph.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    graph
}

/// The graph of `check`'s submodules: `super::X` for a submodule X, or for an item
/// `check/mod.rs` re-exports from X.
fn check_graph(src: &Path) -> Graph {
    let dir = src.join("check");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let name = |p: &Path| p.file_stem().unwrap().to_string_lossy().into_owned();
    let submodules: BTreeSet<String> =
        files.iter().map(|f| name(f)).filter(|m| m != "mod" && m != "tests").collect();
    // Items re-exported by mod.rs, by the submodule they come from.
    let root = code_of(&dir.join("mod.rs"));
    let mut home: BTreeMap<String, String> = BTreeMap::new();
    for statement in root.split(';') {
        let statement = statement.trim();
        let Some(path) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
            .or_else(|| statement.strip_prefix("use "))
        else {
            continue;
        };
        let Some((from, items)) = path.split_once("::") else { continue };
        if !submodules.contains(from) {
            continue;
        }
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            home.insert(item.trim().to_owned(), from.to_owned());
        }
    }
    let mut graph = Graph::new();
    for file in &files {
        let from = name(file);
        if !submodules.contains(&from) {
            continue;
        }
        for used in names_after(&code_of(file), "super") {
            let to = if submodules.contains(&used) { Some(&used) } else { home.get(&used) };
            if let Some(to) = to.filter(|to| **to != from) {
                graph.entry(from.clone()).or_default().insert(to.clone());
            }
        }
    }
    graph
}

/// A circle of `graph`, if there is one, as the modules along it.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn without_known(mut graph: Graph) -> Graph {
    for (from, to, _) in KNOWN {
        if let Some(edges) = graph.get_mut(*from) {
            edges.remove(*to);
        }
    }
    graph
}

fn src(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src")
}

/// The edges of `graph` against `layers` (each module uses only modules of lower layers).
fn against(graph: &Graph, layers: &[&[&str]]) -> Vec<String> {
    let layer = |m: &str| layers.iter().position(|l| l.contains(&m));
    for module in graph.keys().chain(graph.values().flatten()) {
        assert!(layer(module).is_some(), "{module}: not in the layers (add it where it belongs)");
    }
    let mut wrong = Vec::new();
    for (from, tos) in graph {
        for to in tos {
            if layer(to) >= layer(from) {
                wrong.push(format!("{from} -> {to}"));
            }
        }
    }
    wrong
}

#[test]
fn bob_core_modules_follow_the_layer_order() {
    let graph = top_level_graph(&src("bob-core"));
    let wrong = against(&without_known(graph.clone()), LAYERS);
    assert!(wrong.is_empty(), "imports against the layer order: {wrong:?}");
    // An allowance that is no longer needed goes.
    for (from, to, why) in KNOWN {
        assert!(graph.get(*from).is_some_and(|t| t.contains(*to)), "{from} -> {to} ({why}): gone");
    }
    assert_eq!(circle(&without_known(graph)), None);
}

#[test]
fn bob_cli_modules_follow_the_layer_order() {
    let graph = top_level_graph(&src("bob-cli"));
    assert!(graph.get("commands").is_some_and(|t| t.contains("print")), "{graph:?}");
    let wrong = against(&graph, CLI_LAYERS);
    assert!(wrong.is_empty(), "imports against the layer order: {wrong:?}");
    let mut files = Vec::new();
    rust_files(&src("bob-cli").join("commands"), &mut files);
    let stem = |f: &PathBuf| f.file_stem().unwrap().to_string_lossy().into_owned();
    let commands: BTreeSet<String> = files.iter().map(stem).filter(|s| s != "mod").collect();
    for file in &files {
        let code = code_of(file);
        let used = names_after(&code, "super").into_iter().chain(names_after(&code, "commands"));
        let others: Vec<String> =
            used.filter(|n| commands.contains(n) && *n != stem(file)).collect();
        assert!(others.is_empty(), "{}: imports a command: {others:?}", file.display());
    }
}

#[test]
fn check_submodules_have_no_circle() {
    let graph = check_graph(&src("bob-core"));
    // The parse found the engine's use of the state check (through a re-export).
    assert!(graph.get("engine").is_some_and(|t| t.contains("state")), "{graph:?}");
    assert_eq!(circle(&graph), None, "{graph:?}");
}

#[test]
fn researchfs_modules_have_no_circle() {
    let graph = top_level_graph(&src("researchfs"));
    assert!(graph.get("fs").is_some_and(|t| t.contains("design")), "{graph:?}");
    assert_eq!(circle(&graph), None, "{graph:?}");
}

#[test]
fn a_circle_is_found() {
    let graph: Graph = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(f, t)| (f.to_owned(), BTreeSet::from([t.to_owned()])))
        .collect();
    assert_eq!(circle(&graph).map(|c| c.len()), Some(4));
    let names = names_after("use crate::{a::b, c};\nlet x = crate::d::e; not_crate::f", "crate");
    assert_eq!(names, BTreeSet::from(["a".into(), "c".into(), "d".into()]));
}

/// A test module, inline or in its own file, hides neither the code after it nor a
/// brace in a string or a comment; words in comments and strings are not imports.
#[test]
fn the_whole_file_is_read_except_test_code_comments_and_strings() {
    let text = r#"use crate::a;
#[cfg(test)]
mod tests;
fn f() { let s = "}{ crate::b"; let c = '}'; let q = '\''; } // crate::c
#[cfg(test)]
mod more {
    use crate::d;
    fn g<'x>(s: &'x str) -> &'x str { let t = r"{"; s } /* crate::e { */
}
fn h() { crate::f::x(); }
#[cfg(test)]
use crate::g;
"#;
    let code = without_tests(&lexed(text));
    let names = names_after(&code, "crate");
    assert_eq!(names, BTreeSet::from(["a".into(), "f".into()]), "{code}");
}

/// The lexer reads every source file to balanced braces: no string, character literal or
/// comment is taken for code or code for one (which would hide imports after it).
#[test]
fn every_source_file_lexes_to_balanced_braces() {
    for krate in ["bob-core", "bob-cli", "workloads", "researchfs"] {
        let mut files = Vec::new();
        rust_files(&src(krate), &mut files);
        for file in files {
            let code = lexed(&std::fs::read_to_string(&file).unwrap());
            let mut depth = 0i64;
            for c in code.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                assert!(depth >= 0, "{}: a brace closes nothing", file.display());
            }
            assert_eq!(depth, 0, "{}: braces left open", file.display());
        }
    }
}
