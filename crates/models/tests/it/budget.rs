//! Pricing, counted tokens, tiers and the meter.

use auto_swe_models::{
    ANTHROPIC_CACHE, CacheMultipliers, CallLog, Meter, MeterConfig, MeteredCall, ModelSpec, Price,
    PriceCatalog, PriceSource, Rates, Spend, Tier, TokenCaps, Usage, counted_input, group,
    usd_to_micros,
};

fn spec(text: &str) -> ModelSpec {
    ModelSpec::parse(text).unwrap()
}

fn cached(uncached: u64, read: u64, w5: u64, w1: u64, output: u64) -> Usage {
    Usage {
        input: uncached + read + w5 + w1,
        output,
        cache_read: read,
        cache_write_5m: w5,
        cache_write_1h: w1,
        reasoning: 0,
        cache_reported: true,
    }
}

#[test]
fn spend_is_integer_micro_dollars() {
    assert_eq!(usd_to_micros(0.000_000_4), 0);
    assert_eq!(usd_to_micros(0.000_000_5), 1);
    assert_eq!(usd_to_micros(1.25), 1_250_000);
    for bad in [-3.0, f64::NAN, f64::NEG_INFINITY, f64::INFINITY] {
        assert_eq!(usd_to_micros(bad), 0, "{bad}");
    }
    assert_eq!(usd_to_micros(1e300), 9_000_000_000_000_000);

    let totals = auto_swe_models::MeterTotals {
        counted_input: 1_500,
        raw_input: 9_000,
        output: 70,
        cost_usd: 0.012_345_6,
        calls: 2,
    };
    assert_eq!(
        totals.spend(),
        Spend {
            cost_micros: 12_346,
            input_tokens: 1_500,
            output_tokens: 70,
        }
    );
}

#[test]
fn tiers_have_the_seeds_caps() {
    assert_eq!(Tier::default(), Tier::Standard);
    assert_eq!(
        Tier::Standard.default_caps(),
        TokenCaps {
            input: 2_000_000,
            output: 500_000
        }
    );
    assert_eq!(
        Tier::Large.default_caps(),
        TokenCaps {
            input: 8_000_000,
            output: 2_000_000
        }
    );
    assert_eq!(
        Tier::Epic.default_caps(),
        TokenCaps {
            input: 20_000_000,
            output: 5_000_000
        }
    );
}

#[test]
fn counted_input_uses_cache_multipliers() {
    let catalog = PriceCatalog::builtin();
    let sonnet = catalog.lookup(&spec("anthropic/claude-sonnet-4-5-20250929"));
    assert_eq!(sonnet.source, PriceSource::Builtin);
    let price = sonnet.price.unwrap();
    assert_eq!(price.cache, ANTHROPIC_CACHE);
    // 1,000 uncached + 10,000 read at 0.1 + 1,000 5m-write at 1.25 + 1,000 1h-write at 2.
    assert_eq!(
        counted_input(&cached(1_000, 10_000, 1_000, 1_000, 0), Some(&price)),
        1_000 + 1_000 + 1_250 + 2_000
    );
    // No cache breakdown, or no price: raw.
    let raw = Usage {
        input: 5_000,
        ..Usage::default()
    };
    assert_eq!(counted_input(&raw, Some(&price)), 5_000);
    assert_eq!(counted_input(&cached(1_000, 10_000, 0, 0, 0), None), 11_000);
}

