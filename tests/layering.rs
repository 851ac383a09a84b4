//! The layering test: reads every source file (`src/**/*.rs`, `migrations/*.rs`) with a Rust
//! parser and fails when an invariant of the layers breaks. Comments, doc links and strings do
//! not count; test-only code (`#[cfg(test)]`) is not checked. Paths inside a macro's body
//! (`vec![..]`, `format!(..)`) count, read from its tokens; so do `use .. as` and
//! `extern crate .. as` aliases.
//!
//! The layers, lowest first (ARCHITECTURE.md, "Layers"); a module may name its own layer and
//! those below, never one above:
//!
//! 0. `usage`, `failure`, `invalid`, `status` (leaves: they name nothing of the crate), `security`,
//!    `logging`.
//! 1. `codex` (pure): `codex::argv`, `codex::events`, `codex::home`, `codex::rollout`; and
//!    `plan`: what a caller asks of a turn in the bridge's terms; `approval` (its door, the
//!    question, the answerer, the message and the rules that decline without asking): what a
//!    person is asked and may decide. `codex` and `mcp` both name them.
//! 2. `codex::process` (the one spawner), `codex::app_server`, `store` (the one owner of sled),
//!    and the approval room's parts beside them: `approval::from_codex` (codex's requests read),
//!    `approval::screen` (a turn's question screened), `approval::page` (the loopback page).
//! 3. `config`: operator settings.
//! 4. `error`: the crate error, which folds the error enums of the layers below it (each of
//!    them returns its own); it is named only from above.
//! 5. `actors`: the owners of sessions and processes; `turn`: one codex turn, whoever asks;
//!    `calls`: what the MCP layer and the actors exchange.
//! 6. `mcp`: the protocol layer; `approval::ask`: the channels that ask a person through it.
//! 7. `hub`: many processes on one store (its own `HubError` carries the crate error).
//! 8. `cli`, then `main` (the binary, which names the library as a crate).
//!
//! The other invariants:
//! - pure: `security/*`, `plan/*`, `codex/argv/*`, `codex/events.rs`, `codex/applied.rs`,
//!   `approval/question.rs`, `approval/message.rs` and `approval/unasked.rs` name no `tokio`,
//!   `std::process`, `std::fs`, `std::env` or `sled`;
//! - spawn: only `codex/process*` names `std::process::Command` or `tokio::process`;
//! - approval room: no file outside `approval/` names an elicitation of rmcp's (asking a person
//!   is the room's: `ElicitRequest`, `ElicitRequestParams`, `ElicitResult`, `ElicitationAction`,
//!   `CreateElicitationRequestParams`, `ElicitationSchema`) or declines a question without
//!   asking (`DecisionRecord::unasked`, `unasked::`);
//! - mcp: `mcp/*` and `approval/ask/*` name nothing of codex's argv or app-server protocol (`codex::argv`,
//!   `codex::app_server`: it reads a call into `plan` and `question` types) and no process or
//!   store type (`codex::process`, `SpawnSpec`,
//!   `TurnOutcome`, `store::`, `SessionRecord`, `Store`) and reads no `.store` field (the
//!   store behind a handle such as `bridge.shared()`);
//! - calls: `calls/mod.rs`, the requests and answers the MCP layer exchanges with the
//!   actors, holds to the mcp rule too (a turn's outcome and a session's record become its
//!   answers in `calls/report.rs`);
//! - stdout: it is the MCP channel; only `cli/entry.rs` names `std::io::stdout` or `print!`/
//!   `println!` (the `sessions` and `doctor` subcommands' output: the server's stdout is tokio's,
//!   handed to `server::run` as its channel);
//! - sled: only `store/*` (with `migrations/`) names `sled`;
//! - inflight: only `actors/inflight.rs` (and `store/*`) writes an `inflight` record
//!   (`.put_inflight()`, `.clear_inflight()`, `.mark_inflight_client_closed()`);
//! - leaves: `usage`, `failure`, `invalid` and `status` name nothing of the crate;
//! - glob: no file imports every name of a module of the crate (`use super::x::*`), and none
//!   names the whole crate at once (`use crate::*`), which would hide what it
//!   names from every other rule;
//! - own errors: `security/*`, `codex/*` (the spawner included), `confine.rs`, `config*` and
//!   `store/*` (with `migrations/`) return their own errors and name no `crate::error` (the
//!   layer order says so too; this rule names the reason);
//! - long functions: no function of `src/` or `migrations/` (test code aside) runs over
//!   `LONG_FN_LINES` lines without a doc comment that says why it is one piece ("One piece");
//! - layout: `src/lib.rs`'s layout list names every top-level module (`pub mod` or `mod`) in
//!   the order they are declared, and nothing else;
//! - cycles: no import cycle between files. The file graph has an edge from a file to each
//!   file holding a module it names a path into (`crate::a::b::X` is an edge to `a/b.rs`, or
//!   to `a.rs`/`a/mod.rs` when `b` is an item there, re-exports included); a cycle is printed
//!   as its files, then each edge inside it with the name that makes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The layers, lowest first: module path prefixes.
const LAYERS: &[&[&str]] = &[
    &[
        "failure", "invalid", "usage", "status", "security", "logging",
    ],
    &[
        "codex",
        "codex::applied",
        "codex::argv",
        "codex::events",
        "codex::home",
        "codex::rollout",
        "plan",
        "approval",
    ],
    &[
        "codex::process",
        "codex::app_server",
        "store",
        "confine",
        "approval::from_codex",
        "approval::screen",
        "approval::page",
    ],
    &["config"],
    &["error", "Error", "Result"],
    &["actors", "turn", "calls"],
    &["mcp", "approval::ask"],
    &["hub"],
    &["cli", "server", "main"],
];

