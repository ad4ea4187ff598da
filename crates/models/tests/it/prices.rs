//! The price catalogue file: the shipped one, a host's override, and every way a file can be
//! wrong.

use auto_swe_models::{ModelSpec, PriceCatalog, PriceFile, PriceSource, Usage};

const HEAD: &str = "version = 1\nunit = \"usd-per-million-tokens\"\n";

fn entry(id: &str, input: &str, checked: &str) -> String {
    format!(
        "[[model]]\nid = \"{id}\"\ninput = {input}\noutput = 2.0\ncacheRead = 0.1\n\
         cacheWrite5m = 1.25\ncacheWrite1h = 2.0\nchecked = \"{checked}\"\n"
    )
}

fn code(text: &str) -> &'static str {
    PriceFile::parse(text).unwrap_err().code()
}

#[test]
fn every_shipped_entry_is_dated_sourced_and_sane() {
    let file = PriceFile::builtin();
    assert!(file.entries.len() >= 20);
    for entry in &file.entries {
        assert!(!entry.source.is_empty(), "{} names its source", entry.id);
        let r = entry.price.rates;
        // A cache read never costs more than input, a write never less.
        assert!(r.cache_read <= r.input, "{}", entry.id);
        assert!(r.cache_write_5m >= r.input, "{}", entry.id);
        assert!(r.cache_write_1h >= r.cache_write_5m, "{}", entry.id);
    }
    // Today's flagship of each provider is listed.
    for id in [
        "anthropic/claude-opus-5-5",
        "openai/gpt-5.5",
        "google/gemini-3.1-pro-preview",
    ] {
        assert!(file.entries.iter().any(|e| e.id == id), "{id}");
    }
}

#[test]
fn a_host_file_overrides_the_shipped_price() {
    let text = format!(
        "{HEAD}{}",
        entry("anthropic/claude-opus-5-5", "3.0", "2026-12-01")
    );
    let file = PriceFile::parse(&text).unwrap();
    let mut catalog = PriceCatalog::builtin();
    catalog.apply(&file);
    let spec = ModelSpec::parse("anthropic/claude-opus-5-5").unwrap();
    let lookup = catalog.lookup(&spec);
    assert_eq!(lookup.source, PriceSource::Catalog);
    let price = lookup.price.unwrap();
    assert_eq!(price.rates.input, 3.0);
    // Multipliers follow the file's own rates: 0.1 / 3.0 → 33 thousandths.
    assert_eq!(price.cache.read_milli, 33);
    let usage = Usage {
        input: 1_000_000,
        ..Usage::default()
    };
    assert!((price.cost_usd(&usage) - 3.0).abs() < 1e-9);
}

#[test]
fn a_thousand_token_unit_is_scaled() {
    let text = format!(
        "version = 1\nunit = \"usd-per-thousand-tokens\"\n{}",
        entry("openai/gpt-x", "0.001", "2026-01-31")
    );
    let file = PriceFile::parse(&text).unwrap();
    assert!((file.entries[0].price.rates.input - 1.0).abs() < 1e-12);
}

#[test]
fn bad_files_are_refused_with_their_code() {
    let good = entry("openai/gpt-x", "1.0", "2026-01-31");
    let cases = [
        ("not toml [[[".to_owned(), "PRICE_FILE_SYNTAX"),
        (
            format!("version = 2\nunit = \"usd-per-million-tokens\"\n{good}"),
            "PRICE_FILE_VERSION",
        ),
        (
            format!("version = 1\nunit = \"eur-per-token\"\n{good}"),
            "PRICE_FILE_UNIT",
        ),
        (
            format!("{HEAD}{}", entry("acme/model", "1.0", "2026-01-31")),
            "PRICE_FILE_MODEL",
        ),
        (
            format!("{HEAD}{}", entry("no-slash", "1.0", "2026-01-31")),
            "PRICE_FILE_MODEL",
        ),
        (
            format!("{HEAD}{}", entry("openai/gpt-x", "-1.0", "2026-01-31")),
            "PRICE_FILE_RATE",
        ),
        (
            format!("{HEAD}{}", entry("openai/gpt-x", "nan", "2026-01-31")),
            "PRICE_FILE_RATE",
        ),
        (
            format!("{HEAD}{}", entry("openai/gpt-x", "inf", "2026-01-31")),
            "PRICE_FILE_RATE",
        ),
        (
            format!("{HEAD}{}", entry("openai/gpt-x", "1.0", "31/01/2026")),
            "PRICE_FILE_DATE",
        ),
        (
            format!("{HEAD}{}", entry("openai/gpt-x", "1.0", "2026-13-01")),
            "PRICE_FILE_DATE",
        ),
        (format!("{HEAD}{good}{good}"), "PRICE_FILE_DUPLICATE"),
        // A misspelt field is not silently ignored.
        (
            format!("{HEAD}{good}cacheReed = 0.1\n"),
            "PRICE_FILE_SYNTAX",
        ),
        // A missing rate is not read as zero.
        (
            format!(
                "{HEAD}[[model]]\nid = \"openai/gpt-x\"\ninput = 1.0\nchecked = \"2026-01-31\"\n"
            ),
            "PRICE_FILE_SYNTAX",
        ),
        (
            format!(
                "{HEAD}{good}[model.longContext]\nthreshold = 0\ninput = 1.0\noutput = 1.0\ncacheRead = 0.1\ncacheWrite5m = 1.0\ncacheWrite1h = 1.0\n"
            ),
            "PRICE_FILE_RATE",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(code(&text), expected, "{text}");
        assert!(!PriceFile::parse(&text).unwrap_err().is_retryable());
    }
}
