"""MkDocs hooks (``hooks:`` in mkdocs.yml): fix-ups the site needs once every language is built.

One search index per language. mkdocs-static-i18n builds each language in turn and stacks all
their entries into the one ``search/search_index.json``, so a reader of the Spanish site would
get English pages in their results (often first). Material loads ``search/search_index.json``
relative to the ``base`` written in each page's ``__config``; this module

- points ``base`` of every page of a non-default language at that language's root (``es/``),
  which Material uses only to find the search index and to resolve result links, and
- after the last language is built, splits the stacked index into ``search/search_index.json``
  (default language) and ``<lang>/search/search_index.json`` (locations made relative to
  ``<lang>/``), each with its own lunr language.

Language switcher: with no ``site_url``, mkdocs-static-i18n links the home pages to ``/`` and
``/es/``, which break when the site is served under a sub-path (a GitHub Pages project site);
such links are made relative, from the page's own ``base``.

Language alternates: Material reads every ``<link rel="alternate" hreflang>`` of a page as the
root of a language and fetches ``<href>/sitemap.xml`` from it; mkdocs-static-i18n points them
at the same page in each language, so every page made one failed request per language. They
are dropped from the pages: the header's language switcher links to the same page in the other
language by itself, and ``sitemap.xml`` keeps the hreflang alternates for search engines.

Notebook downloads: a link to an ``.ipynb`` gets the ``download`` attribute, so the browser
saves the notebook whatever type the web server gives ``.ipynb`` (some serve it as JSON, which
a browser would display).

Notebook pages: mkdocs-jupyter writes ``<script src="">`` when no MathJax URL is configured
(the site typesets math with its own copy of KaTeX); the empty element is dropped.

Everything here is loaded by file path (MkDocs hooks are not imported as a package), so it
imports nothing relative.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

CONFIG_RE = re.compile(r'(<script id="__config" type="application/json">)(.*?)(</script>)', re.S)
EMPTY_SCRIPT = re.compile(r'<script src="">\s*</script>')
SWITCH_ABS = re.compile(r'(<a href=")(/[^"]*)(" hreflang="[^"]*" class="md-select__link")')
ALTERNATE = re.compile(r'<link rel="alternate" href="[^"]*" hreflang="[^"]*">\s*')
IPYNB_LINK = re.compile(r'<a href="([^"#?]+\.ipynb)"(?![^>]*\bdownload\b)')


def _i18n(config: Any) -> Any:
    return config.plugins.get("i18n")


def _languages(config: Any) -> tuple[str | None, list[str]]:
    """(default locale, other locales that are built)."""
    plugin = _i18n(config)
    if plugin is None:
        return None, []
    default, others = None, []
    for lang in plugin.config.languages:
        if lang.default:
            default = lang.locale
        elif lang.build:
            others.append(lang.locale)
    return default, others


def _tojson(data: Any) -> str:
    """JSON safe inside a <script> element, as Jinja's ``tojson`` writes it."""
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def localize_base(html: str, locale: str) -> str:
    """Point Material's ``__config.base`` of a page at its language's root (``<base>/es/``)."""
    m = CONFIG_RE.search(html)
    if m is None:
        raise PluginError("hooks: no Material __config in a page; cannot localize search")
    cfg = json.loads(m.group(2))
    if "base" not in cfg:
        raise PluginError("hooks: Material's __config has no 'base'; cannot localize search")
    base = cfg["base"].rstrip("/") or "."
    suffix = f"/{locale}/"
    if not base.endswith(suffix.rstrip("/")):
        cfg["base"] = base + suffix
    return html[: m.start(2)] + _tojson(cfg) + html[m.end(2) :]


def relative_switcher(html: str) -> str:
    """Root-absolute language-switcher links (``/es/``) made relative to the page."""
    m = CONFIG_RE.search(html)
    if m is None or not SWITCH_ABS.search(html):
        return html
    base = json.loads(m.group(2))["base"].rstrip("/") or "."
    return SWITCH_ABS.sub(lambda s: f"{s[1]}{base}/{s[2].lstrip('/')}{s[3]}", html)


def on_post_page(output: str, page: Any, config: Any) -> str:
    default, others = _languages(config)
    locale = getattr(page.file, "locale", None)
    output = relative_switcher(output)
    if locale in others:
        output = localize_base(output, locale)
    output = ALTERNATE.sub("", output)
    output = IPYNB_LINK.sub(r'<a href="\1" download', output)
    return EMPTY_SCRIPT.sub("", output)


def split_search_index(index: dict[str, Any], default: str, others: list[str]) -> dict[str, Any]:
    """{locale: index}: the stacked index cut by location prefix, each with its own language."""
    docs: dict[str, list[dict[str, Any]]] = {default: [], **{lang: [] for lang in others}}
    for doc in index["docs"]:
        loc = doc["location"]
        for lang in others:
            if loc == lang or loc.startswith(f"{lang}/"):
                docs[lang].append(dict(doc, location=loc[len(lang) + 1 :]))
                break
        else:
            docs[default].append(doc)
    out = {}
    for lang, entries in docs.items():
        cfg = dict(index["config"], lang=[lang])
        out[lang] = {**index, "config": cfg, "docs": entries}
    return out


@event_priority(-200)  # after mkdocs-static-i18n (-100) has built the other languages
def on_post_build(config: Any) -> None:
    plugin = _i18n(config)
    if plugin is None or getattr(plugin, "building", False):
        return  # a nested build of one language: the index is not complete yet
    default, others = _languages(config)
    site = Path(config.site_dir)
    path = site / "search" / "search_index.json"
    if not path.exists() or default is None:
        return
    for lang, index in split_search_index(json.loads(path.read_text()), default, others).items():
        target = path if lang == default else site / lang / "search" / "search_index.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")))
