//! The environment a codex child gets: an explicit allowlist, nothing else, ever.
//!
//! Pure: [`filter_env`] takes the variables as an iterator, so tests never touch the real
//! environment (the shape of codex's own `exec_env::populate_env`).

/// Variables passed through when set and non-empty (SECURITY.md: the allowlist).
/// Exact names only: no prefix matching, so `OPENAI_ANYTHING` never leaks.
pub const ALLOWED_VARS: [&str; 12] = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "CODEX_HOME",
    "CODEX_DEFAULT_MODEL",
    "HOME",
    "PATH",
    "USER",
    "SHELL",
    "LANG",
    "TERM",
    "XDG_CONFIG_HOME",
];

/// Set last on every child so nothing can override them: codex's output must stay free of
/// ANSI colour codes because we parse it.
pub const FORCED_VARS: [(&str, &str); 2] = [("NO_COLOR", "1"), ("FORCE_COLOR", "0")];

/// The child's complete environment from the parent's variables: the allowlisted ones (in
/// allowlist order, empty values skipped), then [`FORCED_VARS`].
pub fn filter_env<I, K, V>(vars: I) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut found: Vec<Option<String>> = vec![None; ALLOWED_VARS.len()];
    for (k, v) in vars {
        if let Some(i) = ALLOWED_VARS.iter().position(|a| *a == k.as_ref())
            && !v.as_ref().is_empty()
        {
            found[i] = Some(v.as_ref().to_owned());
        }
    }
    let mut env: Vec<(String, String)> = ALLOWED_VARS
        .iter()
        .zip(found)
        .filter_map(|(k, v)| v.map(|v| ((*k).to_owned(), v)))
        .collect();
    env.extend(
        FORCED_VARS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

/// Look up one variable in an environment built by [`filter_env`].
pub fn get<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowlisted_variables_pass_and_forced_ones_come_last() {
        let env = filter_env([
            ("OPENAI_API_KEY", "sk-1"),
            ("AWS_SECRET_ACCESS_KEY", "nope"),
            ("OPENAI_PROJECT", "prefix-does-not-match"),
            ("PATH", "/usr/bin"),
            ("NO_COLOR", "0"),
            ("FORCE_COLOR", "3"),
            ("LD_PRELOAD", "/evil.so"),
            ("HOME", "/home/u"),
        ]);
        assert_eq!(
            env,
            vec![
                ("OPENAI_API_KEY".into(), "sk-1".into()),
                ("HOME".into(), "/home/u".into()),
                ("PATH".into(), "/usr/bin".into()),
                ("NO_COLOR".into(), "1".into()),
                ("FORCE_COLOR".into(), "0".into()),
            ]
        );
    }

    #[test]
    fn empty_values_are_skipped() {
        let env = filter_env([("OPENAI_BASE_URL", ""), ("LANG", "C.UTF-8")]);
        assert_eq!(get(&env, "OPENAI_BASE_URL"), None);
        assert_eq!(get(&env, "LANG"), Some("C.UTF-8"));
    }

    #[test]
    fn every_allowlisted_name_passes_and_nothing_else() {
        let all: Vec<(String, String)> = ALLOWED_VARS
            .iter()
            .map(|k| (k.to_string(), format!("v-{k}")))
            .chain([("CODEX_HOMEX".to_string(), "x".to_string())])
            .chain([("codex_home".to_string(), "x".to_string())])
            .collect();
        let env = filter_env(all);
        assert_eq!(env.len(), ALLOWED_VARS.len() + FORCED_VARS.len());
        for k in ALLOWED_VARS {
            assert_eq!(get(&env, k), Some(format!("v-{k}").as_str()));
        }
    }
}
