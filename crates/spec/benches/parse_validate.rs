//! Parse + validate of the 200-node fixture against the bare `serde_json` parse of the same text.
//! The ratio of the two medians is the number that matters (target: at most 3×).

use std::hint::black_box;

use auto_swe_spec::{ReadMode, SourceFormat, ValidateOptions, read_spec, validate};
use criterion::{Criterion, criterion_group, criterion_main};

const LARGE: &str = include_str!("../tests/fixtures/valid/large-200.json");

fn parse_validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("large-200");
    group.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(LARGE)));
    });
    group.bench_function("read_spec", |b| {
        b.iter(|| read_spec(black_box(LARGE), SourceFormat::Json, ReadMode::Strict));
    });
    group.bench_function("read_spec_and_validate", |b| {
        b.iter(|| {
            let spec = read_spec(black_box(LARGE), SourceFormat::Json, ReadMode::Strict)
                .map_err(|error| error.to_string());
            spec.map(|spec| validate(&spec, &ValidateOptions::default()))
        });
    });
    let spec = read_spec(LARGE, SourceFormat::Json, ReadMode::Strict).ok();
    group.bench_function("validate_only", |b| {
        b.iter(|| {
            spec.as_ref()
                .map(|spec| validate(black_box(spec), &ValidateOptions::default()))
        });
    });
    group.finish();
}

criterion_group!(benches, parse_validate);
criterion_main!(benches);
