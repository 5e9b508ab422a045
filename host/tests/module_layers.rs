//! The import graph of every crate of the workspace: no circle between its
//! modules, and no module importing one on a higher layer.
//!
//! Each crate declares its layers below, bottom first; every module of its
//! `src/` must be on one (a new module fails this test until it is placed).
//! A module's imports are the modules its code names outside `#[cfg(test)]`
//! items: `crate::…`, `super::…` and `self::…` paths, in `use` declarations
//! (groups expanded) and in expressions and types alike, and paths that start
//! with one of its own child modules. Comments and string literals are
//! skipped. Two things are not imports: a module declaring its children
//! (`mod x;`), and a parent re-exporting a child's items (`pub use x::…`: its
//! façade, which adds no code of its own), nor is the crate root, which only
//! declares and re-exports. An import names the deepest module of its path.
//!
//! This reads the source text rather than the compiler's resolution (as
//! `cargo-modules dependencies --acyclic` does), so it needs no tool to be
//! installed and runs in milliseconds with the other tests; it is exact for
//! the way this code base writes paths (no glob imports outside tests, no
//! `use` renaming a module).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate: where its sources are, and its layers from the bottom up. A
/// module belongs to the layer of the longest prefix that names it
/// (`folders` places `folders::engine` unless `folders::engine` is listed).
struct Crate {
    name: &'static str,
    src: &'static str,
    layers: &'static [&'static [&'static str]],
}

const CRATES: &[Crate] = &[
    Crate {
        name: "dial-handler-runtime",
        src: "../runtime/src",
        layers: &[
            &["oci"],
            &["types", "config", "metrics", "files"],
            &["bindings", "cache"],
            &["runtime"],
            &["handler"],
            &["registry"],
        ],
    },
    Crate {
        name: "dial-core",
        src: "../core/src",
        layers: &[
            // values and leaves
            &["clock", "hashing", "identity", "permissions", "resource_url", "etag", "listing_cache"],
            &["config", "metrics"],
            &["redis_conn"],
            &["buckets", "storage", "locks", "events", "documents"],
            &["folders::names", "folders::layout", "folders::marker", "folders::error", "folders::unzip", "keys"],
            &[
                "folders::node",
                "folders::policy",
                "folders::markers",
                "folders::journal",
                "folders::staging",
                "folders::validate",
                "folders::listing",
                "folders::archive",
                "folders::sweep",
                "folders::pager",
                "auth",
            ],
            &["folders::engine", "access::public_rules", "sharing"],
            &["folders", "folders::created_index", "folders::pages", "access"],
            &["audit", "consent", "apps::fields", "dependencies", "publication"],
            &["blobs::error", "blobs::trailer", "blobs::application", "apps"],
            &["blobs"],
            &["catalog"],
            &["publication::workflow", "folder_resources", "hosted_skills", "skills_index", "agent_skills"],
            &["blob_resources"],
        ],
    },
    Crate {
        name: "dial-host",
        src: "src",
        layers: &[
            &["backends", "cli", "proxy", "telemetry"],
            &[
                "http::error",
                "http::metrics",
                "http::wire::node",
                "http::wire::folders",
                "http::wire::blobs",
                "http::wire",
                "http::multipart",
                "http::respond",
                "http::subscriptions",
                "http::state",
                "http::extract",
                "http::oauth",
            ],
            &["http::mint", "http::hosted_skills", "http::hosted_skills::upload"],
            // the route modules
            &[
                "http::hosted_skills::anthropic",
                "http::hosted_skills::openai",
                "http::consent",
                "http::console",
                "http::deployments",
                "http::feed",
                "http::permissions",
                "http::publication",
                "http::resource_ops",
                "http::routes",
                "http::sharing",
                "http::skills_index",
                "http::skills_mcp",
                "http::v1",
                "http::v2",
            ],
            &["http::openapi"],
            // the router
            &["http"],
            &["listener", "server"],
            &["main"],
        ],
    },
];

#[test]
fn no_circles_and_no_upward_imports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    for krate in CRATES {
        let modules = modules(&root.join(krate.src));
        let graph = imports(&modules);
        failures.extend(upward_imports(krate, &graph));
        failures.extend(circles(krate.name, &graph));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The core and the runtime know no HTTP status, and the host turns errors
/// into responses in one place: `http::error` is the only module with an
/// `IntoResponse` impl (ARCHITECTURE.md, "Invariants of `dial-host`").
#[test]
fn no_status_codes_outside_the_host() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    for krate in CRATES {
        for (module, source) in modules(&root.join(krate.src)) {
            let words: Vec<&str> =
                source.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).collect();
            if krate.name != "dial-host" && words.contains(&"StatusCode") {
                failures.push(format!("{}: {module} names StatusCode", krate.name));
            }
            // `impl [axum::response::]IntoResponse for …` (not `-> impl IntoResponse`).
            let renders = words
                .windows(2)
                .enumerate()
                .any(|(at, pair)| pair == ["IntoResponse", "for"] && words[at.saturating_sub(3)..at].contains(&"impl"));
            if renders && !(krate.name == "dial-host" && module == "http::error") {
                failures.push(format!("{}: {module} renders a response of its own (impl IntoResponse)", krate.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Most lines of a source file before its tests: a file past it mixes
/// concerns that want modules of their own.
const MAX_SOURCE_LINES: usize = 800;

#[test]
fn no_source_file_is_over_800_lines_before_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    for krate in CRATES {
        let mut files = Vec::new();
        collect(&root.join(krate.src), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines = text.lines().take_while(|line| line.trim() != "#[cfg(test)]").count();
            if lines > MAX_SOURCE_LINES {
                failures.push(format!("{}: {lines} lines before its tests", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every module of a crate: its path (`folders::engine`; the crate root is
/// `""`, a binary's `main`) and its source, with comments, strings and
/// `#[cfg(test)]` items removed.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut files = Vec::new();
    collect(src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(src).unwrap().with_extension("");
            let mut segments: Vec<String> =
                relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            if segments.last().is_some_and(|last| last == "mod" || last == "lib") {
                segments.pop();
            }
            let text = std::fs::read_to_string(&file).unwrap();
            (segments.join("::"), without_tests(&code_only(&text)))
        })
        .collect()
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The module each module imports (see the module docs), the root excluded.
fn imports(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<&str> = modules.keys().map(String::as_str).collect();
    let mut graph = BTreeMap::new();
    for (module, code) in modules {
        if module.is_empty() {
            continue;
        }
        let children: BTreeSet<&str> = known
            .iter()
            .filter_map(|other| other.strip_prefix(module.as_str())?.strip_prefix("::"))
            .filter(|rest| !rest.contains("::"))
            .collect();
        let mut targets = BTreeSet::new();
        for (path, facade) in paths(code) {
            let Some(absolute) = resolve(module, &path, &children) else { continue };
            let Some(target) = deepest(&known, &absolute) else { continue };
            let descendant = target.starts_with(&format!("{module}::"));
            if target != module && !target.is_empty() && !(facade && descendant) {
                targets.insert(target.to_string());
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

/// The paths a module's code names, each with whether it is in a `pub use`.
fn paths(code: &str) -> Vec<(Vec<String>, bool)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let at_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        if at_word && code[i..].starts_with("use ") {
            let end = code[i..].find(';').map_or(code.len(), |e| i + e);
            let facade = code[..i].trim_end().ends_with("pub") || code[..i].trim_end().ends_with(')');
            let tree: String = code[i + 4..end].chars().filter(|c| !c.is_whitespace()).collect();
            for path in expand(&tree) {
                found.push((path.split("::").map(str::to_owned).collect(), facade));
            }
            i = end;
            continue;
        }
        if at_word && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || code[i..].starts_with("::"))
            {
                i += if code[i..].starts_with("::") { 2 } else { 1 };
            }
            let path = code[start..i].trim_end_matches(':');
            if path.contains("::") {
                found.push((path.split("::").map(str::to_owned).collect(), false));
            }
            continue;
        }
        i += 1;
    }
    found
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else { return vec![tree.to_string()] };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.len() - 1];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (index, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).flat_map(expand).map(|p| format!("{prefix}{p}")).collect()
}

/// A path as named in `module`, made absolute (segments from the crate
/// root); `None` for a path into another crate or a local item.
fn resolve(module: &str, path: &[String], children: &BTreeSet<&str>) -> Option<Vec<String>> {
    let mut current: Vec<String> =
        if module.is_empty() { Vec::new() } else { module.split("::").map(str::to_owned).collect() };
    let first = path.first()?.as_str();
    let rest = match first {
        "crate" => {
            current.clear();
            &path[1..]
        }
        "self" => &path[1..],
        "super" => {
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                current.pop()?;
                rest = &rest[1..];
            }
            rest
        }
        child if children.contains(child) => path,
        _ => return None,
    };
    current.extend(rest.iter().cloned());
    Some(current)
}

/// The deepest known module a path goes through.
fn deepest<'a>(known: &BTreeSet<&'a str>, path: &[String]) -> Option<&'a str> {
    (0..=path.len()).rev().find_map(|n| known.get(path[..n].join("::").as_str()).copied())
}

/// The layer a module is on: the longest listed prefix naming it.
fn layer_of(krate: &Crate, module: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (index, layer) in krate.layers.iter().enumerate() {
        for prefix in *layer {
            let matches = module == *prefix || module.starts_with(&format!("{prefix}::"));
            if matches && best.is_none_or(|(length, _)| prefix.len() > length) {
                best = Some((prefix.len(), index));
            }
        }
    }
    best.map(|(_, index)| index)
}

fn upward_imports(krate: &Crate, graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut failures = Vec::new();
    for (module, targets) in graph {
        let Some(from) = layer_of(krate, module) else {
            failures.push(format!("{}: module {module} is on no layer (add it to module_layers.rs)", krate.name));
            continue;
        };
        for target in targets {
            if let Some(to) = layer_of(krate, target).filter(|to| *to > from) {
                failures.push(format!("{}: {module} (layer {from}) imports {target} (layer {to})", krate.name));
            }
        }
    }
    failures
}

/// Every import circle, each named once by the modules on it.
fn circles(crate_name: &str, graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    // Tarjan's strongly connected components: a component of more than one
    // module is a circle.
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(state: &mut State<'a>, module: &'a str) {
        let next = state.index.len();
        state.index.insert(module, next);
        state.low.insert(module, next);
        state.stack.push(module);
        state.on_stack.insert(module);
        for target in state.graph.get(module).into_iter().flatten() {
            let target = target.as_str();
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[module].min(state.low[target]);
                state.low.insert(module, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[module].min(state.index[target]);
                state.low.insert(module, low);
            }
        }
        if state.low[module] == state.index[module] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top);
                if top == module {
                    break;
                }
            }
            state.components.push(component);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for module in graph.keys() {
        if !state.index.contains_key(module.as_str()) {
            visit(&mut state, module);
        }
    }
    state
        .components
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|mut component| {
            component.sort();
            format!("{crate_name}: import circle between {}", component.join(", "))
        })
        .collect()
}

/// The code of a file with comments and the contents of string and char
/// literals blanked (their lines kept, so nothing else moves).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || (next == Some('#') && raw_string_start(&chars, i + 1))) {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            i += 2 + hashes;
            let closing: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            while i < chars.len() && !chars[i..].iter().collect::<String>().starts_with(&closing) {
                i += 1;
            }
            i += closing.len();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn raw_string_start(chars: &[char], from: usize) -> bool {
    chars[from..].iter().find(|c| **c != '#') == Some(&'"')
}

/// The code without `#[cfg(test)]` items (a test module, a test-only
/// function or import).
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let semicolon = rest.find(';').unwrap_or(rest.len());
        let brace = rest.find('{').unwrap_or(rest.len());
        if semicolon < brace {
            rest = &rest[(semicolon + 1).min(rest.len())..];
            continue;
        }
        let mut depth = 0;
        let mut end = rest.len();
        for (index, c) in rest.char_indices().skip(brace) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = index + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
