//! Where the suite works: each test's tree (store, config, `HOME`), the fetch locks and the
//! codex CLI it fetches, placed wherever the checkout lies so that the server's rules let every
//! test run.
//!
//! The server refuses every writable turn while one of its own files (config, store, codex
//! binary) lies where codex's workspace-write sandbox may write wherever a turn runs: `/tmp`,
//! and `$TMPDIR` where set. The suite keeps those files in its work directory, so that
//! directory lies in neither (nor does codex want its helper binaries there). Run as root,
//! some tests start the server as `nobody`, so then every directory above it must be
//! searchable by others.
//!
//! The work directory is the first of these that qualifies: `CODEX_BRIDGE_TEST_WORK` (when set,
//! the only one), the checkout's `.test-work/`, `$XDG_CACHE_HOME` (else `~/.cache`)
//! `/codex-mcp-bridge/test-work`, and for root `/var/cache/codex-mcp-bridge/test-work`. Outside
//! the checkout, codex is fetched into its `codex-cli/` too. [`decide`] is the rule, pure (its
//! unit tests are below); [`placement`] asks the filesystem once per process.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Environment variable naming the suite's work directory outright.
pub const WORK_ENV: &str = "CODEX_BRIDGE_TEST_WORK";

/// What [`decide`] needs to know, every path absolute with its symlinks resolved.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The checkout (the crate's root).
    pub checkout: PathBuf,
    /// The directories codex's workspace-write may write wherever a turn runs.
    pub temp_dirs: Vec<PathBuf>,
    /// `CODEX_BRIDGE_TEST_WORK`, when set.
    pub named: Option<PathBuf>,
    /// `$XDG_CACHE_HOME`, else `$HOME/.cache`, when either is absolute.
    pub cache_home: Option<PathBuf>,
    /// Whether the suite runs as root (then tests run the server as `nobody`).
    pub as_root: bool,
}

/// Where the suite works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The work directory.
    pub work: PathBuf,
    /// Where `scripts/fetch-codex.sh` installs codex `<version>/`: `None` for its default,
    /// the checkout's `.codex-cli/` (used while the work directory is the checkout's).
    pub codex_cli: Option<PathBuf>,
}

/// The suite's work directory for `facts`: the first candidate (see the module doc) that lies
/// in no temporary directory and, for root, that `others_reach` (whether every directory on the
/// way to it is searchable by other users). Otherwise why each was refused and what to do.
pub fn decide(facts: &Facts, others_reach: &dyn Fn(&Path) -> bool) -> Result<Placement, String> {
    let unfit = |dir: &Path| -> Option<String> {
        if let Some(temp) = in_temp(dir, &facts.temp_dirs) {
            return Some(format!(
                "{} lies in {}, which codex's workspace-write sandbox may write: the server \
                 refuses every writable turn while its store, config or codex binary lies there",
                dir.display(),
                temp.display()
            ));
        }
        if facts.as_root && !others_reach(dir) {
            return Some(format!(
                "{} is out of other users' reach (a directory on its way is not searchable by \
                 others): the tests that run the server as nobody could not start it",
                dir.display()
            ));
        }
        None
    };
    let in_checkout = facts.checkout.join(".test-work");
    let placed = |work: PathBuf| Placement {
        codex_cli: (work != in_checkout).then(|| work.join("codex-cli")),
        work,
    };
    if let Some(named) = &facts.named {
        return match unfit(named) {
            None => Ok(placed(named.clone())),
            Some(why) => Err(format!("{WORK_ENV}={}: {why}", named.display())),
        };
    }
    let candidates = [
        Some(in_checkout.clone()),
        facts
            .cache_home
            .as_ref()
            .map(|c| c.join("codex-mcp-bridge").join("test-work")),
        facts
            .as_root
            .then(|| PathBuf::from("/var/cache/codex-mcp-bridge/test-work")),
    ];
    let mut refused = Vec::new();
    for dir in candidates.into_iter().flatten() {
        match unfit(&dir) {
            None => return Ok(placed(dir)),
            Some(why) => refused.push(why),
        }
    }
    Err(format!(
        "no place for the suite's work: {}; set {WORK_ENV} to a directory outside them",
        refused.join("; ")
    ))
}

