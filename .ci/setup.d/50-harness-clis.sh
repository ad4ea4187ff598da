# harnesses: the pinned third-party agent CLIs the harness adapters drive — Claude Code
# (`@anthropic-ai/claude-code`, npm) and the Codex CLI (`@openai/codex`, npm) — installed under
# a project-owned prefix, readable by every user (the tests run them inside local workspaces).
# Exports their entry points, and asks the harness tests to fail rather than skip when they are
# missing. Bumping a version here is a schema change the golden corpus tests must pass.
source scripts/dev-harness-clis.sh
export AUTO_SWE_REQUIRE_HARNESS_CLIS=1