/// The leaves: modules that name nothing of the crate (the types every layer shares).
const LEAVES: &[&str] = &["usage", "failure", "invalid", "status"];

/// Layers that return their own errors (`security`, `codex::argv` and `confine`: `invalid`'s;
/// `codex::process`: `ProcessError`; `codex::app_server`: `ClientError`; `config`:
/// `ConfigError`; `store`: `StoreError`; `approval::page`: `PageError`), never the crate
/// error.
const OWN_ERRORS: &[&str] = &[
    "security",
    "plan",
    "approval::question",
    "approval::message",
    "approval::unasked",
    "approval::from_codex",
    "approval::page",
    "store",
    "codex",
    "confine",
    "config",
];

fn layer_of(module: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None; // (prefix length, layer)
    for (layer, prefixes) in LAYERS.iter().enumerate() {
        for p in *prefixes {
            let matches = module == *p || module.starts_with(&format!("{p}::"));
            if matches && best.is_none_or(|(len, _)| p.len() > len) {
                best = Some((p.len(), layer));
            }
        }
    }
    best.map(|(_, layer)| layer)
}

fn starts_with(path: &str, prefix: &str) -> bool {
    path == prefix || path.starts_with(&format!("{prefix}::"))
}

/// The module path of a source file: `src/codex/process/spawn.rs` is `codex::process::spawn`,
/// `src/store/mod.rs` is `store`, `migrations/v1.rs` is `store::migrations::v1`.
fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).expect("under the root");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.first().map(String::as_str) {
        Some("src") => {
            parts.remove(0);
        }
        Some("migrations") => parts.insert(0, "store".into()),
        _ => {}
    }
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    parts.join("::")
}

/// Every path one file names outside test-only code, with `use` aliases expanded and
/// `crate::`/`super::`/`self::` made absolute (`crate::...`).
struct Names {
    /// The file's module path, without `crate`.
    module: Vec<String>,
    aliases: BTreeMap<String, String>,
    raw: Vec<Vec<String>>,
    /// The prefixes of glob imports (`use a::b::*`).
    globs: Vec<Vec<String>>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().is_ident("cfg") && {
            let tokens = a
                .meta
                .require_list()
                .map(|l| l.tokens.to_string())
                .unwrap_or_default();
            tokens == "test"
        }) || a.path().is_ident("test")
    })
}

impl Names {
    fn absolute(&self, segments: &[String]) -> Vec<String> {
        let Some(first) = segments.first() else {
            return vec![];
        };
        let mut base: Vec<String> = match first.as_str() {
            "crate" => return segments.to_vec(),
            "self" => {
                let mut m = self.module.clone();
                m.insert(0, "crate".into());
                m.extend(segments[1..].iter().cloned());
                return m;
            }
            "super" => {
                // `super` of `a::b` (file a/b.rs, or a/b/mod.rs) is `a`
                let mut m = self.module.clone();
                let mut rest = segments;
                while rest.first().map(String::as_str) == Some("super") {
                    m.pop();
                    rest = &rest[1..];
                }
                m.insert(0, "crate".into());
                m.extend(rest.iter().cloned());
                return m;
            }
            other => match self.aliases.get(other) {
                Some(full) => full.split("::").map(str::to_owned).collect(),
                None => vec![other.to_owned()],
            },
        };
        base.extend(segments[1..].iter().cloned());
        base
    }

    fn collect_use(&mut self, prefix: Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                let mut next = prefix;
                next.push(p.ident.to_string());
                self.collect_use(next, &p.tree);
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix;
                let name = n.ident.to_string();
                if name != "self" {
                    full.push(name.clone());
                }
                let alias = full.last().cloned().unwrap_or(name);
                self.record_use(alias, full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix;
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.record_use(r.rename.to_string(), full);
            }
            syn::UseTree::Glob(_) => {
                self.globs.push(prefix.clone());
                self.raw.push(prefix);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.collect_use(prefix.clone(), t);
                }
            }
        }
    }

    fn record_use(&mut self, alias: String, full: Vec<String>) {
        let abs = self.absolute(&full);
        self.aliases.insert(alias, abs.join("::"));
        self.raw.push(full);
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            _ => &[],
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    /// `pub(super)`, `pub(in crate::a)`: a visibility names no item, so it makes no edge.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.collect_use(vec![], &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.raw
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    /// A field read (`bridge.shared().store`) names no type: recorded as `.field`, so that the
    /// mcp rule can refuse a read of the store through a handle.
    fn visit_expr_field(&mut self, f: &'ast syn::ExprField) {
        if let syn::Member::Named(name) = &f.member {
            self.raw.push(vec![format!(".{name}")]);
        }
        syn::visit::visit_expr_field(self, f);
    }

    /// A method call counts as `.name()`: the inflight rule refuses a write of the store's
    /// `inflight` records outside their one writer.
    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        self.raw.push(vec![format!(".{}()", m.method)]);
        syn::visit::visit_expr_method_call(self, m);
    }

    /// A macro's body is tokens, not syntax (`vec![std::process::Command::new(..)]`, or
    /// `tokio::select!`'s arms): every `a::b::c` in it counts as a path.
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.token_paths(m.tokens.clone());
    }

    /// `extern crate tokio as t;` makes `t` a name of `tokio`.
    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        let name = e.ident.to_string();
        let alias = e
            .rename
            .as_ref()
            .map_or(name.clone(), |(_, r)| r.to_string());
        self.record_use(alias, vec![name]);
    }
}

