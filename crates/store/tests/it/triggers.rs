//! Triggers and their delivery ledger: sealed secrets, replays, skips, limits, and concurrent
//! deliveries racing for the last places under a limit.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_store::*;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    triggers_keep_their_secret_sealed_and_their_settings_checked,
    a_delivery_is_decided_once_by_its_webhook_id,
    limits_count_started_and_starting_runs_in_their_windows,
    concurrent_deliveries_never_pass_a_limit_together,
    key_rotation_reseals_trigger_secrets
);

const SECRET: &str = "whsec_c2VjcmV0LWJ5dGVzLWZvci10ZXN0cy1vbmx5LTEyMzQ=";

/// A template and its creator.
async fn template(db: &TestDb) -> (WorkflowTemplate, User) {
    let user = db
        .store
        .create_user("lead@example.test", "Lead")
        .await
        .unwrap();
    let template = db
        .store
        .create_template(NewTemplate {
            team_id: None,
            name: "triage".to_owned(),
            description: String::new(),
        })
        .await
        .unwrap();
    (template, user)
}

async fn trigger(db: &TestDb, daily_limit: Option<u32>, types: Option<Vec<&str>>) -> Trigger {
    let (template, user) = template(db).await;
    db.store
        .create_trigger(
            NewTrigger {
                template_id: template.id,
                name: "tracker".to_owned(),
                created_by: user.id,
                daily_limit,
                event_types: types.map(|t| t.into_iter().map(str::to_owned).collect()),
            },
            &SecretString::new(SECRET),
        )
        .await
        .unwrap()
}