#[test]
fn cost_per_call_and_price_sources() {
    let catalog = PriceCatalog::builtin();
    let haiku = catalog
        .lookup(&spec("anthropic/claude-haiku-4-5-20251001"))
        .price
        .unwrap();
    // $1/M uncached, $0.10/M read, $1.25/M 5m, $2/M 1h, $5/M output.
    let cost = haiku.cost_usd(&cached(
        1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000,
    ));
    assert!(
        (cost - (1.0 + 0.1 + 1.25 + 2.0 + 5.0)).abs() < 1e-9,
        "{cost}"
    );
    // Long context: Sonnet 4.5 above 200k input tokens is priced at the long rates.
    let sonnet = catalog
        .lookup(&spec("anthropic/claude-sonnet-4-5"))
        .price
        .unwrap();
    let long = Usage {
        input: 300_000,
        output: 0,
        ..Usage::default()
    };
    assert!((sonnet.cost_usd(&long) - 300_000.0 * 6.0 / 1e6).abs() < 1e-9);
    assert_eq!(
        catalog.lookup(&spec("openai-compatible/llama")).source,
        PriceSource::Unknown
    );
    // The seeds' defaults are priced by the shipped catalogue, with their own cache rates
    // (reads at 0.05 × input on the 5.5 generation).
    let opus = catalog.lookup(&spec("anthropic/claude-opus-5-5"));
    assert_eq!(opus.source, PriceSource::Builtin);
    let opus = opus.price.unwrap();
    assert_eq!((opus.rates.input, opus.rates.output), (4.0, 20.0));
    assert_eq!(
        opus.cache,
        CacheMultipliers {
            read_milli: 50,
            write_5m_milli: 1250,
            write_1h_milli: 2000
        }
    );
    // Claude Opus 5 is its own entry: the 5.5 id does not fall back to it.
    assert_eq!(
        catalog
            .lookup(&spec("anthropic/claude-opus-5-20260724"))
            .price
            .unwrap()
            .rates
            .input,
        5.0
    );
    // Dated snapshots match; a different model with a shared prefix does not.
    assert_eq!(
        catalog
            .lookup(&spec("openai/gpt-4.1-2025-04-14"))
            .price
            .unwrap()
            .rates
            .input,
        2.0
    );
    assert_eq!(
        catalog
            .lookup(&spec("openai/gpt-4.1-mini"))
            .price
            .unwrap()
            .rates
            .input,
        0.4
    );
    assert_eq!(
        catalog.lookup(&spec("openai/gpt-4.1-nano")).source,
        PriceSource::Unknown
    );

    let mut host = PriceCatalog::builtin();
    let custom = Price {
        rates: Rates {
            input: 9.0,
            output: 9.0,
            cache_read: 0.9,
            cache_write_5m: 9.0,
            cache_write_1h: 9.0,
        },
        long_context: None,
        cache: CacheMultipliers {
            read_milli: 100,
            write_5m_milli: 1000,
            write_1h_milli: 1000,
        },
    };
    host.set("anthropic/claude-haiku-4-5", custom);
    let lookup = host.lookup(&spec("anthropic/claude-haiku-4-5-20251001"));
    assert_eq!(
        (lookup.source, lookup.price),
        (PriceSource::Catalog, Some(custom))
    );
}

#[test]
fn the_meter_gives_the_seeds_message() {
    let meter = Meter::new(MeterConfig::tier(Tier::Standard), PriceCatalog::builtin());
    let model = spec("anthropic/claude-sonnet-4-5");
    meter.admit(&model).unwrap();
    // 1,631,245 uncached + 600,000 read (×0.1) + 257,404 5-minute writes (×1.25):
    // 2,488,649 raw, 2,013,000 counted.
    let usage = cached(1_631_245, 600_000, 257_404, 0, 12_000);
    let error = meter.record(&model, &usage).unwrap_err();
    assert_eq!(error.code(), "BUDGET_EXCEEDED");
    assert!(!error.is_retryable());
    assert_eq!(
        error.to_string(),
        "Budget exceeded for tier STANDARD: 2,013,000/2,000,000 input tokens counted (2,488,649 raw), 12,000/500,000 output tokens"
    );
    // The overage is on the ledger, and the next call is refused before it is made.
    let totals = meter.totals();
    assert_eq!(
        (
            totals.counted_input,
            totals.raw_input,
            totals.output,
            totals.calls
        ),
        (2_013_000, 2_488_649, 12_000, 1)
    );
    assert_eq!(meter.admit(&model).unwrap_err().code(), "BUDGET_EXCEEDED");
}

#[test]
fn the_meter_accrues_until_a_cap_and_counts_raw_without_a_breakdown() {
    let meter = Meter::new(
        MeterConfig {
            tier: Tier::Large,
            caps: TokenCaps {
                input: 1_000,
                output: 100,
            },
            usd_cap: None,
        },
        PriceCatalog::builtin(),
    );
    let model = spec("openai-compatible/local");
    let charge = meter
        .record(
            &model,
            &Usage {
                input: 600,
                output: 40,
                ..Usage::default()
            },
        )
        .unwrap();
    assert_eq!(
        (
            charge.counted_input,
            charge.raw_input,
            charge.cost_usd,
            charge.price_source
        ),
        (600, 600, 0.0, PriceSource::Unknown)
    );
    meter.admit(&model).unwrap();
    // Exactly at the output cap: this call passes, the next is refused.
    meter
        .record(
            &model,
            &Usage {
                input: 100,
                output: 60,
                ..Usage::default()
            },
        )
        .unwrap();
    let refused = meter.admit(&model).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Budget exceeded for tier LARGE: 700/1,000 input tokens, 100/100 output tokens"
    );
}

