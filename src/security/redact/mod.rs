//! Redaction of secrets from every string that leaves the process or is stored.
//!
//! Everything the bridge hands to a client, writes to a log or persists (Codex output, error
//! messages, progress notes) goes through [`redact`] first: Codex runs arbitrary commands, and
//! `env`, `cat .env`, `curl -v` or a failing `git push` print credentials that must not reach
//! the MCP client, the logs or the session store.
//!
//! A [`Redactor`] finds secrets with two matchers over the original text and replaces the union
//! of what they find with [`REDACTED`] in one copy:
//!
//! 1. **Literal values** (optional, [`Redactor::from_vars`]): an aho-corasick automaton
//!    (leftmost-longest) over the values of the server's own secret-named environment variables
//!    (`OPENAI_API_KEY`, `GITHUB_TOKEN`, ...), raw and JSON-escaped, so the operator's own
//!    credentials never leave the process whatever their shape. Values shorter than 8 bytes are
//!    ignored: they would redact ordinary words.
//! 2. **Patterns**: ONE compiled alternation [`regex::Regex`], built once in a
//!    [`LazyLock`](std::sync::LazyLock) and shared by all redactors. Every alternative has one capture group, the
//!    secret; only that group is replaced, so the context stays readable (`Bearer [REDACTED]`,
//!    `api_key=[REDACTED]`). The `regex` crate has no look-around, so ambiguous candidates are
//!    checked in code after the match; a rejected candidate is kept as is and the scan resumes
//!    inside it (at the next character, or at the next place where a secret could start), so a
//!    rejected candidate never hides a secret.
//!
//! # What is redacted
//!
//! | What | Example (→ output) |
//! |---|---|
//! | private key PEM blocks (RSA, EC, OpenSSH, PKCS#8, encrypted, PGP) | `-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----`; the body is base64, raw or JSON-escaped line breaks and armour headers (`Proc-Type:`, `DEK-Info:`, `Version:`, ...), so a truncated block loses its base64 and a bare mention of the header line stays |
//! | JWTs | `eyJhbGciOi….eyJzdWIi….sig` → `[REDACTED]` |
//! | OpenAI / Anthropic / Stripe keys | `sk-…`, `sk-proj-…`, `sk-ant-api03-…`, `sk_live_…`; at least 20 characters after `sk-`, one of them a digit or capital, so `sk-learn` and `sk-some-hyphenated-words` stay |
//! | GitHub, GitLab, Slack tokens | `ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_`, `github_pat_`, `glpat-`, `xox[abposr]-` |
//! | Google API keys | `AIza` + 35 characters |
//! | AWS access key ids | `AKIA` / `ASIA` + 16 capitals or digits |
//! | AWS secret keys | after a secret-named key (`aws_secret_access_key = …`), or alone as a random base64 blob (below) |
//! | HTTP bearer credentials | `Authorization: Bearer [REDACTED]` (the scheme stays; a plain word like "Bearer tokens" stays) |
//! | HTTP basic credentials | `Basic [REDACTED]`, `https://alice:[REDACTED]@example.com/x` (the user name stays) |
//! | values of secret-named keys | `api_key=[REDACTED]`, `API_KEY: [REDACTED]`, `{"password":"[REDACTED]"}`, `token=`, `secret=`, `client_secret`, `access_token`, `auth_token`, `OPENAI_API_KEY=`, `accessToken:`, `Cookie:`, JSON-escaped `\"password\": \"…\"`, `'…'`, `:=`, `=>`; the key name stays |
//! | values of secret-named flags | `--password [REDACTED]`, `--token …`, `--api-key …` |
//! | random-looking base64 | 32+ characters of `[A-Za-z0-9+/]` (and `=` padding) from an ASCII word boundary, with capitals, lower case and digits, no run of 16 hex digits, and random statistics (few lower-case pairs, high entropy); from 200 characters on, any such mixed run (a blob) |
//!
//! A secret-named key is one whose last word (after `_`, `-`, `.`, a camelCase hump or the
//! start) is `api_key`/`apikey`, `secret_key`, `secret_access_key`, `private_key`,
//! `access_key`, `client_secret`, `secret`, `password`, `passwd`, `passphrase`, `token`,
//! `credential(s)` or `cookie`, in any case.
//!
//! # What is deliberately kept
//!
//! - Git commit SHAs and other hex digests (no capitals, or a long hex run): commit ids are
//!   what clients and users act on.
//! - UUIDs: the `-` splits them into short runs; thread and session ids are needed by clients.
//! - File paths (`/home/user/src/lib.rs`, `src/components/Button2/…`), identifiers
//!   (`getHttp2ConnectionPoolManagerFactory`), long one-case words: not mixed, or not random.
//! - Talk about secrets: `sk-learn`, `token count: 15`, `"input_tokens": 1234`, `max_tokens`,
//!   `tokenizer`, `tiktoken`, "the bearer token": the key must *end* in a secret word at a word
//!   start, and values that are obviously not secrets are kept: empty, `null`/`true`/`false`/
//!   `none`, variable references (`$TOKEN`, `${OPENAI_API_KEY}`), numbers of fewer than 8
//!   digits (counts and limits: `token: 15`; longer ones may be PINs), and code: calls
//!   (`token = env::var(…)`) and, after `:`, type annotations (`api_key: String,`).
//! - Keys glued to another word without a separator (`MYSECRET=…`, `apitoken=…`): too many
//!   false positives and lazy-DFA states; the operator's own such variables are still covered
//!   by the literal values.
//!
//! Redaction is best effort by construction: a secret with no recognisable shape, no
//! secret-named key and not in the server's environment cannot be told from data. Where it
//! must guess it errs on the side of redacting: an unquoted value runs to the next delimiter, a
//! quoted one to its closing quote.
//!
//! The files, by job: `patterns.rs` (the alternation, its scan and its post-match checks),
//! `redactor.rs` (the [`Redactor`], literal values and the process-wide one) and `client.rs`
//! (a client connection's own literals). Each names its siblings directly; this file only
//! re-exports.

mod client;
mod patterns;
mod redactor;

pub use client::{
    ClientSecrets, Ignored, MAX_CLIENT_SECRET_BYTES, MAX_CLIENT_SECRETS, MAX_CLIENT_SECRETS_TOTAL,
    within_client_bounds,
};
pub use patterns::REDACTED;
pub use redactor::{Redactor, global, install, is_secret_name, redact, secret_values};