impl Names {
    /// Every `a::b::c` (and lone name) in a token stream, nested groups included.
    fn token_paths(&mut self, tokens: proc_macro2::TokenStream) {
        use proc_macro2::{Spacing, TokenTree};
        let mut path: Vec<String> = vec![];
        let mut joined = false; // the last tokens were `::`
        let mut colon = false; // the last token was the first `:` of `::`
        for t in tokens {
            match t {
                TokenTree::Ident(i) => {
                    if !joined && !path.is_empty() {
                        self.raw.push(std::mem::take(&mut path));
                    }
                    path.push(i.to_string());
                    joined = false;
                    colon = false;
                }
                TokenTree::Punct(p) if p.as_char() == ':' => {
                    if colon {
                        joined = true;
                        colon = false;
                    } else {
                        colon = p.spacing() == Spacing::Joint;
                    }
                }
                other => {
                    if !path.is_empty() {
                        self.raw.push(std::mem::take(&mut path));
                    }
                    (joined, colon) = (false, false);
                    if let TokenTree::Group(g) = other {
                        self.token_paths(g.stream());
                    }
                }
            }
        }
        if !path.is_empty() {
            self.raw.push(path);
        }
    }
}

/// What one file names, expanded.
fn names_in(root: &Path, file: &Path) -> (String, BTreeSet<String>) {
    let module = module_of(root, file);
    let text = std::fs::read_to_string(file).expect("readable source");
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let module_parts: Vec<String> = if module.is_empty() || module == "lib" {
        vec![]
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    let mut names = Names {
        module: module_parts,
        aliases: BTreeMap::new(),
        raw: vec![],
        globs: vec![],
    };
    // uses first (they may come after the code that relies on them), then everything
    for item in &ast.items {
        match item {
            syn::Item::Use(u) if !is_test_only(&u.attrs) => names.visit_item_use(u),
            syn::Item::ExternCrate(e) if !is_test_only(&e.attrs) => {
                names.visit_item_extern_crate(e)
            }
            _ => {}
        }
    }
    names.raw.clear();
    names.globs.clear();
    names.visit_file(&ast);
    let globs = names
        .globs
        .iter()
        .map(|p| format!("glob:{}", names.absolute(p).join("::")));
    let expanded = names
        .raw
        .iter()
        .map(|p| names.absolute(p).join("::"))
        .filter(|p| !p.is_empty())
        .chain(globs)
        .collect();
    (module, expanded)
}

/// Every source file the checks read: `src/**/*.rs` and `migrations/*.rs`, sorted.
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![];
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("migrations"), &mut files);
    files.sort();
    assert!(files.len() > 20, "the sources were not found");
    files
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let path = e.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The violations of one file, as `file: rule: what`.
fn check_file(display: &str, module: &str, names: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut flag = |rule: &str, what: String| {
        out.insert(format!("{display}: {rule}: {what}"));
    };
    let pure = starts_with(module, "security")
        || starts_with(module, "plan")
        || starts_with(module, "codex::argv")
        || module == "codex::events"
        || module == "codex::applied"
        || [
            "approval::question",
            "approval::message",
            "approval::unasked",
        ]
        .contains(&module);
    let spawner = starts_with(module, "codex::process");
    let in_mcp = starts_with(module, "mcp") || starts_with(module, "approval::ask");
    let in_approval = starts_with(module, "approval");
    let in_store = starts_with(module, "store");
    let own_layer = layer_of(module);
    let own_errors = OWN_ERRORS.iter().any(|m| starts_with(module, m));
    let leaf = LEAVES.contains(&module);
    for name in names {
        if name == "crate" {
            // `use crate::*` (or a `super::*` that reaches the root) names every module at once
            flag("glob", "names the whole crate (a glob of its root)".into());
        }
        if let Some(g) = name.strip_prefix("glob:")
            && starts_with(g, "crate")
            && g != "crate"
        {
            // a glob of a module of the crate hides which of its names a file uses
            flag("glob", format!("imports every name of {g}"));
        }
        if leaf && starts_with(name, "crate") && !starts_with(name, &format!("crate::{module}")) {
            flag("leaf", format!("names {name}"));
        }
        if own_errors
            && ["crate::error", "crate::Error", "crate::Result"]
                .iter()
                .any(|p| starts_with(name, p))
        {
            flag("own errors", format!("names {name}"));
        }
        if pure
            && ["tokio", "std::process", "std::fs", "std::env", "sled"]
                .iter()
                .any(|p| starts_with(name, p))
        {
            flag("pure", format!("names {name}"));
        }
        if !spawner
            && ["std::process::Command", "tokio::process"]
                .iter()
                .any(|p| starts_with(name, p))
        {
            flag("spawn", format!("names {name}"));
        }
        if in_mcp || module == "calls" {
            let segments: Vec<&str> = name.split("::").collect();
            let crate_path = segments.first() == Some(&"crate");
            let named = |t: &str| segments.contains(&t) && (crate_path || segments.len() == 1);
            if starts_with(name, "crate::codex::process")
                || starts_with(name, "crate::codex::argv")
                || starts_with(name, "crate::codex::app_server")
                || starts_with(name, "crate::store")
                || name == ".store"
                || ["SpawnSpec", "TurnOutcome", "SessionRecord"]
                    .iter()
                    .any(|t| named(t))
            {
                flag(
                    if in_mcp { "mcp" } else { "calls" },
                    format!("names {name}"),
                );
            }
        }
        if !in_approval {
            let segments: Vec<&str> = name.split("::").collect();
            let asks = starts_with(name, "rmcp")
                && [
                    "ElicitRequest",
                    "ElicitRequestParams",
                    "ElicitResult",
                    "ElicitationAction",
                    "CreateElicitationRequestParams",
                    "ElicitationSchema",
                ]
                .iter()
                .any(|t| segments.contains(t));
            let declines = name.contains("DecisionRecord::unasked")
                || starts_with(name, "crate::approval::unasked")
                || segments.first() == Some(&"unasked");
            if asks || declines {
                flag(
                    "approval room",
                    format!(
                        "names {name} outside approval/ (asking a person, or declining without asking, is the room's)"
                    ),
                );
            }
        }
        if !in_store
            && module != "actors::inflight"
            && [
                ".put_inflight()",
                ".clear_inflight()",
                ".mark_inflight_client_closed()",
            ]
            .contains(&name.as_str())
        {
            flag("inflight", format!("writes an inflight record: {name}"));
        }
        if module != "cli::entry"
            && (starts_with(name, "std::io::stdout") || name == "println" || name == "print")
        {
            flag("stdout", format!("names {name}: stdout is the MCP channel"));
        }
        if !in_store && starts_with(name, "sled") {
            flag("sled", format!("names {name}"));
        }
        if let (Some(rest), Some(own)) = (name.strip_prefix("crate::"), own_layer)
            && let Some(target) = layer_of(rest)
            && target > own
        {
            flag(
                "layer order",
                format!("names {name} (layer {target}) from {module} (layer {own})"),
            );
        }
    }
    out
}

