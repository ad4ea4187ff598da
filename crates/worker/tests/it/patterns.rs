//! The host's scanner rules reach the worker's scans: read from the store, swapped in whole,
//! a built-in rule replaced or switched off by id, and kept through a store outage.

use auto_swe_agents::PatternsProvider;
use auto_swe_scanners::{Pattern, PatternType, Severity, scan_all};
use auto_swe_worker::LivePatterns;

use crate::support::{Kind, TestStore};

fn fires(live: &LivePatterns, rule: &str, text: &str) -> bool {
    scan_all(&live.patterns(), text)
        .findings
        .iter()
        .any(|finding| finding.pattern_id == rule)
}

fn host_rule(id: &str, pattern: &str, enabled: bool) -> Pattern {
    Pattern {
        id: id.to_owned(),
        pattern_type: PatternType::ShellCommand,
        severity: Severity::Critical,
        pattern: pattern.to_owned(),
        flags: String::new(),
        description: "a host's own rule".to_owned(),
        enabled,
    }
}

#[tokio::test]
async fn host_rules_join_replace_and_switch_off_built_in_ones() {
    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let live = LivePatterns::load(db.store.clone()).await;
    // Read at load: complete, the built-in rules in force.
    assert!(!scan_all(&live.patterns(), "ls").incomplete);
    assert!(fires(&live, "sh.rm-rf-root", "rm -rf / "));
    assert!(
        !live.refresh().await.unwrap(),
        "nothing changed, nothing compiled"
    );

    // A new rule of the host's own.
    let ours = host_rule("host.frobnicate", r"\bfrobnicate\s+--all\b", true);
    db.store.put_pattern(&ours, Some("admin")).await.unwrap();
    assert!(!fires(&live, "host.frobnicate", "frobnicate --all"));
    assert!(live.refresh().await.unwrap());
    assert!(fires(&live, "host.frobnicate", "frobnicate --all"));

    // A disabled row with a built-in's id switches that built-in off ...
    let off = host_rule("sh.rm-rf-root", r"\brm\b", false);
    db.store.put_pattern(&off, Some("admin")).await.unwrap();
    live.refresh().await.unwrap();
    assert!(!fires(&live, "sh.rm-rf-root", "rm -rf / "));
    // ... an enabled one replaces it ...
    let replaced = host_rule("sh.rm-rf-root", r"\bshred\s+-u\b", true);
    db.store
        .put_pattern(&replaced, Some("admin"))
        .await
        .unwrap();
    live.refresh().await.unwrap();
    assert!(fires(&live, "sh.rm-rf-root", "shred -u notes.txt"));
    assert!(!fires(&live, "sh.rm-rf-root", "rm -rf / "));
    // ... and deleting the row brings the built-in back.
    assert!(db.store.delete_pattern("sh.rm-rf-root").await.unwrap());
    live.refresh().await.unwrap();
    assert!(fires(&live, "sh.rm-rf-root", "rm -rf / "));
    assert!(!fires(&live, "sh.rm-rf-root", "shred -u notes.txt"));

    // A store that cannot be read keeps the last set: the host's rule stays in force.
    db.store.close().await;
    assert!(live.refresh().await.is_err());
    assert!(fires(&live, "host.frobnicate", "frobnicate --all"));
    assert!(!scan_all(&live.patterns(), "ls").incomplete);
}

#[tokio::test]
async fn a_store_that_cannot_be_read_at_load_leaves_the_built_in_rules_marked_incomplete() {
    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let ours = host_rule("host.early", r"\bearly-bird\b", true);
    db.store.put_pattern(&ours, None).await.unwrap();
    db.store.close().await;
    let live = LivePatterns::load(db.store.clone()).await;
    assert!(
        scan_all(&live.patterns(), "ls").incomplete,
        "every scan says so"
    );
    assert!(fires(&live, "sh.rm-rf-root", "rm -rf / "));
    assert!(!fires(&live, "host.early", "early-bird"));
}

#[tokio::test]
async fn the_background_refresh_picks_up_a_write() {
    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let live = LivePatterns::load(db.store.clone()).await;
    let task = live.spawn_refresh(std::time::Duration::from_millis(50));
    let ours = host_rule("host.late", r"\blaunch-the-missiles\b", true);
    db.store.put_pattern(&ours, None).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !fires(&live, "host.late", "launch-the-missiles now") {
        assert!(
            std::time::Instant::now() < deadline,
            "the refresh never saw the rule"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    task.abort();
}
