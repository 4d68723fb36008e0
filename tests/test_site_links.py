"""Links and search of the built site: every internal link and anchor resolves in both
languages (language switcher included), and each language has a search index of its own."""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

import pytest

from minikernel.site import hooks, linkcheck

pytest_plugins = ["site_fixtures"]  # built_site


@pytest.mark.site
def test_no_broken_link_or_anchor_in_either_language(built_site: Path) -> None:
    report = linkcheck.check_site(built_site)
    assert not report.broken, linkcheck.summary(report)
    spanish = [p for p in built_site.glob("es/**/index.html")]
    assert report.pages > 2 * len(spanish) - 1 and spanish
    assert report.anchors > 0


SWITCH = re.compile(r'<a href="([^"]*)" hreflang="([a-z]{2})" class="md-select__link"')


@pytest.mark.site
def test_language_switcher_leads_to_the_same_page_in_the_other_language(built_site: Path) -> None:
    checked = 0
    for page in sorted(built_site.rglob("index.html")):
        rel = page.parent.relative_to(built_site).as_posix()
        if rel.startswith(("assets", "search", "results")):
            continue
        rel = "" if rel == "." else rel + "/"
        lang = "es" if rel.startswith("es/") else "en"
        links = dict((hl, href) for href, hl in SWITCH.findall(page.read_text()))
        other = "en" if lang == "es" else "es"
        assert other in links, f"{rel}: no link to the {other} page"
        assert not links[other].startswith("/"), f"{rel}: root-absolute {links[other]}"
        target = posixpath.normpath(posixpath.join(rel or ".", links[other]))
        target = "" if target == "." else target + "/"
        expected = rel.removeprefix("es/") if lang == "es" else "es/" + rel
        assert target == expected, f"{rel}: the {other} link leads to {target!r}"
        assert (built_site / target / "index.html").is_file()
        checked += 1
    assert checked >= 4


@pytest.mark.site
def test_each_language_has_its_own_search_index(built_site: Path) -> None:
    en = json.loads((built_site / "search" / "search_index.json").read_text())
    es = json.loads((built_site / "es" / "search" / "search_index.json").read_text())
    assert en["config"]["lang"] == ["en"] and es["config"]["lang"] == ["es"]
    assert en["docs"] and es["docs"]
    assert not any(d["location"].startswith("es/") for d in en["docs"])
    # Spanish locations are relative to es/, the base the Spanish pages give Material
    html = (built_site / "es" / "index.html").read_text()
    cfg = json.loads(hooks.CONFIG_RE.search(html).group(2))
    assert cfg["base"] == "../es/"
    assert any(d["location"] == "" for d in es["docs"])  # the Spanish home page


# --- the checker itself, on a site made for it ------------------------------------------------


def _site(tmp_path: Path, pages: dict[str, str]) -> Path:
    for rel, body in pages.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return tmp_path


def test_linkcheck_finds_missing_files_and_anchors(tmp_path: Path) -> None:
    site = _site(
        tmp_path,
        {
            "index.html": '<h1 id="top">x</h1><a href="a/">ok</a><a href="a/#sec">ok</a>'
            '<a href="#top">ok</a><a href="#nowhere">bad</a><a href="b/">bad</a>'
            '<a href="a/#missing">bad</a><a href="https://example.org/">external</a>'
            '<link rel="stylesheet" href="style.css"><img src="img.png">',
            "a/index.html": '<h2 id="sec">s</h2><a href="../index.html#top">ok</a>'
            '<a href="../../outside/">bad</a><a href="/a/">bad</a>',
            "404.html": '<a href="/">fine in 404.html</a>',
            "style.css": "",
        },
    )
    report = linkcheck.check_site(site)
    broken = sorted(str(b) for b in report.broken)
    assert broken == [
        "a/index.html: ../../outside/ (points outside the site)",
        "a/index.html: /a/ (root-absolute: breaks under a sub-path)",
        "index.html: #nowhere (no id 'nowhere' in index.html)",
        "index.html: a/#missing (no id 'missing' in a/index.html)",
        "index.html: b/ (no file b/index.html)",
        "index.html: img.png (no file img.png)",
    ]
    assert report.external == {"https://example.org/"}
    assert linkcheck.main([str(site)]) == 1


def test_linkcheck_passes_a_clean_site(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    site = _site(tmp_path, {"index.html": '<p id="a"><a href="#a">a</a></p>'})
    assert linkcheck.main([str(site)]) == 0
    assert "0 broken" in capsys.readouterr().out


# --- the hooks, on their own ------------------------------------------------------------------


def test_search_index_is_split_by_language() -> None:
    index = {
        "config": {"lang": ["en", "es"], "separator": "x"},
        "docs": [
            {"location": "", "title": "Home"},
            {"location": "a/#x", "title": "A"},
            {"location": "es/", "title": "Inicio"},
            {"location": "es/a/#x", "title": "A es"},
            {"location": "estimate/", "title": "Not Spanish"},
        ],
    }
    out = hooks.split_search_index(index, "en", ["es"])
    assert [d["location"] for d in out["en"]["docs"]] == ["", "a/#x", "estimate/"]
    assert [d["location"] for d in out["es"]["docs"]] == ["", "a/#x"]
    assert out["es"]["config"] == {"lang": ["es"], "separator": "x"}


def test_spanish_pages_get_their_own_search_base() -> None:
    page = (
        '<head><script id="__config" type="application/json">'
        '{"base": "../..", "search": "../../assets/w.js", "t": "<b>"}</script></head>'
    )
    out = hooks.localize_base(page, "es")
    cfg = json.loads(hooks.CONFIG_RE.search(out).group(2))
    assert cfg["base"] == "../../es/" and cfg["search"] == "../../assets/w.js"
    assert "\\u003cb\\u003e" in out  # still safe inside <script>
    assert hooks.localize_base(out, "es") == out  # idempotent
