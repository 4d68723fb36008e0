"""Check every internal link and anchor of the built site: ``python -m minikernel.site.linkcheck``.

MkDocs validates the links written in Markdown; this reads the HTML that was actually built, in
every language, so it also sees what the theme and the plugins add: the language switcher and
``hreflang`` alternates of mkdocs-static-i18n, navigation, footers, notebook pages, the results
files and ``.ipynb`` downloads the pages link to, assets, and the anchors of all of them.

A link is internal when it has no scheme and no host. It is broken when the file it names is
not in the site (a folder means its ``index.html``), when its ``#fragment`` names no ``id``
(or ``<a name>``) in the HTML page it points to, or when it starts with ``/``: such a link
only works when the site is served at the root of its host, not under a sub-path as a GitHub
Pages project site is (404.html is exempt: MkDocs writes it with root-absolute URLs when
``site_url`` is empty, because it is served at any depth). External links are counted, not followed: the
site must work offline, and the browser tests check that no page *loads* anything from outside.
"""

from __future__ import annotations

import argparse
import posixpath
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# (tag, attribute) pairs that point at another resource
LINK_ATTRS = {
    ("a", "href"),
    ("link", "href"),
    ("area", "href"),
    ("script", "src"),
    ("img", "src"),
    ("iframe", "src"),
    ("source", "src"),
    ("video", "src"),
    ("audio", "src"),
    ("use", "href"),
    ("use", "xlink:href"),
    ("image", "href"),
}


@dataclass
class Page:
    ids: set[str] = field(default_factory=set)
    links: list[tuple[str, str]] = field(default_factory=list)  # (tag, url)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.page.ids.add(value)
            elif (tag, name) in LINK_ATTRS:
                self.page.links.append((tag, value))
            elif name == "srcset":
                for part in value.split(","):
                    if part.strip():
                        self.page.links.append((tag, part.split()[0]))

    handle_startendtag = handle_starttag


def parse(path: Path) -> Page:
    p = _Parser()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    p.close()
    return p.page


@dataclass(frozen=True)
class Broken:
    page: str  # the page's path in the site
    link: str  # the link as written
    problem: str

    def __str__(self) -> str:
        return f"{self.page}: {self.link} ({self.problem})"


@dataclass
class Report:
    pages: int = 0
    links: int = 0
    anchors: int = 0
    external: set[str] = field(default_factory=set)
    broken: list[Broken] = field(default_factory=list)


def is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme or parts.netloc)


def _target(site: Path, page_rel: str, url_path: str) -> tuple[str, Path] | None:
    """The file a link resolves to (site-relative posix path, absolute path), or None when it
    leaves the site."""
    if url_path.startswith("/"):
        joined = url_path.lstrip("/")
    else:
        joined = posixpath.join(posixpath.dirname(page_rel), url_path)
    rel = posixpath.normpath(joined) if joined else posixpath.dirname(page_rel) or "."
    if rel.startswith(".."):
        return None
    path = site / rel
    if path.is_dir() or url_path.endswith("/"):
        path = path / "index.html"
        rel = posixpath.normpath(posixpath.join(rel, "index.html"))
    return rel, path


def check_site(site: Path) -> Report:
    """Every link of every HTML file under ``site``."""
    site = site.resolve()
    html_files = sorted(site.rglob("*.html"))
    pages = {p.relative_to(site).as_posix(): parse(p) for p in html_files}
    report = Report(pages=len(pages))
    for rel, page in pages.items():
        for tag, url in page.links:
            url = url.strip()
            if not url or url.startswith(("mailto:", "tel:", "data:", "javascript:")):
                continue
            if is_external(url):
                report.external.add(url)
                continue
            parts = urlsplit(url)
            report.links += 1
            if parts.path.startswith("/") and rel != "404.html":
                report.broken.append(Broken(rel, url, "root-absolute: breaks under a sub-path"))
                continue
            frag = unquote(parts.fragment)
            if not parts.path:  # "#anchor": this page
                target_rel, target = rel, site / rel
            else:
                found = _target(site, rel, unquote(parts.path))
                if found is None:
                    report.broken.append(Broken(rel, url, "points outside the site"))
                    continue
                target_rel, target = found
                if not target.is_file():
                    report.broken.append(Broken(rel, url, f"no file {target_rel}"))
                    continue
            if frag and target_rel.endswith(".html"):
                report.anchors += 1
                ids = pages[target_rel].ids if target_rel in pages else parse(target).ids
                if frag not in ids:
                    report.broken.append(Broken(rel, url, f"no id {frag!r} in {target_rel}"))
    return report


def summary(report: Report) -> str:
    lines = [
        f"{report.pages} pages, {report.links} internal links ({report.anchors} with an anchor), "
        f"{len(report.external)} distinct external links (not followed), "
        f"{len(report.broken)} broken"
    ]
    lines += [f"  BROKEN {b}" for b in report.broken]
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", nargs="?", default="site", type=Path, help="the built site (site/)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if not (args.site / "index.html").is_file():
        print(f"{args.site}: no index.html; build the site first (nox -s docs)", file=sys.stderr)
        return 2
    report = check_site(args.site)
    print(summary(report))
    return 1 if report.broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
