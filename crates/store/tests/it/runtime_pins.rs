//! A run's pinned runtimes through the agent library's `RuntimePinStore`: first-use pins by
//! compare-and-set on the whole map, concurrent pins that all land, and writes fenced by the
//! run's lease.

use std::collections::BTreeMap;

use auto_swe_agents::{
    AgentRef, AgentVersion, CredentialRef, InMemoryCredentialStore, LibraryStoreError, ResolveCtx,
    Resolver, Runtime, RuntimeSource, ScopeRef,
};
use auto_swe_store::{NewRun, RunPins};
use serde_json::json;
use std::sync::Arc;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    runtime_pins_are_written_by_compare_and_set_under_the_lease,
    concurrent_first_use_pins_all_land
);

fn pinned(entries: &[(&str, Option<Runtime>)]) -> BTreeMap<String, Option<Runtime>> {
    entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

async fn runtime_pins_are_written_by_compare_and_set_under_the_lease(db: &TestDb) {
    let start = RunPins {
        agent_runtimes: pinned(&[("implementer", Some(Runtime::Pi))]),
        ..RunPins::default()
    };
    let (run, claim) = db
        .leased_run(NewRun::new(json!({})).with_pins(start), "w1")
        .await;
    let pins = db.store.runtime_pins(claim.token());
    let current = pins.load(&run.id).await.unwrap();
    assert_eq!(current, pinned(&[("implementer", Some(Runtime::Pi))]));
    // A pin of "no opinion" is a pin too, and survives the round trip.
    let next = pinned(&[("implementer", Some(Runtime::Pi)), ("reviewer", None)]);
    assert!(
        pins.compare_and_set(&run.id, &current, next.clone())
            .await
            .unwrap()
    );
    // A writer who read the older map loses and writes nothing.
    let stale = pinned(&[
        ("implementer", Some(Runtime::Pi)),
        ("fixer", Some(Runtime::Native)),
    ]);
    assert!(
        !pins
            .compare_and_set(&run.id, &current, stale)
            .await
            .unwrap()
    );
    assert_eq!(pins.load(&run.id).await.unwrap(), next);
    assert_eq!(
        db.store.get_run(&run.id).await.unwrap().pins.agent_runtimes,
        next
    );
    // The handle writes only the run its lease holds; an unknown run has no pins to read.
    let (other, _) = db.leased_run(NewRun::new(json!({})), "w2").await;
    let refused = pins
        .compare_and_set(&other.id, &BTreeMap::new(), next.clone())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "STORE_INVALID");
    assert_eq!(
        pins.load("no-such-run").await.unwrap_err(),
        LibraryStoreError::NotFound
    );
    // A worker whose lease was taken over pins nothing.
    db.age_queue_entry(&run.id, std::time::Duration::from_secs(3_600))
        .await;
    let _takeover = db.claim_run(&run.id, "w3").await;
    let lost = pins
        .compare_and_set(&run.id, &next, pinned(&[("late", None)]))
        .await
        .unwrap_err();
    assert!(lost.to_string().contains("LEASE_LOST"), "{lost}");
    assert_eq!(pins.load(&run.id).await.unwrap(), next);
}

async fn concurrent_first_use_pins_all_land(db: &TestDb) {
    // Eight agents resolved for the first time at once in one run: every one is pinned, each
    // to its own runtime, and none overwrites another.
    let store = &db.store;
    let runtimes = [Runtime::Native, Runtime::ClaudeCode, Runtime::Pi];
    for i in 0..8 {
        let mut version = AgentVersion::new(&format!("agent-{i}"), ScopeRef::Global)
            .with_model("anthropic/claude");
        version.runtime = (i % 4 != 3).then(|| runtimes[i % 3]);
        store.append(version, None).await.unwrap();
    }
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let credentials = Arc::new(InMemoryCredentialStore::new());
    credentials.insert(CredentialRef::new("c", "anthropic", ScopeRef::Global));
    let resolver = Arc::new(Resolver::new(
        store.agent_store(),
        credentials,
        store.skill_store(),
    ));
    let mut ctx = ResolveCtx::global();
    ctx.run_id = Some(run.id.clone());
    let mut tasks = Vec::new();
    for i in 0..8 {
        let resolver = Arc::clone(&resolver);
        let pins = store.runtime_pins(claim.token());
        let ctx = ctx.clone();
        tasks.push(tokio::spawn(async move {
            resolver
                .resolve_runtime(
                    &AgentRef::key(&format!("agent-{i}")),
                    &ctx,
                    pins.as_ref(),
                    Runtime::Native,
                )
                .await
        }));
    }
    for task in tasks {
        let choice = task.await.unwrap().unwrap();
        assert!(matches!(
            choice.source,
            RuntimeSource::Run | RuntimeSource::Default
        ));
    }
    let stored = store.get_run(&run.id).await.unwrap().pins.agent_runtimes;
    let expected: BTreeMap<_, _> = (0..8)
        .map(|i| (format!("agent-{i}"), (i % 4 != 3).then(|| runtimes[i % 3])))
        .collect();
    assert_eq!(stored, expected);
}
