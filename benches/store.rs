//! Store benches: the cost of a durable write per turn, and reads with 100 000 known sessions.
//! `cargo bench --bench store`

use std::hint::black_box;

use codex_mcp_bridge::security::ids::SessionId;
use codex_mcp_bridge::store::{SessionRecord, Store};
use criterion::{Criterion, criterion_group, criterion_main};

const KNOWN: usize = 100_000;

fn record(i: usize) -> SessionRecord {
    let mut r = SessionRecord::new(
        SessionId::parse("sessionId", &format!("session-{i:06}")).unwrap(),
        "/work/some/repository".into(),
        1_700_000_000_000 + i as u64,
    );
    r.thread_id = Some(
        codex_mcp_bridge::security::ids::ThreadId::parse("019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b")
            .unwrap(),
    );
    r.model = Some("gpt-5.5".into());
    r.turn_count = 3;
    r
}

fn store_with(n: usize) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store")).unwrap();
    for i in 0..n {
        store.put(&record(i)).unwrap();
    }
    store.flush_blocking().unwrap();
    (dir, store)
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let (_d, store) = store_with(1000);
    let mut i = 0usize;
    c.bench_function("turn write + flush (durable)", |b| {
        b.iter(|| {
            i += 1;
            let mut r = record(i % 1000);
            r.turn_count += i as u64;
            r.last_used_ms += i as u64;
            store.put(&r).unwrap();
            rt.block_on(store.flush()).unwrap();
        })
    });
    c.bench_function("turn write, not flushed", |b| {
        b.iter(|| {
            i += 1;
            let mut r = record(i % 1000);
            r.last_used_ms += i as u64;
            store.put(&r).unwrap();
        })
    });

    let (_d2, big) = store_with(KNOWN);
    let ids: Vec<SessionId> = (0..1000)
        .map(|k| {
            SessionId::parse("sessionId", &format!("session-{:06}", (k * 97) % KNOWN)).unwrap()
        })
        .collect();
    let mut k = 0usize;
    c.bench_function("route: get one of 100k sessions", |b| {
        b.iter(|| {
            k = (k + 1) % ids.len();
            black_box(big.get(&ids[k]).unwrap());
        })
    });
    c.bench_function("list first page of 50 among 100k", |b| {
        b.iter(|| black_box(big.list(None, 50).unwrap()))
    });
}

criterion_group! {
    name = store;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(5));
    targets = benches
}
criterion_main!(store);
