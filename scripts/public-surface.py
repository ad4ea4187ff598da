#!/usr/bin/env python3
"""Lists each library crate's public items and the names two crates define differently.

Reads the HTML that `cargo doc --workspace --no-deps` writes: every crate's `all.html` lists its
public items (its own and the ones it re-exports), and each item's page links the source file
that defines it. An item whose source is another crate's is a re-export; a name that two crates
each define is a twin — one concept typed twice (keep one and re-export it) or two concepts
sharing a name (rename one).

Usage: scripts/public-surface.py [DOC_DIR] [--items]
  DOC_DIR defaults to $CARGO_TARGET_DIR/doc (or target/doc).
  --items also prints every public item.
Exits 1 when a twin exists, so CI can hold the line.
"""

import html
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

# Crates that are libraries embedders depend on (hosts and examples are left out).
PREFIX = "auto_swe_"
SKIP = {"auto_swe"}
SKIP_PREFIX = "auto_swe_example_"

ITEM_RE = re.compile(r'<li><a href="([^"]+)">([^<]+)</a></li>')
SECTION_RE = re.compile(r'<h3 id="([a-z-]+)">')
# The "Source" link under an item's heading; a re-export from another crate has none.
SOURCE_RE = re.compile(r'<span class="sub-heading">(?:[^<]|<(?!/span>))*?class="src" href="(?:\.\./)+src/([a-z0-9_]+)/')

# Kinds that are names an embedder writes in a `use` line.
KINDS = {
    "structs",
    "enums",
    "traits",
    "functions",
    "types",
    "constants",
    "statics",
    "macros",
    "unions",
    "derives",
    "attributes",
    "trait-aliases",
}


def crate_items(doc: Path, crate: str):
    """Yields (kind, path, defining crate) for each public item of `crate`."""
    text = (doc / crate / "all.html").read_text(encoding="utf-8")
    sections = [(m.start(), m.group(1)) for m in SECTION_RE.finditer(text)]
    for m in ITEM_RE.finditer(text):
        kind = None
        for start, name in sections:
            if start < m.start():
                kind = name
        if kind not in KINDS:
            continue
        href, path = m.group(1), html.unescape(m.group(2))
        page = doc / crate / href
        origin = "another crate"
        if page.exists():
            src = SOURCE_RE.search(page.read_text(encoding="utf-8"))
            if src:
                origin = src.group(1)
        yield kind, path, origin


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_items = "--items" in sys.argv
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    doc = Path(args[0]) if args else Path(target) / "doc"
    crates = sorted(
        p.name
        for p in doc.iterdir()
        if p.is_dir() and p.name.startswith(PREFIX) and p.name not in SKIP
        and not p.name.startswith(SKIP_PREFIX)
        and (p / "all.html").exists()
    )
    if not crates:
        print(f"no crate docs under {doc}; run `cargo doc --workspace --no-deps` first")
        return 2

    # name -> {defining crate: (kind, path)}
    defined = defaultdict(dict)
    print(f"{'crate':<24}{'public':>8}{'own':>6}{'re-exported':>13}")
    total = 0
    for crate in crates:
        items = list(crate_items(doc, crate))
        own = [i for i in items if i[2] == crate]
        total += len(items)
        print(f"{crate:<24}{len(items):>8}{len(own):>6}{len(items) - len(own):>13}")
        for kind, path, origin in items:
            name = path.rsplit("::", 1)[-1]
            if origin == crate:
                defined[name].setdefault(crate, (kind, path))
            if show_items:
                note = "" if origin == crate else f"  (from {origin})"
                print(f"  {kind[:-1]:<10} {path}{note}")
    print(f"{'total':<24}{total:>8}")

    twins = {n: d for n, d in defined.items() if len(d) > 1}
    print(f"\nnames defined by two or more crates: {len(twins)}")
    for name in sorted(twins):
        where = ", ".join(
            f"{c.removeprefix(PREFIX)}::{p} ({k[:-1]})" for c, (k, p) in sorted(twins[name].items())
        )
        print(f"  {name}: {where}")
    return 1 if twins else 0


if __name__ == "__main__":
    sys.exit(main())
