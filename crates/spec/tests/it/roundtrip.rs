//! Round trips: any spec written as JSON or YAML reads back equal, and hashes the same.

use auto_swe_spec::{ReadMode, SourceFormat, content_hash, read_spec};
use proptest::prelude::*;

use crate::strategies::spec;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn json_round_trip(spec in spec()) {
        let text = serde_json::to_string(&spec).unwrap();
        let back = read_spec(&text, SourceFormat::Json, ReadMode::Strict).unwrap();
        prop_assert_eq!(&back, &spec);
        prop_assert_eq!(content_hash(&back).unwrap(), content_hash(&spec).unwrap());
    }

    #[test]
    fn yaml_round_trip(spec in spec()) {
        let text = serde_yaml_ng::to_string(&spec).unwrap();
        let back = read_spec(&text, SourceFormat::Yaml, ReadMode::Strict).unwrap();
        prop_assert_eq!(back, spec);
    }

    #[test]
    fn hash_ignores_node_order(spec in spec()) {
        let mut reversed = spec.clone();
        reversed.nodes.reverse();
        prop_assert_eq!(content_hash(&reversed).unwrap(), content_hash(&spec).unwrap());
    }
}