/// The file a source file's module lives in, by module path (`codex::process` is
/// `src/codex/process/mod.rs`, the crate root `""` is `src/lib.rs`).
fn files_by_module(root: &Path, files: &[PathBuf]) -> BTreeMap<String, String> {
    files
        .iter()
        .filter_map(|f| {
            let module = module_of(root, f);
            let display = f.strip_prefix(root).unwrap().display().to_string();
            match module.as_str() {
                "main" => None, // the binary: another crate, which names the library by name
                "lib" => Some((String::new(), display)),
                _ => Some((module, display)),
            }
        })
        .collect()
}

/// The file a name of `module` points into, when it is one of the crate's: the file of the
/// longest module prefix of the absolute path. A name through a re-export (`crate::hub::HubError`,
/// defined in `hub/error.rs`, re-exported by `hub/mod.rs`) points to the file that re-exports
/// it, which points on to where it is defined. A name relative to a child module (`kill::x` in
/// `process/mod.rs`, the 2018 edition's uniform paths) counts as that child's.
fn file_of_name<'a>(
    module: &str,
    name: &str,
    modules: &'a BTreeMap<String, String>,
) -> Option<&'a String> {
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_owned()
        } else {
            format!("{a}::{b}")
        }
    };
    let path = match name.strip_prefix("crate::") {
        Some(rest) => rest.to_owned(),
        None if name == "crate" => return None,
        None => {
            let first = name.split("::").next().unwrap_or_default();
            let own = if module == "lib" { "" } else { module };
            if first.is_empty() || !modules.contains_key(&join(own, first)) {
                return None;
            }
            join(own, name)
        }
    };
    let segments: Vec<&str> = path.split("::").collect();
    (0..=segments.len())
        .rev()
        .find_map(|n| modules.get(&segments[..n].join("::")))
}

/// The crate's file graph: for each file, the files it names (outside test-only code), each
/// with the first name that makes the edge (to say why when a cycle is found).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn file_graph(
    files: &[(String, String, BTreeSet<String>)],
    modules: &BTreeMap<String, String>,
) -> Graph {
    let mut graph = Graph::new();
    for (display, module, names) in files {
        let edges = graph.entry(display.clone()).or_default();
        for name in names {
            if let Some(target) = file_of_name(module, name, modules)
                && target != display
            {
                edges.entry(target.clone()).or_insert_with(|| name.clone());
            }
        }
    }
    graph
}

/// Every import cycle between files: each strongly connected set of two files or more, as
/// `cycle: a.rs, b.rs, ...` (sorted), followed by its edges as `  a.rs -> b.rs (name)`.
fn cycles(graph: &Graph) -> Vec<(String, Vec<String>)> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for next in graph.get(&n).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = vec![];
    for n in graph.keys() {
        if done.contains(n) || !reached[n].contains(n) {
            continue;
        }
        let set: BTreeSet<&String> = reached[n]
            .iter()
            .filter(|m| reached.get(m).is_some_and(|r| r.contains(n)))
            .collect();
        done.extend(set.iter().map(|m| (*m).clone()));
        let edges = set
            .iter()
            .flat_map(|from| {
                graph[*from]
                    .iter()
                    .filter(|(to, _)| set.contains(to))
                    .map(move |(to, why)| format!("  {from} -> {to} ({why})"))
            })
            .collect();
        let names: Vec<&str> = set.iter().map(|s| s.as_str()).collect();
        out.push((format!("cycle: {}", names.join(", ")), edges));
    }
    out
}

/// The file graph of the crate at `root` (`src/`, `migrations/`).
fn graph_of(root: &Path) -> Graph {
    let mut files = vec![];
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("migrations"), &mut files);
    files.sort();
    let named: Vec<_> = files
        .iter()
        .filter_map(|file| {
            let (module, names) = names_in(root, file);
            let display = file.strip_prefix(root).unwrap().display().to_string();
            (module != "main").then_some((display, module, names))
        })
        .collect();
    file_graph(&named, &files_by_module(root, &files))
}

