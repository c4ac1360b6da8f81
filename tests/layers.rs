//! The layers hold: no two files of a crate import each other, directly or through others (issue 41).
//! Read from the sources: every `use` (braces expanded) and every path written out (`crate::a::b`,
//! `super::c`), each resolved to the file that defines it, through re-exports (`pub use`) of a folder's
//! face (its `mod.rs`, or `x.rs` beside `x/`, or the crate's `lib.rs`). A folder is one concept: its face
//! may use its own parts, and they what it defines. Inline test modules are skipped; the binaries' `main.rs` and `bin/` are not
//! part of a crate's library.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source folders, from the workspace root.
const CRATES: [&str; 6] = [
    "common/src",
    "proto/src",
    "worker/src",
    "worker/gpu/src",
    "coordinator/src",
    "coordinator/command/src",
];

type Module = Vec<String>;

/// Every `.rs` file under `src`, by its module path.
fn files(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let binary = path
                .file_name()
                .is_some_and(|n| n == "main.rs" || n == "bin");
            if binary && dir == src {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: Module = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                    module.pop();
                }
                out.insert(module, path);
            }
        }
    }
    out
}

/// The text without its comments and its inline test modules (`#[cfg(test)] mod name { ... }`).
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut block = false;
    for line in text.lines() {
        let mut line = line.to_string();
        if block {
            match line.find("*/") {
                Some(at) => {
                    line = line[at + 2..].to_string();
                    block = false;
                }
                None => continue,
            }
        }
        if let Some(at) = line.find("/*") {
            match line[at..].find("*/") {
                Some(end) => line.replace_range(at..at + end + 2, ""),
                None => {
                    line.truncate(at);
                    block = true;
                }
            }
        }
        if let Some(at) = line.find("//") {
            if !line[..at].contains('"') {
                line.truncate(at);
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    while let Some((start, end)) = test_module(&out) {
        out.replace_range(start..end, "");
    }
    out
}

/// Where the first inline test module of `code` starts and ends.
fn test_module(code: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let start = from + at;
        from = start + 1;
        let rest = &code[start + "#[cfg(test)]".len()..];
        let Some(item) = rest.trim_start().strip_prefix("mod ") else {
            continue;
        };
        let Some(open) = item.find(['{', ';']) else {
            continue;
        };
        if !item[open..].starts_with('{') {
            continue;
        }
        let body = code.len() - item.len() + open;
        let mut depth = 0;
        for (i, c) in code[body..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((start, body + i + 1));
                    }
                }
                _ => {}
            }
        }
        return Some((start, code.len()));
    }
    None
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let (Some(open), Some(close)) = (tree.find('{'), tree.rfind('}')) else {
        return vec![tree.to_string()];
    };
    if close < open {
        return vec![tree.to_string()];
    }
    let (prefix, body) = (&tree[..open], &tree[open + 1..close]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p).into_iter().map(move |e| format!("{prefix}{e}")))
        .collect()
}

/// Every path of `code` that starts at `crate`, `super` or `self`.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        let tail = &rest[at + 4..];
        let Some(end) = tail.find(';') else { break };
        if before.is_none_or(|c| c == '\n' || c == ' ' || c == '\t') {
            out.extend(expand(&tail[..end]));
        }
        rest = &rest[at + 4..];
    }
    let bytes = code.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root) {
            let at = from + at;
            from = at + root.len();
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric() || matches!(bytes[at - 1], b'_' | b':'))
            {
                continue;
            }
            let len = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(code.len() - at);
            out.push(code[at..at + len].trim_end_matches(':').to_string());
        }
    }
    out
}

/// `p`, a path written in the file of `module`, as a path from the crate's root; `None`: outside the
/// crate (`std::...`, another crate).
fn absolute(module: &Module, p: &str, files: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut segs = p.split("::").map(str::trim).peekable();
    let mut full: Module = match *segs.peek()? {
        "crate" => {
            segs.next();
            Vec::new()
        }
        "self" | "super" => module.clone(),
        // A part of this module, named from it (`use lease::Ask` in a `mod.rs`).
        first if files.contains_key(&[module.as_slice(), &[first.to_string()]].concat()) => {
            module.clone()
        }
        _ => return None,
    };
    for s in segs {
        match s {
            "super" => {
                full.pop();
            }
            "self" | "" | "*" => {}
            s => full.push(s.to_string()),
        }
    }
    Some(full)
}

/// Whether `module` is a folder's face: its `mod.rs`, the crate's `lib.rs`, or `x.rs` beside a folder
/// `x/`.
fn is_face(module: &Module, files: &BTreeMap<Module, PathBuf>) -> bool {
    files
        .keys()
        .any(|m| m.len() > module.len() && m.starts_with(module))
}

