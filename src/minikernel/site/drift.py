"""Translation drift: which Spanish pages were translated from an older English page.

Each Spanish page ``docs/<path>.es.md`` records, in its front matter, the English revision it
was translated from::

    translation_of: 3f2a9c0d1e4b

the first 12 hex digits of the SHA-256 of the English file's bytes (``docs/<path>.md``). When
the English page changes, its hash no longer matches and the Spanish page is listed here.

    python -m minikernel.site.drift                 # list drifted pages; exit 1 if any
    python -m minikernel.site.drift --stamp docs/index.es.md   # after updating a translation
    python -m minikernel.site.drift --stamp-all     # record the current hash on every page

Pages generated at build time (``*-notebook*.md``, from labs/) are skipped: their two languages
come from one file, the lab, and cannot drift apart.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"
KEY = "translation_of"
HASH_LEN = 12
KEY_LINE = re.compile(rf"^{KEY}[ \t]*:[ \t]*['\"]?([0-9a-fA-F]*)['\"]?[ \t]*\r?$")


def english_hash(path: Path) -> str:
    """First 12 hex digits of the SHA-256 of the file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:HASH_LEN]


def _front_matter_end(lines: list[str]) -> int | None:
    """Index of the closing ``---`` of the YAML front matter, or None if there is none."""
    if not lines or lines[0].rstrip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return i
    return None


def recorded_hash(text: str) -> str | None:
    """The ``translation_of`` of a page's front matter, or None."""
    lines = text.split("\n")
    end = _front_matter_end(lines)
    for line in lines[1:end] if end else []:
        m = KEY_LINE.match(line)
        if m:
            return m.group(1).lower()
    return None


def stamp_text(text: str, digest: str) -> str:
    """``text`` with ``translation_of: digest`` in its front matter, added or replaced; every
    other byte stays as it was (a page with no front matter gets one)."""
    entry = f"{KEY}: {digest}"
    lines = text.split("\n")
    end = _front_matter_end(lines)
    if end is None:
        return f"---\n{entry}\n---\n\n{text}"
    for i in range(1, end):
        if KEY_LINE.match(lines[i]):
            lines[i] = entry
            break
    else:
        lines.insert(end, entry)
    return "\n".join(lines)


def spanish_pages(docs: Path = DOCS) -> list[Path]:
    return sorted(p for p in docs.rglob("*.es.md") if "-notebook" not in p.name)


def english_twin(page: Path) -> Path:
    return page.with_name(page.name[: -len(".es.md")] + ".md")


@dataclass(frozen=True)
class Drift:
    page: Path
    recorded: str | None  # None: the page records no revision
    current: str | None  # None: the English twin is missing

    def describe(self, root: Path) -> str:
        rel = self.page.relative_to(root) if self.page.is_relative_to(root) else self.page
        if self.current is None:
            return f"{rel}: no English twin {english_twin(self.page).name}"
        if self.recorded is None:
            return f"{rel}: records no {KEY} (English now {self.current})"
        return f"{rel}: translated from {self.recorded}, English now {self.current}"


def check(docs: Path = DOCS) -> list[Drift]:
    """Spanish pages whose English twin changed since they recorded it (or that record none)."""
    out = []
    for page in spanish_pages(docs):
        twin = english_twin(page)
        current = english_hash(twin) if twin.exists() else None
        recorded = recorded_hash(page.read_text(encoding="utf-8"))
        if current is None or recorded != current:
            out.append(Drift(page, recorded, current))
    return out


def stamp(page: Path) -> str:
    """Record the English twin's current hash in ``page``; return it."""
    if not page.name.endswith(".es.md"):
        raise ValueError(f"{page}: not a Spanish page (*.es.md)")
    twin = english_twin(page)
    if not twin.exists():
        raise FileNotFoundError(f"{page}: no English twin {twin}")
    digest = english_hash(twin)
    text = page.read_text(encoding="utf-8")
    new = stamp_text(text, digest)
    if new != text:
        page.write_text(new, encoding="utf-8")
    return digest


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="List (or stamp) Spanish pages whose English changed.")
    ap.add_argument("--docs", type=Path, default=DOCS, help="the docs folder (default: docs/)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument(
        "--stamp",
        nargs="+",
        type=Path,
        metavar="PAGE",
        help="record the current English hash in these Spanish pages",
    )
    g.add_argument(
        "--stamp-all",
        action="store_true",
        help="record the current English hash in every Spanish page",
    )
    args = ap.parse_args(list(argv) if argv is not None else None)
    docs = args.docs.resolve()
    if args.stamp or args.stamp_all:
        pages = spanish_pages(docs) if args.stamp_all else args.stamp
        for page in pages:
            if not page.name.endswith(".es.md"):  # the English page named: its twin
                page = page.with_name(page.name.removesuffix(".md") + ".es.md")
            print(f"{page}: {KEY}: {stamp(page)}")
        return 0
    drifted = check(docs)
    for d in drifted:
        print(d.describe(docs.parent))
    n = len(spanish_pages(docs))
    print(f"{len(drifted)} of {n} Spanish pages behind their English twin", file=sys.stderr)
    return 1 if drifted else 0


if __name__ == "__main__":
    raise SystemExit(main())