#[test]
fn an_unpriced_model_is_refused_under_a_usd_cap() {
    let meter = Meter::new(
        MeterConfig {
            usd_cap: Some(0.5),
            ..MeterConfig::tier(Tier::Standard)
        },
        PriceCatalog::builtin(),
    );
    let error = meter.admit(&spec("openai-compatible/local")).unwrap_err();
    assert_eq!(error.code(), "MODEL_UNPRICED");
    assert!(!error.is_retryable());
    meter.admit(&spec("openai/gpt-5")).unwrap();
    // And the USD cap itself stops spend.
    let over = meter.record(
        &spec("openai/gpt-5"),
        &Usage {
            input: 0,
            output: 100_000,
            ..Usage::default()
        },
    );
    assert_eq!(over.unwrap_err().code(), "BUDGET_EXCEEDED");
}

#[test]
fn groups_digits() {
    assert_eq!(group(0), "0");
    assert_eq!(group(999), "999");
    assert_eq!(group(1_000), "1,000");
    assert_eq!(group(2_488_649), "2,488,649");
}

#[tokio::test]
async fn a_metered_client_refuses_and_fails_calls_past_the_cap() {
    use auto_swe_models::testing::{MockReply, MockTurn};
    use auto_swe_models::{Api, MeteredClient, ModelClient};

    let mut reply = MockReply::text("expensive");
    reply.usage = Usage {
        input: 1_500,
        output: 10,
        ..Usage::default()
    };
    let server = crate::support::mock(Api::OpenaiChat, vec![MockTurn::Reply(reply)]).await;
    let inner = crate::support::client(Api::OpenaiChat, "openai-compatible/local", &server);
    let meter = std::sync::Arc::new(Meter::new(
        MeterConfig {
            tier: Tier::Standard,
            caps: TokenCaps {
                input: 2_000,
                output: 500,
            },
            usd_cap: None,
        },
        PriceCatalog::builtin(),
    ));
    let client = MeteredClient::new(inner, std::sync::Arc::clone(&meter));
    // First call: under the cap.
    assert_eq!(
        client
            .complete(&crate::support::ask("a"))
            .await
            .unwrap()
            .text(),
        "expensive"
    );
    // Second call passes the cap: it is made, accrued, and fails.
    let error = client
        .complete(&crate::support::ask("b"))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Budget exceeded for tier STANDARD: 3,000/2,000 input tokens, 20/500 output tokens"
    );
    // Third call is refused before anything is sent.
    assert_eq!(
        client
            .complete(&crate::support::ask("c"))
            .await
            .unwrap_err()
            .code(),
        "BUDGET_EXCEEDED"
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(meter.totals().calls, 2);
}

#[test]
fn the_ledger_hears_every_accrued_call_as_it_ends_the_one_past_a_cap_included() {
    let log = std::sync::Arc::new(CallLog::default());
    let meter = Meter::new(
        MeterConfig {
            tier: Tier::Standard,
            caps: TokenCaps {
                input: 1_000,
                output: 500,
            },
            usd_cap: None,
        },
        PriceCatalog::builtin(),
    )
    .with_ledger(log.clone());
    let model = spec("openai/gpt-5");
    let usage = |input, output| Usage {
        input,
        output,
        ..Usage::default()
    };
    let first = meter.record(&model, &usage(600, 40)).unwrap();
    // Passes the input cap: refused after the fact, still reported.
    let over = meter.record(&model, &usage(600, 10)).unwrap_err();
    assert_eq!(over.code(), "BUDGET_EXCEEDED");
    meter.record_cost(0.25).unwrap_err();
    let second = meter.charge(&model, &usage(600, 10));
    let spent = |cost_usd, input_tokens, output_tokens| Spend {
        cost_micros: usd_to_micros(cost_usd),
        input_tokens,
        output_tokens,
    };
    let calls: Vec<(Option<ModelSpec>, Spend)> = log
        .calls()
        .into_iter()
        .map(|call: MeteredCall| (call.model, call.spend))
        .collect();
    assert_eq!(
        calls,
        vec![
            (Some(model.clone()), spent(first.cost_usd, 600, 40)),
            (Some(model), spent(second.cost_usd, 600, 10)),
            (None, spent(0.25, 0, 0)),
        ]
    );
    assert!(calls[0].1.cost_micros > 0);
}
