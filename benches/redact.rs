//! Throughput of the redactor over a deterministic 10 MiB corpus of realistic `codex exec --json`
//! JSONL (reasoning, agent messages, command output with paths, commit SHAs, UUID thread ids),
//! with a secret planted every few KiB, rotating among the recognised kinds.
//!
//! Setup asserts that every planted secret is gone and every SHA, UUID and path is kept, so the
//! bench cannot pass with a no-op (or an over-eager) redactor.

use std::hint::black_box;
use std::time::Duration;

use codex_mcp_bridge::security::redact::{REDACTED, Redactor};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const CORPUS_BYTES: usize = 10 << 20;
/// Roughly one secret per this many bytes.
const SECRET_EVERY: usize = 3 << 10;
/// A secret-named variable of the bench's pretend environment.
const ENV_SECRET_NAME: &str = "CODEX_BRIDGE_UPSTREAM_TOKEN";

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn string_of(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }

    fn alnum(&mut self, len: usize) -> String {
        self.string_of(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            len,
        )
    }

    fn hex(&mut self, len: usize) -> String {
        self.string_of(b"0123456789abcdef", len)
    }

    fn uuid(&mut self) -> String {
        format!(
            "{}-{}-7{}-{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(4),
            self.hex(12)
        )
    }

    /// Random base64 that certainly passes the "looks random" test: classes cycle so there are
    /// upper case, lower case and digits, and never two lower-case letters in a row.
    fn base64_secret(&mut self, len: usize) -> String {
        const CLASSES: [&[u8]; 4] = [
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            b"0123456789+/",
            b"abcdefghijklmnopqrstuvwxyz",
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        ];
        (0..len)
            .map(|i| {
                let class = CLASSES[i % CLASSES.len()];
                char::from(class[self.below(class.len())])
            })
            .collect()
    }
}

const PROSE: &[&str] = &[
    "I'll start by reading the module layout to see where the process supervision lives.",
    "The failing test expects the child to be killed when the request is cancelled, but the handle is dropped too early.",
    "Next, I'm going to run the test suite to confirm the fix does not break the session store.",
    "The configuration loader already validates the sandbox mode; the missing piece is the approval policy.",
    "I updated `src/codex/process.rs` so the process group is signalled before the pipes are closed.",
    "All 128 tests pass now, and clippy is clean with `-D warnings`.",
    "There are two call sites that format errors without going through the redactor; I fixed both.",
    "This keeps the token count low because only the summary is sent back to the client.",
    "The tokenizer settings are unrelated; the input_tokens figure comes straight from the usage event.",
    "I could not reproduce the flake locally after 50 runs, so I added a timeout and a retry with backoff.",
    "Paths are resolved relative to the workspace root and rejected if they escape it via symlinks.",
    "Let me check the git history for when this behaviour changed.",
];

const PATHS: &[&str] = &[
    "/home/user/work/codex-mcp-bridge/src/lib.rs",
    "/home/user/work/codex-mcp-bridge/src/codex/process.rs",
    "/home/user/work/codex-mcp-bridge/src/security/paths.rs",
    "src/components/Button2/ButtonGroupContainer/index.tsx",
    "/usr/lib/python3/site-packages/requests/adapters.py",
    "target/debug/deps/codex_mcp_bridge-4f98234456522330",
    "tests/integration/session_resume.rs",
];

const COMMANDS: &[&str] = &[
    "bash -lc 'cargo test'",
    "bash -lc 'git log -3'",
    "bash -lc 'rg -n \\\"fn resolve\\\" src'",
    "bash -lc 'cargo clippy --all-targets -- -D warnings'",
    "bash -lc 'ls -la src/security'",
];