/// The modules whose whole file is test-only: declared `#[cfg(test)] mod x;` by their parent
/// (their code is test code, as a `#[cfg(test)] mod x { .. }` block is).
fn test_only_modules(root: &Path, files: &[PathBuf]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("readable source");
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let parent = module_of(root, file);
        for item in &ast.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && is_test_only(&m.attrs)
            {
                out.insert(match parent.as_str() {
                    "" | "lib" => m.ident.to_string(),
                    p => format!("{p}::{}", m.ident),
                });
            }
        }
    }
    out
}

#[test]
fn the_layers_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources(root);
    let tests = test_only_modules(root, &files);
    assert!(
        tests.contains("actors::session::tests"),
        "a file of tests is known as one: {tests:?}"
    );
    let mut found = BTreeSet::new();
    for file in &files {
        let (module, names) = names_in(root, file);
        // a test-only module's file, or a file of one of its own modules, is test code
        let test_code = tests
            .iter()
            .any(|t| module == *t || module.starts_with(&format!("{t}::")));
        if module == "lib" || test_code {
            continue;
        }
        if layer_of(&module).is_none() && !module.starts_with("store") {
            found.insert(format!(
                "{}: layer order: module {module} is in no layer (add it to LAYERS)",
                file.strip_prefix(root).unwrap().display()
            ));
        }
        let display = file.strip_prefix(root).unwrap().display().to_string();
        found.extend(check_file(&display, &module, &names));
    }
    let mut why = BTreeMap::new();
    for (cycle, edges) in cycles(&graph_of(root)) {
        found.insert(cycle.clone());
        why.insert(cycle, edges);
    }
    // no exemption: every broken invariant and every cycle fails the test
    for v in &found {
        eprintln!("{v}");
        for edge in why.get(v).into_iter().flatten() {
            eprintln!("{edge}");
        }
    }
    assert!(
        found.is_empty(),
        "{} layering violation(s), listed above as `file: rule: what`",
        found.len()
    );
}

#[test]
fn the_checker_sees_each_kind_of_violation() {
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let pure = check_file(
        "src/security/x.rs",
        "security::x",
        &names(&["std::fs::read", "tokio::spawn", "std::path::Path"]),
    );
    assert_eq!(pure.len(), 2, "{pure:?}");
    let spawn = check_file(
        "src/mcp/x.rs",
        "mcp::x",
        &names(&[
            "std::process::Command",
            "crate::store::Store",
            "crate::error::Error",
        ]),
    );
    assert_eq!(
        spawn,
        names(&[
            "src/mcp/x.rs: mcp: names crate::store::Store",
            "src/mcp/x.rs: spawn: names std::process::Command",
        ]),
        "an mcp module that spawns and names the store (a lower layer): {spawn:?}"
    );
    // stdout outside the subcommands' entry
    let out = check_file(
        "src/mcp/x.rs",
        "mcp::x",
        &names(&["std::io::stdout", "println", "tokio::io::stdout"]),
    );
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        check_file(
            "src/cli/entry.rs",
            "cli::entry",
            &names(&["std::io::stdout"])
        )
        .is_empty()
    );
    // asking a person, or declining without asking, outside the approval room; inside, both
    let outside = check_file(
        "src/mcp/x.rs",
        "mcp::x",
        &names(&[
            "rmcp::model::ElicitRequestParams",
            "crate::approval::DecisionRecord::unasked",
            "crate::approval::unasked::escalable",
            "crate::approval::Decision",
        ]),
    );
    assert_eq!(outside.len(), 3, "{outside:?}");
    assert!(
        outside.iter().all(|f| f.contains("approval room")),
        "{outside:?}"
    );
    let inside = check_file(
        "src/approval/ask/mod.rs",
        "approval::ask",
        &names(&[
            "rmcp::model::ElicitRequestParams",
            "crate::approval::DecisionRecord::unasked",
            "crate::approval::unasked::unshowable",
        ]),
    );
    assert!(inside.is_empty(), "{inside:?}");
    let own = check_file(
        "src/security/x.rs",
        "security::x",
        &names(&[
            "crate::error::Error",
            "crate::Result",
            "crate::invalid::InvalidArgument",
        ]),
    );
    assert_eq!(
        own,
        names(&[
            "src/security/x.rs: layer order: names crate::Result (layer 4) from security::x (layer 0)",
            "src/security/x.rs: layer order: names crate::error::Error (layer 4) from security::x (layer 0)",
            "src/security/x.rs: own errors: names crate::Result",
            "src/security/x.rs: own errors: names crate::error::Error",
        ]),
        "security returns its own errors: {own:?}"
    );
    let spawner = check_file(
        "src/codex/process/mod.rs",
        "codex::process",
        &names(&[
            "crate::error::Result",
            "crate::codex::process::ProcessError",
        ]),
    );
    assert_eq!(
        spawner.len(),
        2,
        "the spawner returns its own errors: {spawner:?}"
    );
    assert_eq!(
        check_file(
            "src/failure.rs",
            "failure",
            &names(&["std::fmt", "crate::usage::Usage"])
        ),
        names(&["src/failure.rs: leaf: names crate::usage::Usage"]),
        "a leaf names nothing of the crate"
    );
    assert_eq!(
        check_file("src/actors/x.rs", "actors::x", &names(&["crate"])),
        names(&["src/actors/x.rs: glob: names the whole crate (a glob of its root)"]),
        "a glob of the crate's root hides what a file names"
    );
    assert_eq!(
        check_file(
            "src/actors/session/x.rs",
            "actors::session::x",
            &names(&[
                "crate::actors::session::driver",
                "glob:crate::actors::session::driver",
                "glob:Kind",
            ])
        ),
        names(&[
            "src/actors/session/x.rs: glob: imports every name of crate::actors::session::driver"
        ]),
        "a glob of a sibling module hides which of its names a file uses (an enum's variants may be)"
    );
    assert_eq!(
        check_file(
            "src/actors/x.rs",
            "actors::x",
            &names(&[".clear_inflight()", ".inflight()"])
        ),
        names(&["src/actors/x.rs: inflight: writes an inflight record: .clear_inflight()"]),
        "an inflight record is written by its one writer only (a read is anyone's)"
    );
    assert!(
        check_file(
            "src/actors/inflight.rs",
            "actors::inflight",
            &names(&[".put_inflight()"])
        )
        .is_empty()
    );
    assert_eq!(
        check_file(
            "src/calls/mod.rs",
            "calls",
            &names(&["crate::store::SessionRecord", "crate::codex::events::Usage"])
        ),
        names(&["src/calls/mod.rs: calls: names crate::store::SessionRecord"]),
        "the MCP layer's contract names no store or process type"
    );
    let sled = check_file("src/actors/x.rs", "actors::x", &names(&["sled::Db"]));
    assert_eq!(sled.len(), 1, "{sled:?}");
    let up = check_file(
        "src/store/mod.rs",
        "store",
        &names(&["crate::codex::events::Usage", "crate::actors::Bridge"]),
    );
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(
        check_file(
            "src/error.rs",
            "error",
            &names(&[
                "crate::store::error::StoreError",
                "crate::codex::process::ProcessError",
                "crate::config::ConfigError",
                "crate::failure::FailureKind"
            ])
        )
        .is_empty(),
        "the crate error folds the errors of the layers below it"
    );
    assert_eq!(
        check_file(
            "src/error.rs",
            "error",
            &names(&["crate::hub::HubError", "crate::actors::Bridge"])
        )
        .len(),
        2,
        "the crate error names nothing above it (the hub's error carries the crate's)"
    );
    assert_eq!(
        module_of(Path::new("/r"), Path::new("/r/src/codex/process/spawn.rs")),
        "codex::process::spawn"
    );
    assert_eq!(
        module_of(Path::new("/r"), Path::new("/r/src/store/mod.rs")),
        "store"
    );
    assert_eq!(
        module_of(Path::new("/r"), Path::new("/r/migrations/v1.rs")),
        "store::migrations::v1"
    );
}