/// What each face (`mod.rs`, `lib.rs`, `x.rs` beside `x/`) hands on: the name it exports, and the path of what it names.
fn reexports(files: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeMap<String, Module>> {
    let mut out = BTreeMap::new();
    for (module, path) in files {
        if !is_face(module, files) {
            continue;
        }
        let code = code(&std::fs::read_to_string(path).unwrap());
        let mut names = BTreeMap::new();
        for line in code.split(';') {
            // The statement ending here, if it is a re-export (it starts a line).
            let Some(tree) = ["pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .filter_map(|prefix| {
                    let at = line.rfind(prefix)?;
                    let starts_line = line[..at].chars().rev().find(|c| *c != ' ');
                    matches!(starts_line, None | Some('\n')).then(|| &line[at + prefix.len()..])
                })
                .next()
            else {
                continue;
            };
            for p in expand(tree) {
                let (p, alias) = match p.split_once(" as ") {
                    Some((p, alias)) => (p.trim().to_string(), Some(alias.trim().to_string())),
                    None => (p.trim().to_string(), None),
                };
                let Some(target) = absolute(module, &p, files) else {
                    continue;
                };
                let Some(name) = alias.or_else(|| target.last().cloned()) else {
                    continue;
                };
                names.insert(name, target);
            }
        }
        out.insert(module.clone(), names);
    }
    out
}

/// The file that defines what `full` names: the longest module that is a file, through the faces'
/// re-exports.
fn resolve(
    mut full: Module,
    files: &BTreeMap<Module, PathBuf>,
    faces: &BTreeMap<Module, BTreeMap<String, Module>>,
) -> Option<Module> {
    for _ in 0..16 {
        let k = (0..=full.len())
            .rev()
            .find(|&k| files.contains_key(&full[..k]))?;
        let file = full[..k].to_vec();
        match faces.get(&file).and_then(|names| names.get(full.get(k)?)) {
            Some(target) => {
                let next = [target.as_slice(), &full[k + 1..]].concat();
                if next == full {
                    return Some(file);
                }
                full = next;
            }
            None => return Some(file),
        }
    }
    None
}

/// The files each file imports.
fn imports(files: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let faces = reexports(files);
    let mut graph = BTreeMap::new();
    for (module, path) in files {
        let face = is_face(module, files);
        let code = code(&std::fs::read_to_string(path).unwrap());
        let mut deps = BTreeSet::new();
        for p in paths(&code) {
            let p = p.split(" as ").next().unwrap_or_default();
            let Some(target) =
                absolute(module, p, files).and_then(|full| resolve(full, files, &faces))
            else {
                continue;
            };
            if &target == module || (face && target.starts_with(module)) {
                continue;
            }
            deps.insert(target);
        }
        graph.insert(module.clone(), deps);
    }
    graph
}

/// The circles of `graph`: each a list of files that import each other (Tarjan's strongly connected
/// components of more than one file).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, (usize, usize)>,
        stack: Vec<&'a Module>,
        next: usize,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            self.index.insert(v, (self.next, self.next));
            self.next += 1;
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[w].1.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.stack.contains(&w) {
                    let low = self.index[w].0.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut circle = Vec::new();
                while let Some(w) = self.stack.pop() {
                    circle.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if circle.len() > 1 {
                    circle.sort();
                    self.found.push(circle);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found = Vec::new();
    for src in CRATES {
        let files = files(&root.join(src));
        assert!(files.len() > 2, "{src}: the sources were not found");
        for circle in circles(&imports(&files)) {
            found.push(format!(
                "{src}: {}",
                circle
                    .iter()
                    .map(|m| files[m]
                        .strip_prefix(root.join(src))
                        .unwrap()
                        .display()
                        .to_string())
                    .collect::<Vec<_>>()
                    .join(" <-> ")
            ));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The check follows a grouped `use`, a path written out and a face's re-export; it reads the code
/// after an inline test module but not that module; a face may use its own parts.
#[test]
fn a_circle_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("a")).unwrap();
    let write = |file: &str, text: &str| std::fs::write(src.join(file), text).unwrap();
    write(
        "lib.rs",
        "pub mod a;\npub mod top;\npub mod z;\npub use a::B;\n",
    );
    write(
        "a/mod.rs",
        "//! Face.\nmod b;\nmod c;\npub use b::B;\npub struct Face(c::C);\n",
    );
    write("a/b.rs", "use super::{c::C, Face};\npub struct B;\n");
    write(
        "a/c.rs",
        "pub struct C;\npub fn f(_: crate::top::T) {}\n#[cfg(test)]\nmod tests {\n    use super::super::b::B;\n}\npub fn g(_: crate::z::Z) {} /* crate::a::b::B */\n",
    );
    write("top.rs", "pub struct T;\n");
    write("z.rs", "pub struct Z;\n");
    let files = files(src);
    let graph = imports(&files);
    let name = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Module>();
    let (a, b, c, top, z) = (
        name(&["a"]),
        name(&["a", "b"]),
        name(&["a", "c"]),
        name(&["top"]),
        name(&["z"]),
    );
    assert!(
        graph[&b].contains(&c) && graph[&b].contains(&a),
        "{graph:?}"
    );
    assert!(graph[&a].is_empty(), "a face's own parts");
    assert!(
        graph[&c].contains(&top) && graph[&c].contains(&z),
        "{graph:?}"
    );
    assert!(
        !graph[&c].contains(&b),
        "the test module and the comment skipped"
    );
    assert!(circles(&graph).is_empty(), "{:?}", circles(&graph));
    // top names B through the crate's re-export, which names a's, which names b's: b -> c -> top -> b.
    write("top.rs", "pub struct T(crate::B);\n");
    let graph = imports(&files);
    assert!(graph[&top].contains(&b), "{graph:?}");
    assert_eq!(circles(&graph), vec![vec![b, c, top]]);
}
