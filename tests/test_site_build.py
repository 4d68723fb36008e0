"""Build the site as `nox -s docs` does (both languages, --strict) and check what came out."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["site_fixtures"]  # built_site: one build per session, shared with other modules

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
pytestmark = pytest.mark.site


def english_pages() -> list[Path]:
    return sorted(
        p
        for p in DOCS.rglob("*.md")
        if not re.search(r"\.[a-z]{2}\.md$", p.name) and "notebook" not in p.name
    )


def _html(site: Path, page: Path, lang: str) -> Path:
    rel = page.relative_to(DOCS).with_suffix("")
    base = site / "es" if lang == "es" else site
    return (
        base / "index.html"
        if rel.name == "index" and rel.parent == Path(".")
        else (
            base / rel.parent / "index.html" if rel.name == "index" else base / rel / "index.html"
        )
    )


def test_snippet_lines_are_intact() -> None:
    """A formatter once rewrote `--8<-- "..."` inside Markdown code blocks as `--8 < --"..."`,
    which renders as text instead of the included code, silently."""
    broken = [
        f"{p}:{i}"
        for p in DOCS.rglob("*.md")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"--8\s+<\s*--", line)
    ]
    assert not broken


def test_every_page_has_a_spanish_twin() -> None:
    missing = [p for p in english_pages() if not p.with_name(p.stem + ".es.md").exists()]
    assert not missing


def test_both_languages_are_built(built_site: Path) -> None:
    for page in english_pages():
        for lang in ("en", "es"):
            assert _html(built_site, page, lang).exists(), f"{page} not built in {lang}"


def test_spanish_pages_are_spanish(built_site: Path) -> None:
    html = (built_site / "es" / "phase-24" / "lab" / "00-hello-cuda" / "index.html").read_text()
    assert '<html lang="es"' in html
    assert "Medido en una NVIDIA" in html  # provenance in Spanish
    assert re.search(r"\d,\d+\u202f(TB/s|GB/s|%)", html), "numbers not in Spanish format"


def test_lab_page_has_numbers_with_provenance(built_site: Path) -> None:
    html = (built_site / "phase-24" / "lab" / "00-hello-cuda" / "index.html").read_text()
    assert html.count('class="mk-provenance"') >= 4
    assert "<svg" in html and "mk-plot" in html
    assert 'href="../../../results/h200/vector_add.json"' in html
    assert (built_site / "results" / "h200" / "vector_add.json").exists()


@pytest.mark.parametrize("lang", ["en", "es"])
def test_lab_notebook_renders_as_a_notebook_and_downloads(built_site: Path, lang: str) -> None:
    base = built_site / "es" if lang == "es" else built_site
    page = base / "phase-24" / "lab" / "00-hello-cuda-notebook" / "index.html"
    html = page.read_text()
    assert "jp-Cell" in html, "mkdocs-jupyter did not render a notebook"
    title = "hola CUDA" if lang == "es" else "hello CUDA"
    assert title in html
    ipynb = base / "phase-24" / "lab" / "00_vector_add.ipynb"
    assert ipynb.exists()
    assert '"lang"' not in ipynb.read_text(), "language tags leaked into the download"


MACROS_ONLY_CONFIG = """\
site_name: t
plugins:
  - macros:
      modules: [minikernel.site.macros]
      render_by_default: false
      on_error_fail: true
      on_undefined: strict
