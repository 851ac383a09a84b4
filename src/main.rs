//! `codex-mcp-bridge`: the allocator, then the start-up ([`codex_mcp_bridge::cli::entry::main`]:
//! settings, logging, the server on stdin and stdout, the owner daemon, the subcommands).

/// jemalloc (the `jemalloc` feature, which the packages are built with), configured to give
/// memory back: after a burst of turns glibc's malloc kept about
/// 4.5 MiB of the server's anonymous memory (freed blocks held in each thread's cache and
/// scattered between live ones), jemalloc so configured about 2 MiB (benches/README.md).
#[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc reads its settings from this symbol when it starts (an operator's
/// `_RJEM_MALLOC_CONF` in the environment is applied after them, so it wins): one arena; no per-thread
/// caches (with them a burst left 7 MiB more behind: each of the ~20 threads keeps what it
/// freed); freed pages returned to the system at once rather than after 10 s of further
/// allocator activity (the server may go idle before that comes).
#[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu"))]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8; 57] = b"narenas:1,tcache:false,dirty_decay_ms:0,muzzy_decay_ms:0\0";

fn main() -> std::process::ExitCode {
    codex_mcp_bridge::cli::entry::main()
}
