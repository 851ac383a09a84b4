//! Path confinement on arbitrary path strings and symlink layouts in a temporary tree.
//!
//! Each input builds a fresh tree: `root/` (the allowed container), a sibling `root2/` (a
//! prefix of the same name: `/x/root2` is not inside `/x/root`), and `outside/` holding a
//! secret file; then directories, files and symlinks the fuzzer places anywhere in it, the
//! links pointing at fixed anchors (the root, its parent, `outside/`, `/`, `/proc/self/root`,
//! ...), at paths below them, or at relative paths. Then path strings are resolved against a
//! directory inside the root. Asserted, for every `resolve` that succeeds:
//! - the path is inside one of the containers it was given, component-wise;
//! - it is really canonical: absolute, no `.`/`..`, and no component of it is a symlink
//!   (checked with `symlink_metadata` one component at a time, not with `canonicalize`), so
//!   what reaches codex is the place the kernel will open;
//! - it is never `outside/` or anything below it;
//! - it is of the kind asked for (directory, regular file), an image path has no `,` and no
//!   control character, and `recheck` accepts it again;
//! and for every refusal: the error names the field and never carries file contents.
#![no_main]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use codex_mcp_bridge::confine::{recheck, resolve};
use codex_mcp_bridge::security::paths::{Kind, is_within, parse_file_ref};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    entries: Vec<Entry>,
    queries: Vec<Query>,
}

#[derive(Arbitrary, Debug)]
struct Entry {
    /// Index into the directories known so far (the fixed ones, then those created).
    parent: u8,
    name: Name,
    what: What,
}

#[derive(Arbitrary, Debug)]
enum Name {
    Vocab(u8),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum What {
    Dir,
    File,
    /// A symlink to an anchor, optionally with a path below it.
    Abs(u8, Option<Vec<Name>>),
    /// A relative symlink.
    Rel(Vec<Name>),
    RelRaw(String),
}

#[derive(Arbitrary, Debug)]
struct Query {
    /// Index into the directories inside the root: the base and container of this query.
    scope: u8,
    /// Also allow `root2/` as a container.
    second_root: bool,
    kind: u8,
    /// Split a `path:START-END` line range off first, as `files` entries are.
    file_ref: bool,
    path: QueryPath,
}

#[derive(Arbitrary, Debug)]
enum QueryPath {
    Segments(bool, Vec<Name>),
    Raw(String),
}

const VOCAB: &[&str] = &[
    "a",
    "b",
    "..",
    ".",
    "root",
    "root2",
    "outside",
    "secret.txt",
    "link",
    "x,y",
    "-n",
    " ",
    "a:1-2",
    "...",
    "lib.rs",
];

const SECRET: &str = "TOP SECRET CONTENT";

fn base_dir() -> &'static Path {
    static BASE: OnceLock<tempfile::TempDir> = OnceLock::new();
    BASE.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
        .path()
}

fn name(n: &Name) -> String {
    match n {
        Name::Vocab(i) => VOCAB[*i as usize % VOCAB.len()].to_owned(),
        Name::Raw(s) => s.replace(['/', '\0'], ""),
    }
}

fn joined(names: &[Name]) -> String {
    names.iter().map(name).collect::<Vec<_>>().join("/")
}

/// Is every component of `p` a real directory entry rather than a symlink, with no `.`/`..`?
fn really_canonical(p: &Path) -> bool {
    if !p.is_absolute() {
        return false;
    }
    let mut at = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => {
                at.push(n);
                match fs::symlink_metadata(&at) {
                    Ok(m) if !m.file_type().is_symlink() => {}
                    _ => return false,
                }
            }
            _ => return false,
        }
    }
    true
}

