//! The layers hold: no two files of a crate import each other, directly or through others (issue 41).
//! Read from the sources: every `use` (braces expanded) and every path written out (`crate::a::b`,
//! `super::c`), each resolved to the longest module that is a file. A folder's `mod.rs` (or a crate's
//! `lib.rs`) is its face: what it declares and hands on of its own parts is not an import, but a part
//! importing what the face defines is.

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
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: Module = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                }
                out.insert(module, path);
            }
        }
    }
    out
}

/// The text with line comments removed, cut before an inline test module.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let line = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]") {
        let at = from + at;
        let rest = out[at + "#[cfg(test)]".len()..].trim_start();
        let inline = rest
            .strip_prefix("mod ")
            .and_then(|r| r.split_once(['{', ';']))
            .is_some_and(|(name, _)| {
                let after = &rest[4 + name.len()..];
                after.starts_with('{')
            });
        if inline {
            out.truncate(at);
            break;
        }
        from = at + 1;
    }
    out
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let (Some(open), Some(close)) = (tree.find('{'), tree.rfind('}')) else {
        return vec![tree.to_string()];
    };
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
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
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

/// The files each file imports.
fn imports(files: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut graph = BTreeMap::new();
    for (module, path) in files {
        let face = path
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs");
        let code = code(&std::fs::read_to_string(path).unwrap());
        let mut deps = BTreeSet::new();
        for p in paths(&code) {
            let mut segs = p
                .split("::")
                .map(|s| s.split(" as ").next().unwrap().trim());
            let mut full: Module = Vec::new();
            match segs.next() {
                Some("crate") => {}
                Some("super" | "self") => {
                    full = module.clone();
                    if p.starts_with("super") {
                        full.pop();
                    }
                }
                _ => continue,
            }
            for s in segs {
                match s {
                    "super" => {
                        full.pop();
                    }
                    "self" | "" | "*" => {}
                    s => full.push(s.to_string()),
                }
            }
            let Some(target) = (0..=full.len())
                .rev()
                .map(|k| full[..k].to_vec())
                .find(|m| files.contains_key(m))
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

/// The check sees a circle through a grouped `use`, one through a path written out, and lets a face
/// name its own parts.
#[test]
fn a_circle_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod top;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "//! Face.\nmod b;\nmod c;\npub use b::B;\npub struct Face;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a/b.rs"),
        "use super::{c::C, Face};\npub struct B;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a/c.rs"),
        "pub struct C;\npub fn f(_: crate::top::T) {}\n#[cfg(test)]\nmod tests {\n use super::super::b::B;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("top.rs"), "pub struct T(crate::a::B);\n").unwrap();
    let files = files(src);
    let graph = imports(&files);
    let name = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Module>();
    assert!(graph[&name(&["a", "b"])].contains(&name(&["a", "c"])));
    assert!(graph[&name(&["a", "b"])].contains(&name(&["a"])));
    assert!(graph[&name(&["a"])].is_empty(), "a face's own parts");
    assert!(
        !graph[&name(&["a", "c"])].contains(&name(&["a", "b"])),
        "test module cut"
    );
    // b -> c -> top -> a (the face, which imports nothing of its parts): no circle yet.
    assert!(circles(&graph).is_empty(), "{:?}", circles(&graph));
    // top -> b closes b -> c -> top -> b.
    std::fs::write(
        src.join("top.rs"),
        "use crate::a::{b::B};\npub struct T(B);\n",
    )
    .unwrap();
    let graph = imports(&files);
    assert_eq!(
        circles(&graph),
        vec![vec![name(&["a", "b"]), name(&["a", "c"]), name(&["top"])]]
    );
}
