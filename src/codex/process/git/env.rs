//! What every git call runs under: the `PATH`, the environment cleared to a fixed allowlist,
//! the pins (command-line configuration that switches off each program a repository may
//! configure) and a call's scratch index and object directory. Pure: values, no IO.

use std::ffi::OsString;
use std::path::Path;

/// The `PATH` git runs with: it needs none of the caller's (every subcommand used here is
/// built in).
const GIT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The pins every call carries, whatever the repository: each switches off a program a
/// repository (or an include of it) may configure, or makes the output this module parses
/// independent of the repository's taste.
const PINS: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("core.attributesFile", "/dev/null"),
    ("diff.external", ""),
    ("gpg.program", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
    ("color.ui", "false"),
    ("core.quotePath", "false"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.relative", "false"),
    ("diff.renames", "false"),
    ("apply.whitespace", "nowarn"),
    ("advice.detachedHead", "false"),
];

/// A call's scratch index, and the repository's object directory: the objects the call
/// writes (`git add` of a worktree's files) go beside the scratch index, read from the
/// repository as an alternate, so that reading a session's changes leaves nothing in the
/// person's repository (a session rewriting large files filled its object store).
#[derive(Clone, Copy)]
pub(super) struct Scratch<'a> {
    pub(super) index: &'a Path,
    pub(super) repository_objects: &'a Path,
}

/// The environment of every call: nothing of the server's, the fixed settings, the pins.
pub(super) fn environment(
    pins: &[(String, String)],
    scratch: Option<Scratch>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = [
        ("PATH", GIT_PATH),
        ("LC_ALL", "C"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_ATTR_NOSYSTEM", "1"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("GIT_NO_REPLACE_OBJECTS", "1"),
        ("GIT_LITERAL_PATHSPECS", "1"),
    ]
    .iter()
    .map(|(k, v)| (os(*k), os(*v)))
    .collect();
    let all: Vec<(&str, &str)> = PINS
        .iter()
        .copied()
        .chain(pins.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    env.push((os("GIT_CONFIG_COUNT"), os(all.len().to_string())));
    for (i, (k, v)) in all.iter().enumerate() {
        env.push((os(format!("GIT_CONFIG_KEY_{i}")), os(*k)));
        env.push((os(format!("GIT_CONFIG_VALUE_{i}")), os(*v)));
    }
    if let Some(Scratch {
        index,
        repository_objects,
    }) = scratch
    {
        env.push((os("GIT_INDEX_FILE"), index.as_os_str().to_owned()));
        let objects = index.with_file_name("objects");
        env.push((os("GIT_OBJECT_DIRECTORY"), objects.into_os_string()));
        env.push((
            os("GIT_ALTERNATE_OBJECT_DIRECTORIES"),
            repository_objects.as_os_str().to_owned(),
        ));
    }
    env
}

/// The pins that switch off each configured filter and hook named in `names` (the output of
/// `git config --name-only -z --get-regexp`): `filter.<name>.*` and `hook.<name>.*`.
pub(super) fn program_pins(names: &[u8]) -> Vec<(String, String)> {
    let mut filters: Vec<String> = Vec::new();
    let mut hooks: Vec<String> = Vec::new();
    for key in names.split(|b| *b == 0).filter(|k| !k.is_empty()) {
        let key = String::from_utf8_lossy(key);
        // `section.subsection.variable`: the subsection may hold dots, the variable may not
        let Some((head, _variable)) = key.rsplit_once('.') else {
            continue;
        };
        let Some((section, name)) = head.split_once('.') else {
            continue;
        };
        let list = match section.to_ascii_lowercase().as_str() {
            "filter" => &mut filters,
            "hook" => &mut hooks,
            _ => continue,
        };
        if !list.iter().any(|n| n == name) {
            list.push(name.to_owned());
        }
    }
    let mut pins = Vec::new();
    for f in filters {
        for (var, value) in [
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            pins.push((format!("filter.{f}.{var}"), value.to_owned()));
        }
    }
    for h in hooks {
        pins.push((format!("hook.{h}.enabled"), "false".to_owned()));
        pins.push((format!("hook.{h}.command"), String::new()));
    }
    pins
}

/// An argument or value as git takes it.
pub(super) fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}
