//! The fixture corpus: every valid fixture validates clean; every invalid fixture reports the
//! code it is named after. Reports are snapshotted.

use std::collections::BTreeSet;
use std::path::Path;

use auto_swe_spec::{
    Code, ReadMode, Report, SourceFormat, StepCatalog, ValidateOptions, parse_document, read_spec,
    validate_value,
};

fn fixture_report(path: &Path) -> Report {
    let text = std::fs::read_to_string(path).unwrap();
    let format = SourceFormat::from_path(path).unwrap();
    let value = parse_document(&text, format).unwrap();
    let catalog_path = path.with_extension("catalog.json");
    let catalog: Option<StepCatalog> = catalog_path
        .exists()
        .then(|| serde_json::from_str(&std::fs::read_to_string(&catalog_path).unwrap()).unwrap());
    let options = catalog
        .as_ref()
        .map_or_else(ValidateOptions::default, ValidateOptions::with_step_catalog);
    // `<CODE>.connections.json`: the connection ids the template may use.
    let connections_path = path.with_extension("connections.json");
    let connections: Option<BTreeSet<String>> = connections_path.exists().then(|| {
        serde_json::from_str(&std::fs::read_to_string(&connections_path).unwrap()).unwrap()
    });
    let options = match &connections {
        Some(connections) => options.with_reachable_connections(connections),
        None => options,
    };
    validate_value(&value, &options)
}

/// A catalog or connection list beside a fixture, not a fixture itself.
fn is_catalog(path: &Path) -> bool {
    let name = path.to_string_lossy();
    name.ends_with(".catalog.json") || name.ends_with(".connections.json")
}

#[test]
fn valid_fixtures_have_no_diagnostics() {
    insta::glob!("../fixtures", "valid/*.{json,yaml}", |path| {
        let report = fixture_report(path);
        assert_eq!(report, Report::default(), "{}", path.display());
        let text = std::fs::read_to_string(path).unwrap();
        let format = SourceFormat::from_path(path).unwrap();
        read_spec(&text, format, ReadMode::Strict).unwrap();
    });
}

#[test]
fn invalid_fixtures_report_their_code() {
    insta::glob!("../fixtures", "invalid/*.json", |path| {
        if is_catalog(path) {
            return;
        }
        let report = fixture_report(path);
        let stem = path.file_stem().unwrap().to_str().unwrap();
        assert!(
            report.codes().iter().any(|code| code.as_str() == stem),
            "{stem}: {report:#?}"
        );
        insta::assert_json_snapshot!(report);
    });
}

#[test]
fn the_corpus_covers_every_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/invalid");
    for code in Code::ALL {
        let fixture = dir.join(format!("{code}.json"));
        assert!(fixture.exists(), "no fixture for {code}");
    }
}

#[test]
fn every_node_type_is_in_the_node_type_fixture() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid/every-node-type.json");
    let text = std::fs::read_to_string(path).unwrap();
    let spec = read_spec(&text, SourceFormat::Json, ReadMode::Strict).unwrap();
    let mut seen: Vec<&str> = Vec::new();
    for node in &spec.nodes {
        seen.push(node.kind.type_name());
        if let auto_swe_spec::NodeKind::FanOut(fan) = &node.kind {
            seen.extend(
                fan.subgraph
                    .nodes
                    .iter()
                    .map(|inner| inner.kind.type_name()),
            );
        }
    }
    for kind in auto_swe_spec::NODE_TYPES {
        assert!(seen.contains(&kind), "{kind} missing");
    }
}