/// The temporary directory of `temp_dirs` that `path` lies in.
pub fn in_temp<'a>(path: &Path, temp_dirs: &'a [PathBuf]) -> Option<&'a PathBuf> {
    temp_dirs.iter().find(|t| path.starts_with(t))
}

/// The facts of this process, gathered once.
pub fn facts() -> &'static Facts {
    static FACTS: OnceLock<Facts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let var = |k: &str| {
            std::env::var_os(k)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let mut temp_dirs = vec![resolved(Path::new("/tmp"))];
        if let Some(t) = var("TMPDIR").map(|t| resolved(&t))
            && !temp_dirs.contains(&t)
        {
            temp_dirs.push(t);
        }
        Facts {
            checkout: resolved(super::codex_bin::repo_root()),
            temp_dirs,
            named: std::env::var_os(WORK_ENV)
                .filter(|v| !v.is_empty())
                .map(|v| resolved(&std::path::absolute(PathBuf::from(v)).unwrap_or_default())),
            cache_home: var("XDG_CACHE_HOME")
                .or_else(|| var("HOME").map(|h| h.join(".cache")))
                .map(|c| resolved(&c)),
            // SAFETY: no preconditions.
            as_root: unsafe { libc::geteuid() } == 0,
        }
    })
}

/// This process's placement; panics saying why there is none and what to do.
pub fn placement() -> &'static Placement {
    static PLACEMENT: OnceLock<Placement> = OnceLock::new();
    PLACEMENT.get_or_init(|| decide(facts(), &others_reach).unwrap_or_else(|why| panic!("{why}")))
}