/// The cycle check on a crate of its own: a cycle through a re-export in a `mod.rs` (`a.rs`
/// names `crate::c::X`, which `c/mod.rs` re-exports from `c/x.rs`, which names `crate::a`), a
/// cycle of two through `super::`, and what makes no edge (a visibility, test-only code, the
/// library crate named by the binary).
#[test]
fn the_checker_sees_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src/c")).unwrap();
    std::fs::create_dir_all(root.join("src/p")).unwrap();
    let files = [
        (
            "src/lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub mod p;\n",
        ),
        ("src/main.rs", "use lib::a::A;\nfn main() {}\n"),
        ("src/a.rs", "pub struct A;\nfn f(_: crate::c::X) {}\n"),
        ("src/b.rs", "use crate::a::A;\npub struct B(A);\n"),
        ("src/c/mod.rs", "mod x;\npub use x::X;\n"),
        ("src/c/x.rs", "pub struct X;\nfn g(_: &crate::a::A) {}\n"),
        ("src/p/mod.rs", "mod q;\npub struct P;\nfn h(_: q::Q) {}\n"),
        (
            "src/p/q.rs",
            "use super::P;\npub struct Q(P);\n#[cfg(test)]\nmod tests { use crate::b::B; }\n",
        ),
    ];
    for (path, text) in files {
        std::fs::write(root.join(path), text).unwrap();
    }
    let found: Vec<String> = cycles(&graph_of(root))
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(
        found,
        [
            "cycle: src/a.rs, src/c/mod.rs, src/c/x.rs",
            "cycle: src/p/mod.rs, src/p/q.rs"
        ],
        "a cycle through a re-export, and one through super::"
    );
    // broken: `x.rs` names nothing of the crate (`b.rs` still names `a.rs`, which names
    // `c/mod.rs`); `q.rs` holds `P` itself (a `pub(super)` item names no module)
    std::fs::write(root.join("src/c/x.rs"), "pub struct X;\nfn g(_: &str) {}\n").unwrap();
    std::fs::write(
        root.join("src/p/q.rs"),
        "pub(super) struct P;\npub struct Q(P);\n#[cfg(test)]\nmod tests { use super::super::P; }\n",
    )
    .unwrap();
    std::fs::write(root.join("src/p/mod.rs"), "mod q;\nfn h(_: q::Q) {}\n").unwrap();
    let found = cycles(&graph_of(root));
    assert!(found.is_empty(), "no cycle is left: {found:?}");
}