async fn triggers_keep_their_secret_sealed_and_their_settings_checked(db: &TestDb) {
    let (template, user) = template(db).await;
    let new = |name: &str| NewTrigger {
        template_id: template.id.clone(),
        name: name.to_owned(),
        created_by: user.id.clone(),
        daily_limit: None,
        event_types: None,
    };
    let created = db
        .store
        .create_trigger(new("a"), &SecretString::new(SECRET))
        .await
        .unwrap();
    assert_eq!(created.daily_limit, DEFAULT_TRIGGER_DAILY_LIMIT);
    assert_eq!(created.event_types, None);
    assert!(!created.paused);
    assert_eq!(db.store.get_trigger(&created.id).await.unwrap(), created);
    assert_eq!(
        db.store.trigger_secret(&created.id).await.unwrap().expose(),
        SECRET
    );
    // At rest the secret is an envelope, bound to its row.
    assert_eq!(
        db.raw_count(&format!(
            "SELECT COUNT(*) FROM triggers WHERE secret_envelope LIKE '%{}%'",
            &SECRET[6..20]
        ))
        .await,
        0
    );
    let other = db
        .store
        .create_trigger(new("b"), &SecretString::new("whsec_other"))
        .await
        .unwrap();
    db.raw_execute(&format!(
        "UPDATE triggers SET secret_envelope = (SELECT secret_envelope FROM triggers \
         WHERE id = '{}') WHERE id = '{}'",
        created.id, other.id
    ))
    .await;
    assert_eq!(
        db.store.trigger_secret(&other.id).await.unwrap_err().code(),
        "SECRET_OPEN_FAILED"
    );

    // Settings: checked, changed one field at a time, listed oldest first.
    for bad in [
        TriggerUpdate {
            daily_limit: Some(0),
            ..TriggerUpdate::default()
        },
        TriggerUpdate {
            daily_limit: Some(MAX_TRIGGER_DAILY_LIMIT + 1),
            ..TriggerUpdate::default()
        },
        TriggerUpdate {
            event_types: Some(Some(vec![])),
            ..TriggerUpdate::default()
        },
        TriggerUpdate {
            name: Some(" ".to_owned()),
            ..TriggerUpdate::default()
        },
    ] {
        let error = db
            .store
            .update_trigger(&created.id, bad.clone())
            .await
            .unwrap_err();
        assert_eq!(error.code(), "STORE_INVALID_INPUT", "{bad:?}");
    }
    assert_eq!(db.store.get_trigger(&created.id).await.unwrap(), created);
    db.clock.advance(Duration::from_secs(1));
    let changed = db
        .store
        .update_trigger(
            &created.id,
            TriggerUpdate {
                paused: Some(true),
                daily_limit: Some(1_000),
                event_types: Some(Some(vec!["issue.created".to_owned()])),
                ..TriggerUpdate::default()
            },
        )
        .await
        .unwrap();
    assert!(changed.paused);
    assert_eq!(changed.name, "a");
    assert_eq!(changed.daily_limit, 1_000);
    assert_eq!(
        changed.event_types.as_deref(),
        Some(&["issue.created".to_owned()][..])
    );
    assert!(changed.updated_at > created.updated_at);
    let every = db
        .store
        .update_trigger(
            &created.id,
            TriggerUpdate {
                event_types: Some(None),
                ..TriggerUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(every.event_types, None);
    assert!(every.paused, "fields not named stay as they were");
    let listed = db.store.list_triggers(&template.id).await.unwrap();
    assert_eq!(
        listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );

    // A new secret replaces the old one.
    let rotated = db
        .store
        .rotate_trigger_secret(&created.id, &SecretString::new("whsec_new"))
        .await
        .unwrap();
    assert_eq!(rotated.id, created.id);
    assert_eq!(
        db.store.trigger_secret(&created.id).await.unwrap().expose(),
        "whsec_new"
    );
    assert_eq!(
        db.store
            .rotate_trigger_secret(&created.id, &SecretString::new(""))
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );

    // Missing rows and templates.
    let missing = "00000000-0000-7000-8000-000000000000";
    assert_eq!(
        db.store.get_trigger(missing).await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
    let mut orphan = new("c");
    orphan.template_id = missing.to_owned();
    assert_eq!(
        db.store
            .create_trigger(orphan, &SecretString::new(SECRET))
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );

    // At most 50 a template.
    for i in 2..MAX_TRIGGERS_PER_TEMPLATE {
        db.store
            .create_trigger(new(&format!("t{i}")), &SecretString::new(SECRET))
            .await
            .unwrap();
    }
    assert_eq!(
        db.store
            .create_trigger(new("one too many"), &SecretString::new(SECRET))
            .await
            .unwrap_err()
            .code(),
        "STORE_CONFLICT"
    );

    // Deleting takes the ledger with it.
    db.store
        .admit_delivery(&created.id, "msg_1", None)
        .await
        .unwrap();
    db.store.delete_trigger(&created.id).await.unwrap();
    assert_eq!(
        db.store
            .delete_trigger(&created.id)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM trigger_deliveries")
            .await,
        0
    );
    assert_eq!(
        db.store
            .admit_delivery(&created.id, "msg_1", None)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
}

async fn a_delivery_is_decided_once_by_its_webhook_id(db: &TestDb) {
    let trigger = trigger(db, None, Some(vec!["issue.created"])).await;
    let admit = |id: &'static str, kind: Option<&'static str>| {
        let store = db.store.clone();
        let trigger_id = trigger.id.clone();
        async move { store.admit_delivery(&trigger_id, id, kind).await.unwrap() }
    };
    assert_eq!(
        admit("m1", Some("issue.created")).await,
        Admission::Admitted
    );
    // While it starts, a retry waits; once started, a retry answers its run.
    let Admission::InProgress { retry_after } = admit("m1", Some("issue.created")).await else {
        unreachable!("a retry while starting must wait")
    };
    assert_eq!(retry_after, DELIVERY_START_TIMEOUT);
    db.store
        .mark_delivery_started(&trigger.id, "m1", "run-1")
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(
            admit("m1", Some("issue.created")).await,
            Admission::Replayed {
                run_id: "run-1".to_owned()
            }
        );
    }
    // A started delivery cannot be re-pointed at another run, nor failed.
    assert_eq!(
        db.store
            .mark_delivery_started(&trigger.id, "m1", "run-2")
            .await
            .unwrap_err()
            .code(),
        "STORE_CONFLICT"
    );
    db.store
        .mark_delivery_failed(&trigger.id, "m1")
        .await
        .unwrap();
    assert_eq!(
        admit("m1", Some("issue.created")).await,
        Admission::Replayed {
            run_id: "run-1".to_owned()
        }
    );

    // One whose run could not begin is taken again.
    assert_eq!(
        admit("m2", Some("issue.created")).await,
        Admission::Admitted
    );
    db.store
        .mark_delivery_failed(&trigger.id, "m2")
        .await
        .unwrap();
    assert_eq!(
        admit("m2", Some("issue.created")).await,
        Admission::Admitted
    );
    // One left starting past the timeout is taken again too.
    db.clock.advance(DELIVERY_START_TIMEOUT);
    assert_eq!(
        admit("m2", Some("issue.created")).await,
        Admission::Admitted
    );

    // Events of other types, or of none, are skipped, and stay skipped.
    let skipped = Admission::Skipped {
        reason: SkipReason::EventType,
    };
    assert_eq!(admit("m3", Some("issue.updated")).await, skipped);
    assert_eq!(admit("m4", None).await, skipped);
    db.store
        .update_trigger(
            &trigger.id,
            TriggerUpdate {
                event_types: Some(None),
                ..TriggerUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(admit("m3", Some("issue.updated")).await, skipped);

    // A paused trigger skips; resumed, that delivery stays skipped and a new one starts.
    let pause = |paused: bool| TriggerUpdate {
        paused: Some(paused),
        ..TriggerUpdate::default()
    };
    db.store
        .update_trigger(&trigger.id, pause(true))
        .await
        .unwrap();
    let paused = Admission::Skipped {
        reason: SkipReason::Paused,
    };
    assert_eq!(admit("m5", Some("issue.created")).await, paused);
    db.store
        .update_trigger(&trigger.id, pause(false))
        .await
        .unwrap();
    assert_eq!(admit("m5", Some("issue.created")).await, paused);
    assert_eq!(
        admit("m6", Some("issue.created")).await,
        Admission::Admitted
    );

    let ledger = db.store.trigger_deliveries(&trigger.id, 10).await.unwrap();
    let state_of = |id: &str| {
        ledger
            .iter()
            .find(|d| d.webhook_id == id)
            .map(|d| (d.state, d.reason))
            .unwrap()
    };
    assert_eq!(state_of("m1"), (DeliveryState::Started, None));
    assert_eq!(
        state_of("m3"),
        (DeliveryState::Skipped, Some(SkipReason::EventType))
    );
    assert_eq!(
        state_of("m5"),
        (DeliveryState::Skipped, Some(SkipReason::Paused))
    );
    assert_eq!(state_of("m6"), (DeliveryState::Starting, None));

    // Bad ids are refused before anything is written.
    for bad in ["", "has space", &"x".repeat(256)] {
        assert_eq!(
            db.store
                .admit_delivery(&trigger.id, bad, None)
                .await
                .unwrap_err()
                .code(),
            "STORE_INVALID_INPUT"
        );
    }

    // After seven days a delivery is forgotten: the same id is a new delivery.
    db.clock.advance(DELIVERY_RETENTION);
    assert_eq!(
        admit("m1", Some("issue.created")).await,
        Admission::Admitted
    );
    let ledger = db.store.trigger_deliveries(&trigger.id, 10).await.unwrap();
    assert_eq!(ledger.len(), 1, "{ledger:?}");
}

async fn limits_count_started_and_starting_runs_in_their_windows(db: &TestDb) {
    let trigger = trigger(db, Some(12), None).await;
    let admit = |id: String| {
        let store = db.store.clone();
        let trigger_id = trigger.id.clone();
        async move { store.admit_delivery(&trigger_id, &id, None).await.unwrap() }
    };
    // Ten in a minute: started and starting both count, failed and skipped do not.
    assert_eq!(admit("failed".to_owned()).await, Admission::Admitted);
    db.store
        .mark_delivery_failed(&trigger.id, "failed")
        .await
        .unwrap();
    for i in 0..TRIGGER_RUNS_PER_MINUTE {
        assert_eq!(admit(format!("a{i}")).await, Admission::Admitted);
        if i % 2 == 0 {
            db.store
                .mark_delivery_started(&trigger.id, &format!("a{i}"), &format!("run-{i}"))
                .await
                .unwrap();
        }
        db.clock.advance(Duration::from_secs(1));
    }
    let Admission::Limited { limit, retry_after } = admit("over".to_owned()).await else {
        unreachable!("the eleventh in a minute must be limited")
    };
    assert_eq!(limit, TriggerLimit::PerMinute);
    // The oldest counted run leaves the window 60 s after it was admitted, 10 s ago.
    assert_eq!(retry_after, Duration::from_secs(50));
    // Refused: nothing recorded, so the same id is taken once there is room.
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM trigger_deliveries WHERE webhook_id = 'over'")
            .await,
        0
    );
    db.clock.advance(Duration::from_secs(50));
    assert_eq!(admit("over".to_owned()).await, Admission::Admitted);
    db.clock.advance(Duration::from_secs(10));
    assert_eq!(admit("twelfth".to_owned()).await, Admission::Admitted);

    // Twelve a day: the thirteenth waits for the first counted one to be a day old.
    db.clock.advance(Duration::from_secs(120));
    let Admission::Limited { limit, retry_after } = admit("day".to_owned()).await else {
        unreachable!("past the daily number must be limited")
    };
    assert_eq!(limit, TriggerLimit::Daily);
    assert_eq!(retry_after, Duration::from_secs(24 * 3_600 - 190));
    // Raising the number makes room at once.
    db.store
        .update_trigger(
            &trigger.id,
            TriggerUpdate {
                daily_limit: Some(13),
                ..TriggerUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(admit("day".to_owned()).await, Admission::Admitted);
    // A day later the window is empty again.
    db.clock.advance(Duration::from_secs(24 * 3_600));
    assert_eq!(admit("tomorrow".to_owned()).await, Admission::Admitted);
}

async fn concurrent_deliveries_never_pass_a_limit_together(db: &TestDb) {
    const LIMIT: u32 = 4;
    const SENDERS: usize = 16;
    let trigger = trigger(db, Some(LIMIT), None).await;
    // Each sender on its own store (its own pool), as separate server processes would be.
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(db.reopen(crate::support::keyring()).await);
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(SENDERS));
    let mut tasks = Vec::new();
    for i in 0..SENDERS {
        let store = stores[i % stores.len()].clone();
        let barrier = Arc::clone(&barrier);
        let trigger_id = trigger.id.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            store
                .admit_delivery(&trigger_id, &format!("race-{i}"), None)
                .await
                .unwrap()
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        match task.await.unwrap() {
            Admission::Admitted => admitted += 1,
            Admission::Limited { limit, .. } => assert_eq!(limit, TriggerLimit::Daily),
            other => unreachable!("{other:?}"),
        }
    }
    assert_eq!(admitted, LIMIT);
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM trigger_deliveries")
            .await,
        i64::from(LIMIT)
    );

    // The same webhook-id sent at once by many: one admission, the rest wait for it.
    let barrier = Arc::new(tokio::sync::Barrier::new(SENDERS));
    let other = self::trigger_on(db, &trigger).await;
    let mut tasks = Vec::new();
    for i in 0..SENDERS {
        let store = stores[i % stores.len()].clone();
        let barrier = Arc::clone(&barrier);
        let trigger_id = other.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            store
                .admit_delivery(&trigger_id, "same", None)
                .await
                .unwrap()
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        match task.await.unwrap() {
            Admission::Admitted => admitted += 1,
            Admission::InProgress { .. } => {}
            other => unreachable!("{other:?}"),
        }
    }
    assert_eq!(admitted, 1);
    for store in stores {
        store.close().await;
    }
}

/// Another trigger on `trigger`'s template.
async fn trigger_on(db: &TestDb, trigger: &Trigger) -> String {
    db.store
        .create_trigger(
            NewTrigger {
                template_id: trigger.template_id.clone(),
                name: "second".to_owned(),
                created_by: trigger.created_by.clone(),
                daily_limit: None,
                event_types: None,
            },
            &SecretString::new(SECRET),
        )
        .await
        .unwrap()
        .id
}

async fn key_rotation_reseals_trigger_secrets(db: &TestDb) {
    let trigger = trigger(db, None, None).await;
    let rotated = crate::support::keyring().rotate_to(2, [0x22; 32]).unwrap();
    let store = db.reopen(rotated).await;
    assert_eq!(store.rotate_secrets().await.unwrap(), 1);
    assert_eq!(store.rotate_secrets().await.unwrap(), 0);
    assert_eq!(
        store.trigger_secret(&trigger.id).await.unwrap().expose(),
        SECRET
    );
    // Only the new key opens it now.
    let new_key_only = db.reopen(Keyring::single(2, [0x22; 32])).await;
    assert_eq!(
        new_key_only
            .trigger_secret(&trigger.id)
            .await
            .unwrap()
            .expose(),
        SECRET
    );
    assert_eq!(
        db.store
            .trigger_secret(&trigger.id)
            .await
            .unwrap_err()
            .code(),
        "SECRET_UNKNOWN_KEY_VERSION"
    );
    store.close().await;
    new_key_only.close().await;
}
