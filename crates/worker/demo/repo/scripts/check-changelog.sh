#!/bin/sh
# Every change lists itself under "## Unreleased" in CHANGELOG.md.
if awk '/^## Unreleased/ { open = 1; next } /^## / { open = 0 } open && /^- / { n++ } END { exit n > 0 ? 0 : 1 }' CHANGELOG.md; then
    echo "changelog ok"
else
    echo "CHANGELOG.md: add an entry under '## Unreleased' that describes the change"
    exit 1
fi