/// Paths the checker must not miss: inside a macro's body (`vec![..]`, `format!(..)`,
/// `tokio::select!`), behind `extern crate .. as ..`, behind `use .. as ..`, and written out
/// in full in an expression.
#[test]
fn the_checker_sees_paths_in_macros_aliases_and_expressions() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src/mcp")).unwrap();
    let cases = [
        (
            "vec![std::process::Command::new(\"sh\")]",
            "spawn: names std::process::Command",
        ),
        (
            "format!(\"{:?}\", tokio::process::Command::new(\"x\"))",
            "spawn: names tokio::process::Command",
        ),
        (
            "std::process::Command::new(\"sh\")",
            "spawn: names std::process::Command",
        ),
        (
            "println!(\"{:?}\", crate::store::Store::open)",
            "mcp: names crate::store::Store::open",
        ),
        (
            "assert!(matches!(x, crate::codex::process::Ending::Completed))",
            "mcp: names crate::codex::process::Ending::Completed",
        ),
        (
            "format!(\"{:?}\", crate::codex::argv::MAX_TITLE_LEN)",
            "mcp: names crate::codex::argv::MAX_TITLE_LEN",
        ),
        (
            "crate::codex::app_server::protocol::parse",
            "mcp: names crate::codex::app_server::protocol::parse",
        ),
    ];
    let cases = cases
        .into_iter()
        .chain([("self.bridge.shared().store.get(&id)", "mcp: names .store")]);
    for (expr, want) in cases {
        let file = root.join("src/mcp/x.rs");
        std::fs::write(&file, format!("fn f(x: u8) {{ let _ = {expr}; }}\n")).unwrap();
        let (module, names) = names_in(root, &file);
        let found = check_file("src/mcp/x.rs", &module, &names);
        assert!(
            found.iter().any(|v| v.contains(want)),
            "`{expr}`: expected `{want}`, found {found:?}"
        );
    }
    let aliased = [
        "use std::process as p;\nfn f() { let _ = p::Command::new(\"sh\"); }\n",
        "extern crate tokio as t;\nfn f() { let _ = t::process::Command::new(\"sh\"); }\n",
        "use std::process::Command as C;\nfn f() { let _ = vec![C::new(\"sh\")]; }\n",
    ];
    for text in aliased {
        let file = root.join("src/mcp/x.rs");
        std::fs::write(&file, text).unwrap();
        let (module, names) = names_in(root, &file);
        let found = check_file("src/mcp/x.rs", &module, &names);
        assert!(
            found.iter().any(|v| v.contains("spawn: names")),
            "{text}: {found:?}"
        );
    }
}

/// The most lines a function's body may run without a doc comment saying why it is one piece.
const LONG_FN_LINES: usize = 80;

/// The functions of one file longer than [`LONG_FN_LINES`] whose doc comment does not say why
/// they are one piece: `(name, first line, lines)`. Test code is not looked at.
#[derive(Default)]
struct LongFns {
    found: Vec<(String, usize, usize)>,
}

impl LongFns {
    fn check(&mut self, attrs: &[syn::Attribute], name: &syn::Ident, body: &syn::Block) {
        if is_test_only(attrs) {
            return;
        }
        let first = body.brace_token.span.open().start().line;
        let last = body.brace_token.span.close().end().line;
        let lines = last.saturating_sub(first) + 1;
        let says_why = attrs.iter().any(|a| {
            let syn::Meta::NameValue(nv) = &a.meta else {
                return false;
            };
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(doc),
                ..
            }) = &nv.value
            else {
                return false;
            };
            a.path().is_ident("doc") && doc.value().to_lowercase().contains("one piece")
        });
        if lines > LONG_FN_LINES && !says_why {
            self.found.push((name.to_string(), first, lines));
        }
    }
}