/// `path` with its symlinks resolved: canonical, or its nearest existing ancestor canonical
/// with the rest appended.
pub fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(c) = at.canonicalize() {
            return rest.iter().rev().fold(c, |p: PathBuf, n| p.join(n));
        }
        match (at.file_name(), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Whether other users may search every existing directory from `/` to `path` (what is
/// missing, [`create_dir`] makes searchable).
pub fn others_reach(path: &Path) -> bool {
    path.ancestors()
        .filter_map(|d| std::fs::metadata(d).ok())
        .filter(|m| m.is_dir())
        .all(|m| m.permissions().mode() & 0o001 != 0)
}

/// `dir` and its missing ancestors, each made mode 0755 whatever the umask (a directory of the
/// suite that `nobody` must pass). Panics if the filesystem refuses.
pub fn create_dir(dir: &Path) {
    if dir.is_dir() {
        return;
    }
    if let Some(parent) = dir.parent() {
        create_dir(parent);
    }
    match std::fs::create_dir(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("cannot set the mode of {}: {e}", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("cannot create the test work dir {}: {e}", dir.display()),
    }
}

/// `bin`, or when other users cannot reach it (a binary in a private home, run as `nobody`) a
/// copy of it in the work directory's `bin/`, made once per build and shared by the tests.
pub fn for_others(bin: &Path) -> PathBuf {
    if others_reach(bin) {
        return bin.to_path_buf();
    }
    let meta = std::fs::metadata(bin).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let built = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let name = bin
        .file_name()
        .expect("a binary's file name")
        .to_string_lossy();
    let dir = super::codex_bin::test_work_dir().join("bin");
    create_dir(&dir);
    let copy = dir.join(format!("{name}-{}-{built}", meta.len()));
    if !copy.exists() {
        let part = dir.join(format!(".{name}.{}", std::process::id()));
        std::fs::copy(bin, &part).unwrap_or_else(|e| panic!("copy {}: {e}", bin.display()));
        std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&part, &copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    }
    // copies of earlier builds go
    for old in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let n = old.file_name().to_string_lossy().into_owned();
        if n.starts_with(&format!("{name}-")) && old.path() != copy {
            let _ = std::fs::remove_file(old.path());
        }
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(checkout: &str) -> Facts {
        Facts {
            checkout: checkout.into(),
            temp_dirs: vec!["/tmp".into(), "/scratch/t".into()],
            named: None,
            cache_home: Some("/home/ann/.cache".into()),
            as_root: false,
        }
    }

    const CACHE_WORK: &str = "/home/ann/.cache/codex-mcp-bridge/test-work";

    #[test]
    fn a_checkout_outside_the_temporary_directories_keeps_its_work_and_codex() {
        for checkout in [
            "/home/ann/src/bridge",
            "/home/ann/my work/bridge",
            "/tmpx/bridge",
        ] {
            let p = decide(&facts(checkout), &|_| false).unwrap();
            assert_eq!(p.work, Path::new(checkout).join(".test-work"));
            assert_eq!(p.codex_cli, None, "{checkout}");
        }
    }

    #[test]
    fn a_checkout_in_tmp_or_tmpdir_works_in_the_cache_and_fetches_codex_there() {
        for checkout in ["/tmp/new comer", "/tmp/a/b", "/scratch/t/bridge"] {
            let p = decide(&facts(checkout), &|_| true).unwrap();
            assert_eq!(p.work, Path::new(CACHE_WORK), "{checkout}");
            assert_eq!(
                p.codex_cli.as_deref(),
                Some(Path::new(CACHE_WORK).join("codex-cli").as_path())
            );
        }
    }

    #[test]
    fn as_root_the_work_lies_where_nobody_reaches_it() {
        let mut f = facts("/root/bridge");
        f.as_root = true;
        f.cache_home = Some("/root/.cache".into());
        let private = |p: &Path| !p.starts_with("/root");
        let p = decide(&f, &private).unwrap();
        assert_eq!(p.work, Path::new("/var/cache/codex-mcp-bridge/test-work"));
        assert!(p.codex_cli.is_some());
        // a reachable checkout keeps its own, as does any checkout when not root
        let p = decide(&facts("/root/bridge"), &private).unwrap();
        assert_eq!(p.work, Path::new("/root/bridge/.test-work"));
        f.checkout = "/srv/bridge".into();
        assert_eq!(
            decide(&f, &private).unwrap().work,
            Path::new("/srv/bridge/.test-work")
        );
    }

    #[test]
    fn a_named_work_dir_is_the_only_candidate_and_is_held_to_the_same_rules() {
        let mut f = facts("/tmp/bridge");
        f.named = Some("/srv/work".into());
        let p = decide(&f, &|_| true).unwrap();
        assert_eq!(p.work, Path::new("/srv/work"));
        assert_eq!(
            p.codex_cli.as_deref(),
            Some(Path::new("/srv/work/codex-cli"))
        );
        f.named = Some("/tmp/work".into());
        let err = decide(&f, &|_| true).unwrap_err();
        assert!(
            err.starts_with("CODEX_BRIDGE_TEST_WORK=/tmp/work: /tmp/work lies in /tmp"),
            "{err}"
        );
    }

    #[test]
    fn with_no_place_left_the_answer_says_why_each_was_refused_and_what_to_do() {
        let mut f = facts("/tmp/bridge");
        f.cache_home = Some("/tmp/cache".into());
        let err = decide(&f, &|_| true).unwrap_err();
        assert!(err.contains("/tmp/bridge/.test-work lies in /tmp"), "{err}");
        assert!(
            err.contains("/tmp/cache/codex-mcp-bridge/test-work lies in /tmp"),
            "{err}"
        );
        assert!(err.contains("set CODEX_BRIDGE_TEST_WORK"), "{err}");
    }
}
