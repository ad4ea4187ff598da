//! Memory items and nearest-neighbour search, checked against brute force.

use auto_swe_store::*;

use crate::conformance;
use crate::support::{TestDb, XorShift};

conformance!(
    search_returns_true_nearest_neighbours,
    memory_refuses_bad_input
);

fn brute_force<'a>(
    items: &'a [(String, Vec<f32>)],
    query: &[f32],
    k: usize,
) -> Vec<(&'a str, f64)> {
    let mut scored: Vec<_> = items
        .iter()
        .map(|(id, v)| (id.as_str(), cosine_distance(query, v)))
        .collect();
    scored.sort_by(|a, b| a.1.total_cmp(&b.1));
    scored.truncate(k);
    scored
}

async fn search_returns_true_nearest_neighbours(db: &TestDb) {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut org_a = Vec::new();
    let mut team_t = Vec::new();
    for n in 0..240 {
        let embedding = rng.vector(EMBEDDING_DIMENSIONS);
        let mut item = NewMemoryItem::new(
            "swe-lessons",
            "org-a",
            format!("lesson {n}"),
            embedding.clone(),
        );
        if n % 3 == 0 {
            item = item.with_team("team-t");
        }
        let stored = db.store.add_memory(item).await.unwrap();
        if n % 3 == 0 {
            team_t.push((stored.id.clone(), embedding.clone()));
        }
        org_a.push((stored.id, embedding));
    }
    // Other orgs and scopes hold vectors closer to the queries; they must never appear.
    let queries: Vec<Vec<f32>> = (0..5).map(|_| rng.vector(EMBEDDING_DIMENSIONS)).collect();
    for query in &queries {
        let near: Vec<f32> = query.iter().map(|v| v * 0.99).collect();
        db.store
            .add_memory(NewMemoryItem::new(
                "swe-lessons",
                "org-b",
                "theirs",
                near.clone(),
            ))
            .await
            .unwrap();
        db.store
            .add_memory(NewMemoryItem::new(
                "channel-memory",
                "org-a",
                "other scope",
                near,
            ))
            .await
            .unwrap();
    }

    for query in &queries {
        for (mode, team, truth) in [
            (SearchMode::Exact, None, &org_a),
            (SearchMode::Exact, Some("team-t"), &team_t),
            (SearchMode::Approximate, None, &org_a),
        ] {
            let hits = db
                .store
                .search_memory(&MemoryQuery {
                    scope: "swe-lessons".to_owned(),
                    org_id: "org-a".to_owned(),
                    team_id: team.map(str::to_owned),
                    connection_id: None,
                    embedding: query.clone(),
                    limit: 10,
                    mode,
                })
                .await
                .unwrap();
            let expected = brute_force(truth, query, 10);
            assert!(
                hits.iter()
                    .all(|h| h.item.org_id == "org-a" && h.item.scope == "swe-lessons")
            );
            let got: Vec<&str> = hits.iter().map(|h| h.item.id.as_str()).collect();
            let want: Vec<&str> = expected.iter().map(|(id, _)| *id).collect();
            match mode {
                SearchMode::Exact => {
                    assert_eq!(got, want, "exact search differs from brute force");
                    for (hit, (_, distance)) in hits.iter().zip(&expected) {
                        assert!(
                            (hit.distance - distance).abs() < 1e-4,
                            "{} vs {distance}",
                            hit.distance
                        );
                    }
                }
                SearchMode::Approximate => {
                    let recall = got.iter().filter(|id| want.contains(id)).count();
                    assert!(recall >= 9, "approximate recall {recall}/10");
                    assert!(hits.windows(2).all(|w| w[0].distance <= w[1].distance));
                }
            }
        }
    }
    let first = &org_a[0].0;
    let item = db.store.get_memory(first).await.unwrap();
    assert_eq!(item.content, "lesson 0");
    assert_eq!(item.team_id.as_deref(), Some("team-t"));
    db.store.delete_memory(first).await.unwrap();
    assert_eq!(
        db.store.get_memory(first).await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
    assert_eq!(
        db.store.delete_memory(first).await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
}

async fn memory_refuses_bad_input(db: &TestDb) {
    let mut rng = XorShift(7);
    let good = rng.vector(EMBEDDING_DIMENSIONS);
    let mut nan = good.clone();
    nan[3] = f32::NAN;
    for embedding in [
        vec![0.5; 3],
        vec![0.5; EMBEDDING_DIMENSIONS + 1],
        nan,
        vec![0.0; EMBEDDING_DIMENSIONS],
    ] {
        let item = NewMemoryItem::new("s", "org", "c", embedding.clone());
        assert_eq!(
            db.store.add_memory(item).await.unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
        let query = MemoryQuery {
            scope: "s".to_owned(),
            org_id: "org".to_owned(),
            team_id: None,
            connection_id: None,
            embedding,
            limit: 10,
            mode: SearchMode::Exact,
        };
        assert_eq!(
            db.store.search_memory(&query).await.unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
    }
    for limit in [0, MAX_SEARCH_LIMIT + 1] {
        let query = MemoryQuery {
            scope: "s".to_owned(),
            org_id: "org".to_owned(),
            team_id: None,
            connection_id: None,
            embedding: good.clone(),
            limit,
            mode: SearchMode::Approximate,
        };
        assert_eq!(
            db.store.search_memory(&query).await.unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
    }
    let huge = NewMemoryItem::new(
        "s",
        "org",
        "x".repeat(MAX_LONG_TEXT_BYTES + 1),
        good.clone(),
    );
    assert_eq!(
        db.store.add_memory(huge).await.unwrap_err().code(),
        "STORE_VALUE_TOO_LARGE"
    );
    let empty_scope = NewMemoryItem::new("", "org", "c", good);
    assert_eq!(
        db.store.add_memory(empty_scope).await.unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
}