impl<'ast> Visit<'ast> for LongFns {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(&f.attrs, &f.sig.ident, &f.block);
        if !is_test_only(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(&f.attrs, &f.sig.ident, &f.block);
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

/// The long functions of `source` that do not say why they are one piece.
fn long_functions(source: &str) -> Vec<(String, usize, usize)> {
    let ast = syn::parse_file(source).expect("the file parses");
    let mut v = LongFns::default();
    v.visit_file(&ast);
    v.found
}

/// The modules `lib_rs` declares and the modules its layout list names (`//! - [`name`]: ..`),
/// each in order.
fn declared_and_listed(lib_rs: &str) -> (Vec<String>, Vec<String>) {
    let declared = syn::parse_file(lib_rs)
        .expect("lib.rs parses")
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    let listed = lib_rs
        .lines()
        .filter_map(|l| l.strip_prefix("//! - [`"))
        .filter_map(|l| l.split_once("`]").map(|(name, _)| name.to_owned()))
        .collect();
    (declared, listed)
}

#[test]
fn the_crate_layout_list_names_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib_rs = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let (declared, listed) = declared_and_listed(&lib_rs);
    assert!(!declared.is_empty());
    assert_eq!(
        listed, declared,
        "src/lib.rs's layout list (`//! - [`module`]: ...`) names every top-level module in \
         the order they are declared"
    );
}

#[test]
fn the_layout_check_sees_a_missing_module() {
    let lib_rs = "//! # Layout\n//! - [`a`]: one.\n//!   more about a\npub mod a;\npub mod b;\n";
    let (declared, listed) = declared_and_listed(lib_rs);
    assert_eq!(declared, ["a", "b"]);
    assert_eq!(listed, ["a"]);
}

#[test]
fn no_long_function_without_a_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources(root);
    let mut found = vec![];
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for (name, line, lines) in long_functions(&source) {
            found.push(format!(
                "{}:{line}: `{name}` runs {lines} lines; split it, or say in its doc comment why \
                 it is one piece (\"One piece: ...\")",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_long_function_check_sees_one_and_its_reason() {
    let body = |n: usize| "    let _ = 1;\n".repeat(n);
    let long = format!("fn long() {{\n{}}}\n", body(LONG_FN_LINES));
    let found = long_functions(&long);
    assert_eq!(
        found,
        vec![("long".to_string(), 1, LONG_FN_LINES + 2)],
        "{found:?}"
    );
    let short = format!("fn short() {{\n{}}}\n", body(LONG_FN_LINES - 2));
    assert!(long_functions(&short).is_empty());
    let said = format!("/// One piece: one loop.\n{long}");
    assert!(long_functions(&said).is_empty());
    let method = format!("struct S;\nimpl S {{\n{long}}}\n");
    assert_eq!(long_functions(&method).len(), 1, "a method counts too");
    let tests = format!("#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert!(
        long_functions(&tests).is_empty(),
        "test code is not looked at"
    );
}

/// Every file path under the checkout that ARCHITECTURE.md may name (sources, tests, benches,
/// fuzz targets, migrations, scripts), relative to it, with each of their folders.
fn checkout_paths(root: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.expect("a directory entry").path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                out.insert(format!("{rel}/"));
                walk(root, &path, out);
            } else {
                out.insert(rel);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

/// The identifiers the sources define or name (every word of `src/`, `tests/` and
/// `migrations/` that could be an item's name).
fn source_words(root: &Path) -> BTreeSet<String> {
    let mut files = sources(root);
    rust_files(&root.join("tests"), &mut files);
    let mut words = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for w in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !w.is_empty() {
                words.insert(w.to_owned());
            }
        }
    }
    words
}

/// Whether ARCHITECTURE.md's span `s` (one name in backticks) is true of the checkout: a path
/// names a file or folder that exists; a module path (`a::b::C`) walks modules that exist to
/// an item the sources name (a function ends it; a type may have an associated name after
/// it); an identifier (a type, or a lower-case word with an underscore: a function, a field,
/// a setting) is named by the sources. Spans that are no name (a phrase, a command line, a
/// URI, a protocol method, a plain lower-case word) pass.
fn names_what_exists(s: &str, paths: &BTreeSet<String>, words: &BTreeSet<String>) -> bool {
    let is_ident = |w: &str| {
        !w.is_empty()
            && w.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !w.starts_with(|c: char| c.is_ascii_digit())
    };
    if s.contains('/') || [".rs", ".md", ".json"].iter().any(|x| s.ends_with(x)) {
        if s.contains(' ') || s.contains(':') || s.contains('*') {
            return true;
        }
        // a path ends with `/` (a folder) or has an extension; `turn/start` is a protocol method
        if !(s.ends_with('/') || s.contains('.')) {
            return true;
        }
        let s = s.trim_end_matches('/');
        return paths.iter().any(|p| {
            let p = p.trim_end_matches('/');
            p == s || p.ends_with(&format!("/{s}"))
        });
    }
    let segments: Vec<&str> = s.split("::").collect();
    if !segments.iter().all(|w| is_ident(w)) {
        return true;
    }
    if segments.len() == 1 {
        // a single lower-case word may be a word of the text (a tool, a rule); one with an
        // underscore is an identifier (a function, a field, a setting) the sources must name
        let plain = s.chars().all(|c| !c.is_uppercase()) && !s.contains('_');
        return plain || words.contains(s);
    }
    let first = segments[0];
    let external = !first.starts_with(|c: char| c.is_uppercase())
        && !paths.contains(&format!("src/{first}.rs"))
        && !paths.contains(&format!("src/{first}/"));
    if external {
        return ["std", "tokio", "rmcp", "sled", "serde", "ractor"].contains(&first);
    }
    let mut dir = String::from("src");
    for (i, seg) in segments.iter().enumerate() {
        if seg.starts_with(|c: char| c.is_uppercase()) {
            return segments[i..].iter().all(|w| words.contains(*w));
        }
        if paths.contains(&format!("{dir}/{seg}.rs")) || paths.contains(&format!("{dir}/{seg}/")) {
            dir = format!("{dir}/{seg}");
            continue;
        }
        // not a module: a function (or a constant), which ends the path
        return i + 1 == segments.len() && words.contains(*seg);
    }
    true
}

#[test]
fn the_architecture_names_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert!(
        text.len() <= 15 * 1024,
        "ARCHITECTURE.md is {} bytes: at most 15 KB, a map a newcomer reads",
        text.len()
    );
    let (paths, words) = (checkout_paths(root), source_words(root));
    let spans: Vec<&str> = text.split('`').skip(1).step_by(2).collect();
    assert!(
        spans.len() > 200,
        "the spans were not read: {}",
        spans.len()
    );
    let stale: Vec<&str> = spans
        .iter()
        .copied()
        .filter(|s| !names_what_exists(s, &paths, &words))
        .collect();
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md names what the checkout does not hold: {stale:?}"
    );
    // the check can fail: a removed file, a renamed type and a stale module path are seen
    for gone in [
        "session/task.rs",
        "codex::app_server::approval::Asking",
        "mcp::owner::TaskOwner",
        "page::Pages",
        "actors::tasks::StoredTask",
        // (written in two halves: this file's own words count as the sources')
        &format!("{}{}", "NoSuchType", "Anywhere"),
        &format!("{}{}", "warm_", "refused_nowhere"),
    ] {
        assert!(!names_what_exists(gone, &paths, &words), "{gone} passed");
    }
}
