"""The built site as a reader meets it, in a real browser (Playwright driving Debian's Chromium).

The site is built once (``built_site``), served on 127.0.0.1 from a thread, and every page is
opened in English and in Spanish. Chromium comes from the system (``apt-get install chromium``;
Playwright's own browser download is not used). Without it these tests are skipped, except in
CI (``CI`` set, or ``MINIKERNEL_REQUIRE_BROWSER=1``), where a missing browser fails them.

Every request a page makes goes through a route: requests to another origin are recorded and
aborted (they must not happen: the site is offline and private), the rest are served. Set
``MINIKERNEL_REQUEST_LOG=path.json`` to keep the log of every request.
"""

from __future__ import annotations

import functools
import json
import os
import re
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest_plugins = ["site_fixtures"]
pytestmark = [pytest.mark.site, pytest.mark.browser]

CHROMIUM = Path(os.environ.get("MINIKERNEL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[1]
LANGS = ("en", "es")
OTHER = {"en": "es", "es": "en"}


def _required() -> bool:
    """In CI the browser tests must run: a missing browser is a failure, not a skip."""
    ci = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
    return ci or os.environ.get("MINIKERNEL_REQUIRE_BROWSER") == "1"


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"{reason}; CI must run the browser tests (see .ci/run)", pytrace=False)
    pytest.skip(reason)


# --- the site, served -------------------------------------------------------------------------


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def base_url(built_site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(built_site))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: any free port
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def site_pages(site: Path, lang: str) -> list[str]:
    """Site-relative URLs of every page of one language ('' is the home page)."""
    out = []
    for p in sorted(site.rglob("index.html")):
        rel = p.parent.relative_to(site).as_posix()
        rel = "" if rel == "." else rel + "/"
        if rel.startswith(("assets/", "search/", "results/")):
            continue
        if (lang == "es") == rel.startswith("es/"):
            out.append(rel)
    return out


def twin(rel: str, lang: str) -> str:
    """The same page in the other language."""
    return rel.removeprefix("es/") if lang == "es" else "es/" + rel


# --- the browser ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (dependency group 'tests')")
    with sync_playwright() as p:
        # launch() starts Chromium with a fresh, temporary user-data-dir of its own.
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Recorder:
    """Console errors, page errors, failed or refused requests and the request log of a
    context; requests to another origin are aborted and recorded."""

    def __init__(self, context: Any, base_url: str) -> None:
        self.origin = "{0.scheme}://{0.netloc}".format(urlsplit(base_url))
        self.requests: list[dict[str, str]] = []
        self.external: list[str] = []
        self.errors: list[str] = []
        self.page_url = ""
        context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        req = route.request
        url = req.url
        self.requests.append({"page": self.page_url, "url": url, "type": req.resource_type})
        if url.startswith(("data:", "blob:", "about:")) or url.startswith(self.origin + "/"):
            route.continue_()
        else:
            self.external.append(f"{self.page_url}: {url}")
            route.abort()

    def watch(self, page: Any) -> None:
        page.on(
            "console",
            lambda m: (
                m.type == "error" and self.errors.append(f"{self.page_url}: console: {m.text}")
            ),
        )
        page.on("pageerror", lambda e: self.errors.append(f"{self.page_url}: page error: {e}"))
        page.on(
            "response",
            lambda r: (
                r.status >= 400 and self.errors.append(f"{self.page_url}: {r.status} {r.url}")
            ),
        )


@pytest.fixture
def context(browser: Any, base_url: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield ctx
    finally:
        ctx.close()


# --- every page, both languages ---------------------------------------------------------------

REQUEST_LOG: dict[str, list[dict[str, str]]] = {}


@pytest.mark.parametrize("lang", LANGS)
def test_every_page_loads_cleanly_offline(
    browser: Any, base_url: str, built_site: Path, lang: str
) -> None:
    """No console error, no failed request, no request outside the site's own origin; the
    language switcher leads to the same page in the other language; math is typeset."""
    pages = site_pages(built_site, lang)
    assert pages, f"no {lang} pages in the built site"
    ctx = browser.new_context()
    rec = Recorder(ctx, base_url)
    page = ctx.new_page()
    rec.watch(page)
    problems: list[str] = []
    try:
        for rel in pages:
            rec.page_url = rel or "/"
            page.goto(base_url + rel, wait_until="networkidle")
            assert page.get_attribute("html", "lang") == lang, f"{rel}: wrong html lang"
            # the language switcher: the same page in the other language
            other = OTHER[lang]
            href = (
                page.eval_on_selector(
                    f'.md-select__link[hreflang="{other}"]', "a => a.href", strict=False
                )
                if page.query_selector(f'.md-select__link[hreflang="{other}"]')
                else None
            )
            if href != base_url + twin(rel, lang):
                problems.append(f"{rel}: switcher to {other} goes to {href}")
            # math, where there is any, is typeset by the site's KaTeX
            raw = page.eval_on_selector_all(
                ".arithmatex", "els => els.filter(e => !e.querySelector('.katex')).length"
            )
            if raw:
                problems.append(f"{rel}: {raw} math element(s) not typeset")
            if page.query_selector(".katex-error"):
                problems.append(f"{rel}: KaTeX could not parse a formula")
    finally:
        ctx.close()
    REQUEST_LOG[lang] = rec.requests
    if os.environ.get("MINIKERNEL_REQUEST_LOG"):
        Path(os.environ["MINIKERNEL_REQUEST_LOG"]).write_text(json.dumps(REQUEST_LOG, indent=1))
    kinds = Counter(r["type"] for r in rec.requests)
    print(
        f"{lang}: {len(pages)} pages, {len(rec.requests)} requests {dict(kinds)}, "
        f"{len(rec.external)} external"
    )
    assert not rec.external, "requests outside the site:\n" + "\n".join(rec.external)
    assert not rec.errors, "\n".join(rec.errors)
    assert not problems, "\n".join(problems)


def test_every_page_exists_in_both_languages(built_site: Path) -> None:
    en, es = site_pages(built_site, "en"), site_pages(built_site, "es")
    assert [twin(p, "en") for p in en] == es


def test_language_switcher_click(context: Any, base_url: str) -> None:
    page = context.new_page()
    page.goto(base_url + "phase-24/lab/00-hello-cuda/")
    page.hover(".md-header__option .md-select")
    page.click('.md-select__link[hreflang="es"]')
    page.wait_for_load_state()
    assert page.url == base_url + "es/phase-24/lab/00-hello-cuda/"
    assert page.get_attribute("html", "lang") == "es"
    page.hover(".md-header__option .md-select")
    page.click('.md-select__link[hreflang="en"]')
    page.wait_for_load_state()
    assert page.url == base_url + "phase-24/lab/00-hello-cuda/"


# --- search -----------------------------------------------------------------------------------


def _search(page: Any, term: str) -> list[str]:
    """Type ``term`` into Material's search box as a reader would; the result links."""
    page.click("input.md-search__input")
    page.keyboard.type(term)
    page.wait_for_selector(".md-search-result__item", timeout=10_000)
    return page.eval_on_selector_all(".md-search-result__link", "els => els.map(e => e.href)")


@pytest.mark.parametrize(
    ("lang", "term"),
    [
        ("es", "kernel"),  # a word both languages use: the Spanish site lists Spanish pages
        ("es", "contribuir"),  # a Spanish word
        ("en", "kernel"),
    ],
)
def test_search_lists_pages_of_the_reader_language(
    context: Any, base_url: str, lang: str, term: str
) -> None:
    page = context.new_page()
    page.goto(base_url + ("es/" if lang == "es" else ""))
    hits = _search(page, term)
    assert hits, f"searching {term!r} on the {lang} site found nothing"
    spanish = [h.startswith(base_url + "es/") for h in hits]
    assert spanish[0] == (lang == "es"), f"first hit {hits[0]} is not a {lang} page"
    assert all(s == (lang == "es") for s in spanish), f"hits from the other language: {hits}"


# --- code copy button -------------------------------------------------------------------------


VECTOR_ADD_CU = ROOT / "src" / "minikernel" / "kernels" / "vector_add" / "vector_add.cu"


def snippet_section(path: Path, name: str) -> str:
    """The lines between ``--8<-- [start:name]`` and ``--8<-- [end:name]``, dedented, as
    pymdownx.snippets includes them."""
    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if f"--8<-- [start:{name}]" in ln)
    end = next(i for i, ln in enumerate(lines) if f"--8<-- [end:{name}]" in ln)
    return textwrap.dedent("\n".join(lines[start + 1 : end]))


def test_code_copy_button_copies_the_code(browser: Any, base_url: str) -> None:
    ctx = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    try:
        page = ctx.new_page()
        page.goto(base_url + "phase-24/lab/00-hello-cuda/")
        # Material 9.7+ draws the copy button as .md-code__button; older ones as .md-clipboard
        button = page.locator(
            'button.md-code__button[data-md-type="copy"], button.md-clipboard'
        ).first
        assert button.get_attribute("data-clipboard-target"), "copy button names no target"
        button.click(force=True)
        copied = page.evaluate("navigator.clipboard.readText()")
        # the first block of the page is the section "kernel1" of the CUDA C source
        assert copied.strip() == snippet_section(VECTOR_ADD_CU, "kernel1").strip()
    finally:
        ctx.close()


# --- plots in light and dark ------------------------------------------------------------------

CONTRAST_JS = """
svg => {
  const rgba = s => {
    const m = s.match(/[\\d.]+/g).map(Number);
    return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
  };
  const lum = ([r, g, b]) => {
    const f = c => (c /= 255) <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  // a colour with alpha, composited over the background
  const over = (fg, bg) => [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3]));
  const contrast = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  let el = svg, bg = [255, 255, 255, 1];
  for (; el && el.nodeType === 1; el = el.parentElement) {
    const c = rgba(getComputedStyle(el).backgroundColor);
    if (c[3] > 0) { bg = c; break; }
  }
  const text = rgba(getComputedStyle(svg).color);
  const series = new Set();
  svg.querySelectorAll("path[stroke], circle[fill], line[stroke]").forEach(e => {
    const v = e.getAttribute("stroke") || e.getAttribute("fill");
    if (v && v !== "none" && v !== "currentColor") {
      series.add(getComputedStyle(e)[e.tagName === "circle" ? "fill" : "stroke"]);
    }
  });
  const box = svg.getBoundingClientRect();
  return {
    scheme: document.body.getAttribute("data-md-color-scheme"),
    width: box.width,
    height: box.height,
    text: contrast(over(text, bg), bg),
    series: [...series].map(s => [s, contrast(over(rgba(s), bg), bg)]),
  };
}
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lang", LANGS)
def test_plots_are_readable_in_both_schemes(
    browser: Any, base_url: str, built_site: Path, scheme: str, lang: str
) -> None:
    """Text and axes (currentColor) reach 4.5:1 against the page; every series colour reaches
    3:1, the WCAG minimum for the parts of a graphic that carry its meaning."""
    ctx = browser.new_context(color_scheme=scheme)
    try:
        page = ctx.new_page()
        checked = 0
        for rel in site_pages(built_site, lang):
            if "mk-plot" not in (built_site / rel / "index.html").read_text():
                continue
            page.goto(base_url + rel)
            for svg in page.query_selector_all("svg.mk-plot"):
                svg.scroll_into_view_if_needed()
                assert svg.is_visible(), f"{rel}: a plot is not visible"
                r = svg.evaluate(CONTRAST_JS)
                assert r["scheme"] == ("slate" if scheme == "dark" else "default")
                assert r["width"] > 300 and r["height"] > 150, f"{rel}: plot too small {r}"
                assert r["text"] >= 4.5, f"{rel} ({scheme}): plot text contrast {r['text']:.2f}"
                poor = [(c, round(x, 2)) for c, x in r["series"] if x < 3.0]
                assert not poor, f"{rel} ({scheme}): series colours below 3:1: {poor}"
                checked += 1
        assert checked, "no plot on any page"
    finally:
        ctx.close()


# --- notebooks --------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_lab_notebook_renders_and_downloads(
    context: Any, base_url: str, built_site: Path, lang: str, tmp_path: Path
) -> None:
    prefix = "es/" if lang == "es" else ""
    page = context.new_page()
    page.goto(base_url + prefix + "phase-24/lab/00-hello-cuda-notebook/")
    assert page.locator(".jp-Notebook").count() == 1
    assert page.locator(".jp-Cell.jp-CodeCell").count() >= 3
    assert page.locator(".jp-Cell.jp-MarkdownCell").count() >= 2
    title = page.inner_text(".jp-MarkdownCell h1")
    assert ("hola CUDA" if lang == "es" else "hello CUDA") in title

    page.goto(base_url + prefix + "phase-24/lab/00-hello-cuda/")
    with page.expect_download() as info:
        page.click('a[href$=".ipynb"]')
    saved = tmp_path / "lab.ipynb"
    info.value.save_as(saved)
    nb = json.loads(saved.read_text())
    assert nb["nbformat"] == 4 and len(nb["cells"]) >= 5
    first = "".join(next(c for c in nb["cells"] if c["cell_type"] == "markdown")["source"])
    assert re.search("hola CUDA" if lang == "es" else "hello CUDA", first)