/// A secret as it is planted in command output (JSON-escaped context) and the part of it that
/// must not survive.
fn secret(rng: &mut Rng, kind: usize, env_value: &str) -> (String, String) {
    match kind % 13 {
        0 => {
            let body = rng.alnum(56);
            (format!("OPENAI_API_KEY=sk-proj-{body}\\n"), body)
        }
        1 => {
            let body = rng.alnum(36);
            (format!("remote: using ghp_{body} for push\\n"), body)
        }
        2 => {
            let body = rng.string_of(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16);
            (
                format!("aws_access_key_id = AKIA{body}\\n"),
                format!("AKIA{body}"),
            )
        }
        3 => {
            let body = rng.string_of(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
                35,
            );
            (format!("GET /maps/api?key=AIza{body}&q=1\\n"), body)
        }
        4 => {
            let body = rng.alnum(24);
            (format!("slack: xoxb-{}-{body}\\n", rng.hex(12)), body)
        }
        5 => {
            let body = rng.alnum(20);
            (
                format!(
                    "git remote set-url origin https://oauth2:glpat-{body}@gitlab.com/g/p.git\\n"
                ),
                body,
            )
        }
        6 => {
            let sig = rng.alnum(43);
            let jwt = format!("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ{}.{sig}", rng.alnum(30));
            (format!("> Authorization: Bearer {jwt}\\n"), sig)
        }
        7 => {
            let body = rng.alnum(18);
            (
                format!("{{\\\"user\\\": \\\"ci\\\", \\\"password\\\": \\\"{body}\\\"}}\\n"),
                body,
            )
        }
        8 => {
            let body = rng.base64_secret(64);
            (
                format!(
                    "-----BEGIN OPENSSH PRIVATE KEY-----\\n{body}\\n{}\\n-----END OPENSSH PRIVATE KEY-----\\n",
                    rng.base64_secret(64)
                ),
                body,
            )
        }
        9 => {
            let body = rng.alnum(14);
            (
                format!("Cloning into 'repo'... https://deploy:{body}@git.example.com/repo.git\\n"),
                body,
            )
        }
        10 => {
            let body = rng.base64_secret(40);
            (format!("signing secret: {body}\\n"), body)
        }
        11 => (
            format!("upstream token {env_value} accepted\\n"),
            env_value.to_owned(),
        ),
        _ => {
            let body = rng.alnum(24);
            (format!("$ deploy --api-key {body} --region eu\\n"), body)
        }
    }
}

/// One line of the corpus, the secrets planted in it and the values that must be kept.
struct Line {
    text: String,
    planted: Vec<String>,
    kept: Vec<String>,
}

