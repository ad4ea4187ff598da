# runtime: the reference MCP server (`@modelcontextprotocol/server-everything`, npm) in
# streamable-HTTP mode for the MCP client tests. Exports its URL, and asks those tests to fail
# rather than skip when it is missing.
source scripts/dev-mcp-everything.sh
export AUTO_SWE_REQUIRE_MCP=1