fuzz_target!(|input: Input| {
    let case = base_dir().join("case");
    let _ = fs::remove_dir_all(&case);
    fs::create_dir_all(&case).unwrap();
    let case = case.canonicalize().unwrap();
    let root = case.join("root");
    let root2 = case.join("root2");
    let outside = case.join("outside");
    for d in [&root, &root2, &outside] {
        fs::create_dir(d).unwrap();
    }
    fs::write(outside.join("secret.txt"), SECRET).unwrap();
    fs::write(root.join("lib.rs"), SECRET).unwrap();
    let anchors: Vec<PathBuf> = vec![
        root.clone(),
        root2.clone(),
        outside.clone(),
        case.clone(),
        outside.join("secret.txt"),
        PathBuf::from("/"),
        PathBuf::from("/proc/self/root"),
        PathBuf::from("/etc"),
        root.join(".."),
    ];

    let mut dirs: Vec<PathBuf> = vec![root.clone(), root2.clone(), outside.clone()];
    for e in input.entries.iter().take(16) {
        let parent = dirs[e.parent as usize % dirs.len()].clone();
        let n = name(&e.name);
        if n.is_empty() {
            continue;
        }
        let at = parent.join(&n);
        let made = match &e.what {
            What::Dir => fs::create_dir(&at).is_ok(),
            What::File => fs::write(&at, SECRET).is_ok(),
            What::Abs(i, below) => {
                let mut target = anchors[*i as usize % anchors.len()].clone();
                if let Some(below) = below {
                    target.push(joined(below));
                }
                symlink(&target, &at).is_ok()
            }
            What::Rel(names) => symlink(joined(names), &at).is_ok(),
            What::RelRaw(s) => !s.contains('\0') && symlink(s, &at).is_ok(),
        };
        // Only real directories inside the case become parents: nothing is ever created
        // through a link to `/` or `/etc`.
        if made
            && let Ok(c) = at.canonicalize()
            && c.is_dir()
            && is_within(&c, &case)
        {
            dirs.push(c);
        }
    }

    // Scopes: canonical directories inside the root.
    let mut scopes: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| is_within(d, &root))
        .cloned()
        .collect();
    scopes.dedup();

    for q in input.queries.iter().take(8) {
        let scope = scopes[q.scope as usize % scopes.len()].clone();
        let mut containers = vec![scope.clone()];
        if q.second_root {
            containers.push(root2.clone());
        }
        let kind = [Kind::Dir, Kind::File, Kind::Image][q.kind as usize % 3];
        let mut raw = match &q.path {
            QueryPath::Segments(absolute, names) => {
                let j = joined(names);
                if *absolute {
                    format!("{}/{j}", case.display())
                } else {
                    j
                }
            }
            QueryPath::Raw(s) => s.clone(),
        };
        let field = "files[0]";
        if q.file_ref {
            match parse_file_ref(field, &raw) {
                Ok(r) => {
                    if let Some((start, end)) = r.lines {
                        assert!(start >= 1 && end >= start, "{raw:?} -> {r:?}");
                    }
                    raw = r.path;
                }
                Err(e) => {
                    assert!(e.to_string().contains(field));
                    continue;
                }
            }
        }
        match resolve(field, &raw, &scope, &containers, kind) {
            Ok(c) => {
                let p = c.path();
                assert!(
                    containers.iter().any(|k| k == c.within()) && is_within(p, c.within()),
                    "{raw:?} from {scope:?} resolved to {p:?}, outside {containers:?}"
                );
                assert!(
                    really_canonical(p),
                    "{raw:?} resolved to {p:?}, which is not canonical"
                );
                assert!(
                    !is_within(p, &outside) && is_within(p, &case),
                    "{raw:?} resolved to {p:?}"
                );
                let meta = fs::metadata(p).unwrap();
                match kind {
                    Kind::Dir => assert!(meta.is_dir(), "{p:?}"),
                    Kind::File | Kind::Image => assert!(meta.is_file(), "{p:?}"),
                }
                if kind == Kind::Image {
                    let s = p.to_str().unwrap();
                    assert!(
                        !s.contains(',') && !s.chars().any(char::is_control),
                        "{s:?}"
                    );
                }
                assert_eq!(c.kind(), kind);
                recheck(&c).unwrap_or_else(|e| panic!("recheck of {p:?} failed: {e}"));
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(field), "{msg}");
                assert!(!msg.contains(SECRET), "{msg}");
            }
        }
    }
});