fn corpus(env_value: &str) -> Vec<Line> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut lines = Vec::new();
    let (mut total, mut next_secret, mut kind, mut item) = (0usize, SECRET_EVERY, 0usize, 0usize);
    while total < CORPUS_BYTES {
        let mut planted = Vec::new();
        let mut kept = Vec::new();
        let mut output = String::new();
        if total >= next_secret {
            let (text, body) = secret(&mut rng, kind, env_value);
            output.push_str(&text);
            planted.push(body);
            kind += 1;
            next_secret += SECRET_EVERY;
        }
        item += 1;
        // A planted secret goes into command output.
        let shape = if output.is_empty() {
            rng.below(8)
        } else {
            4 + rng.below(4)
        };
        let text = match shape {
            0 => {
                let id = rng.uuid();
                kept.push(id.clone());
                format!(r#"{{"type":"thread.started","thread_id":"{id}"}}"#)
            }
            1 | 2 => {
                let prose: Vec<&str> = (0..3).map(|_| rng.pick(PROSE)).collect();
                format!(
                    r#"{{"type":"item.completed","item":{{"id":"item_{item}","type":"reasoning","text":"**Planning**\n\n{}"}}}}"#,
                    prose.join(" ")
                )
            }
            3 => {
                let prose: Vec<&str> = (0..4).map(|_| rng.pick(PROSE)).collect();
                let path = rng.pick(PATHS);
                kept.push(path.to_owned());
                format!(
                    r#"{{"type":"item.completed","item":{{"id":"item_{item}","type":"agent_message","text":"{} See `{path}`."}}}}"#,
                    prose.join(" "),
                )
            }
            4 => {
                let sha = rng.hex(40);
                kept.push(sha.clone());
                output.push_str(&format!(
                    "commit {sha}\\nAuthor: Dev <dev@example.com>\\nDate:   Tue Mar 3 12:00:00 2026 +0000\\n\\n    {}\\n",
                    rng.pick(PROSE)
                ));
                for _ in 0..3 {
                    output.push_str(&format!("{} {}\\n", rng.hex(7), rng.pick(PROSE)));
                }
                format!(
                    r#"{{"type":"item.completed","item":{{"id":"item_{item}","type":"command_execution","command":"bash -lc 'git log -3'","aggregated_output":"{output}","exit_code":0,"status":"completed"}}}}"#
                )
            }
            5 => {
                let crate_hash = rng.hex(16);
                output.push_str(&format!(
                    "   Compiling codex-mcp-bridge v0.1.0 (/home/user/work/codex-mcp-bridge)\\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 41.07s\\n     Running unittests src/lib.rs (target/debug/deps/codex_mcp_bridge-{crate_hash})\\n\\nrunning 3 tests\\ntest security::paths::tests::rejects_dotdot ... ok\\ntest codex::events::tests::parses_item_completed ... ok\\ntest security::redact::tests::jwts ... ok\\n\\ntest result: ok. 3 passed; 0 failed; 0 ignored; finished in 0.02s\\n"
                ));
                format!(
                    r#"{{"type":"item.completed","item":{{"id":"item_{item}","type":"command_execution","command":"{}","aggregated_output":"{output}","exit_code":0,"status":"completed"}}}}"#,
                    rng.pick(COMMANDS)
                )
            }
            6 => {
                for _ in 0..4 {
                    output.push_str(&format!(
                        "{}:{}:    let token_count = usage.input_tokens + usage.output_tokens;\\n",
                        rng.pick(PATHS),
                        rng.below(900) + 1
                    ));
                }
                format!(
                    r#"{{"type":"item.completed","item":{{"id":"item_{item}","type":"command_execution","command":"{}","aggregated_output":"{output}","exit_code":0,"status":"completed"}}}}"#,
                    rng.pick(COMMANDS)
                )
            }
            _ => {
                let path = rng.pick(PATHS);
                let usage = format!(
                    r#"{{"type":"turn.completed","usage":{{"input_tokens":{},"cached_input_tokens":{},"output_tokens":{}}}}}"#,
                    rng.below(90_000),
                    rng.below(50_000),
                    rng.below(4_000)
                );
                if output.is_empty() {
                    format!(
                        r#"{{"type":"item.completed","item":{{"id":"item_{item}","type":"file_change","changes":[{{"path":"{path}","kind":"update"}}],"status":"completed"}}}}{}{usage}"#,
                        '\n'
                    )
                } else {
                    format!(
                        r#"{{"type":"item.completed","item":{{"id":"item_{item}","type":"command_execution","command":"bash -lc 'env'","aggregated_output":"{output}","exit_code":0,"status":"completed"}}}}"#
                    )
                }
            }
        };
        assert!(planted.iter().all(|p| text.contains(p.as_str())));
        total += text.len() + 1;
        lines.push(Line {
            text,
            planted,
            kept,
        });
    }
    lines
}

fn bench(c: &mut Criterion) {
    let env_value = "upstream-3b7Q-9xPz-Lm42-bridge";
    let redactor = Redactor::from_vars([
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/home/user"),
        (ENV_SECRET_NAME, env_value),
    ]);
    let lines = corpus(env_value);

    // The bench must not pass with a no-op or over-eager redactor.
    let (mut planted, mut kept) = (0, 0);
    for line in &lines {
        let out = redactor.redact(&line.text);
        for secret in &line.planted {
            assert!(
                !out.contains(secret.as_str()),
                "planted secret survived:\n{}\n->\n{out}",
                line.text
            );
            assert!(out.contains(REDACTED));
            planted += 1;
        }
        for value in &line.kept {
            assert!(out.contains(value.as_str()), "{value} was redacted:\n{out}");
            kept += 1;
        }
    }
    let text: String = lines.iter().map(|l| format!("{}\n", l.text)).collect();
    // Redacting the whole text at once is the same as line by line (no rule spans lines here).
    let per_line: String = lines
        .iter()
        .map(|l| format!("{}\n", redactor.redact(&l.text)))
        .collect();
    assert!(
        redactor.redact(&text) == per_line,
        "bulk and per-line redaction differ"
    );
    assert!(
        planted > 3000 && kept > 1000,
        "planted {planted}, kept {kept}"
    );

    let mut group = c.benchmark_group("redact");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("jsonl_10MiB_whole", |b| {
        b.iter(|| redactor.redact(black_box(&text)).len())
    });
    group.bench_function("jsonl_10MiB_per_line", |b| {
        b.iter(|| {
            lines
                .iter()
                .map(|l| redactor.redact(black_box(&l.text)).len())
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
