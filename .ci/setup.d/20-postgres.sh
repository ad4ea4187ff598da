# PostgreSQL 16 with pgvector for the store's conformance tests (binaries from the PyPI wheel
# `pgserver`, run as an unprivileged user on a free loopback port). Exports the URL, and asks the
# PostgreSQL tests to fail rather than skip when the server is missing.
source scripts/dev-postgres.sh
export AUTO_SWE_REQUIRE_POSTGRES=1