"""


def _build_one_page(tmp_path: Path, run_mkdocs, body: str):  # type: ignore[no-untyped-def]
    """Build a one-page site with only the macros plugin; return the finished process."""
    (tmp_path / "docs").mkdir()
    page = "---\nrender_macros: true\n---\n# x\n" + textwrap.dedent(body)
    (tmp_path / "docs" / "index.md").write_text(page)
    (tmp_path / "mkdocs.yml").write_text(MACROS_ONLY_CONFIG)
    return run_mkdocs("build", "--strict", cwd=tmp_path)


def test_a_missing_record_fails_the_build(tmp_path: Path, run_mkdocs) -> None:  # type: ignore[no-untyped-def]
    proc = _build_one_page(
        tmp_path,
        run_mkdocs,
        """\
        {{ figure("vector_add", {"impl": "cuda:99", "shape": [1], "dtype": "float32"}) }}
        """,
    )
    assert proc.returncode != 0
    assert "cuda:99" in proc.stdout + proc.stderr


def test_an_explanation_whose_subject_changed_fails_the_build(tmp_path: Path, run_mkdocs) -> None:  # type: ignore[no-untyped-def]
    """expect(): a sentence that explains why `x` wins must fail when the results name `y`."""
    proc = _build_one_page(
        tmp_path,
        run_mkdocs,
        """\
        {{ expect(best_of("vector_add", {"shape": [268435456], "dtype": "float32"},
                          among=["cuda:1", "cuda:2"]), "cuda:1", "the faster CUDA C rung") }}
        """,
    )
    assert proc.returncode != 0
    assert "is no longer `cuda:1`" in proc.stdout + proc.stderr


def test_best_name_hands_the_winner_to_other_macros(tmp_path: Path, run_mkdocs) -> None:  # type: ignore[no-untyped-def]
    """best_name(): the bare winner, usable as another macro's impl (the page follows the run)."""
    import json

    recs = json.loads((ROOT / "labs/results/h200/vector_add.json").read_text())["records"]
    sel = [r for r in recs if r["shape"] == [268435456] and r["dtype"] == "float32"]
    sel = [r for r in sel if r["impl"] in ("cuda:1", "cuda:2")]
    want = max(sel, key=lambda r: r["GBps"])["impl"]
    proc = _build_one_page(
        tmp_path,
        run_mkdocs,
        """\
        {% set B = best_name("vector_add", {"shape": [268435456], "dtype": "float32"},
                             among=["cuda:1", "cuda:2"]) %}
        WINNER[{{ B }}]
        {{ figure("vector_add", {"impl": B, "shape": [268435456], "dtype": "float32"}) }}
        """,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    assert f"WINNER[{want}]" in html


def _build_with_results(tmp_path: Path, run_mkdocs, body: str, results: dict[str, dict]):  # type: ignore[no-untyped-def]
    """_build_one_page, reading results from tmp_path/results/h200/<op>.json (``results``)."""
    import json

    for op, data in results.items():
        (tmp_path / "results" / "h200").mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / "h200" / f"{op}.json").write_text(json.dumps(data))
    (tmp_path / "docs").mkdir()
    page = "---\nrender_macros: true\n---\n# x\n" + textwrap.dedent(body)
    (tmp_path / "docs" / "index.md").write_text(page)
    config = MACROS_ONLY_CONFIG.replace(
        "site_name: t\n", "site_name: t\nextra:\n  results_dir: results\n"
    )
    (tmp_path / "mkdocs.yml").write_text(config)
    return run_mkdocs("build", "--strict", cwd=tmp_path)


@pytest.mark.parametrize("lang_claim", ["ok", "wrong-claim", "no-config"])
def test_launch_config_names_the_autotuned_choice(
    tmp_path: Path, run_mkdocs, lang_claim: str
) -> None:  # type: ignore[no-untyped-def]
    """launch_config(): the autotuner's choice recorded by the lab, in words; the build fails
    when the page claims another choice, or when the record has none."""
    import json

    data = json.loads((ROOT / "labs/results/h200/vector_add.json").read_text())
    rec = data["records"][0]
    sel = {"impl": rec["impl"], "shape": rec["shape"], "dtype": rec["dtype"]}
    rec.pop("config", None)
    if lang_claim != "no-config":
        rec["config"] = {"num_warps": 2, "RELOAD": True}
    claim = "RELOAD=False" if lang_claim == "wrong-claim" else "RELOAD=True"
    proc = _build_with_results(
        tmp_path,
        run_mkdocs,
        f"CHOSEN[{{{{ launch_config('vector_add', {sel!r}, {claim}) }}}}]\n",
        {"vector_add": data},
    )
    out = proc.stdout + proc.stderr
    if lang_claim == "ok":
        assert proc.returncode == 0, out
        html = (tmp_path / "site" / "index.html").read_text()
        assert "2 warps, row read twice" in html
        assert 'class="mk-prov"' in html  # with its provenance
    elif lang_claim == "wrong-claim":
        assert proc.returncode != 0
        assert "the autotuner chose RELOAD=True, the page says False" in out
    else:
        assert proc.returncode != 0
        assert "has no launch config" in out


def test_result_value_raw_is_the_stored_value(tmp_path: Path, run_mkdocs) -> None:  # type: ignore[no-untyped-def]
    """result_value(raw=True) hands a page the stored value itself (here the SM count of the
    results' GPU), so that a guard or a sum can use it; number() writes such a sum the page's
    language's way."""
    import json

    data = json.loads((ROOT / "labs/results/h200/vector_add.json").read_text())
    data["env"]["sms"] = 7
    proc = _build_with_results(
        tmp_path,
        run_mkdocs,
        "SUM[{{ result_value('vector_add', 'env.sms', raw=True) * 6 }}] "
        "NUM[{{ number(result_value('vector_add', 'env.sms', raw=True) / 2) }}]\n",
        {"vector_add": data},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    assert "SUM[42]" in html and "NUM[3.5]" in html


def test_launch_config_in_words_per_language() -> None:
    from minikernel.site import fmt

    assert fmt.launch_config({"num_warps": 1, "RELOAD": False}, "en") == (
        "1 warp, row kept in registers"
    )
    assert fmt.launch_config({"num_warps": 8, "RELOAD": True}, "es") == (
        "8 warps, fila leída dos veces"
    )
    assert fmt.launch_config({"num_warps": 4, "TILE": 4096}, "es") == "4 warps, TILE=4096"
