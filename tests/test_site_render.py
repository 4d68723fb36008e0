"""The site's renderers: number formats, tables, plots, provenance, stale flags and claims."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import torch
from test_results import minimal_results

from minikernel.kernels.vector_add import VARIANTS, vector_add
from minikernel.site import fmt, render, svgplot
from minikernel.site.data import MissingResult, ResultsFile, is_stale, one


def results_file(slug: str = "test-gpu", **changes) -> ResultsFile:  # type: ignore[no-untyped-def]
    data = minimal_results()
    base = data["records"][0]
    recs = []
    # Placeholder values that only exercise the renderers (not measurements).
    for impl, us in (("cuda:1", 4.0), ("triton:1", 2.0), ("torch:eager", 3.0)):
        for n in (1024, 4096):
            r = dict(base, impl=impl, shape=[n], median_us=us, GBps=12.0 * n / us / 1000)
            r["source_hash"] = VARIANTS[impl].source_hash() if impl in VARIANTS else "pkg:torch==0"
            recs.append(r)
    data["records"] = recs
    data.update(changes)
    return ResultsFile("vector_add", slug, Path(f"/x/{slug}/vector_add.json"), data)


@pytest.mark.parametrize(
    ("value", "lang", "digits", "text"),
    [
        (4364.5, "en", 1, "4,364.5"),
        (4364.5, "es", 1, "4364,5"),
        (43645.25, "es", 2, "43\u202f645,25"),
        (0.5, "es", 2, "0,50"),
    ],
)
def test_numbers_by_language(value: float, lang: str, digits: int, text: str) -> None:
    assert fmt.number(value, lang, digits) == text


def test_units_by_language() -> None:
    assert fmt.bandwidth(4364.5, "en") == "4.36\u202fTB/s"
    assert fmt.bandwidth(4364.5, "es") == "4,36\u202fTB/s"
    assert fmt.duration_us(1470.0, "es") == "1,47\u202fms"
    assert fmt.percent(0.9655, "es") == "96,5\u202f%"


def test_pivot_table_bolds_the_best_and_shows_provenance() -> None:
    f = results_file()
    md = render.pivot_table(f, field="median_us", lang="en", href="r.json", best="min")
    assert "**2.00\u202fµs**" in md  # triton:1 is the fastest placeholder row
    assert "Measured on NVIDIA Test GPU on 2026-01-01, commit <code>0000000</code>" in md
    assert 'href="r.json"' in md
    assert "†" not in md


def test_stale_flag_appears_when_source_hash_changes() -> None:
    f = results_file()
    rec = one(f, impl="cuda:1", shape=[1024])
    assert not is_stale("vector_add", rec)
    rec["source_hash"] = "sha256:" + "0" * 64  # as if the kernel had been edited since
    assert is_stale("vector_add", rec)
    html = render.figure(f, {"impl": "cuda:1", "shape": [1024]}, "GBps", "en", "r.json")
    assert 'class="mk-stale"' in html and ">stale<" in html
    md = render.pivot_table(f, field="GBps", lang="es", href="r.json")
    assert "†" in md and "desactualizado" in md


def test_peers_are_never_stale() -> None:
    rec = one(results_file(), impl="torch:eager", shape=[1024])
    assert not is_stale("vector_add", rec)


def test_figure_from_another_gpu_is_flagged() -> None:
    f = results_file(slug="h200")  # the page names the H200; the file says another GPU
    html = render.figure(f, {"impl": "triton:1", "shape": [4096]}, "GBps", "en", "r.json")
    assert "measured on NVIDIA Test GPU, not on the h200" in html
    assert 'class="mk-stale"' in render.provenance(f, "en", "r.json")


def test_missing_record_fails() -> None:
    with pytest.raises(MissingResult, match="found 0"):
        one(results_file(), impl="cuda:9")


def test_speedup_claim_fails_when_it_no_longer_holds() -> None:
    f = results_file()
    fast, slow = {"impl": "triton:1", "shape": [1024]}, {"impl": "cuda:1", "shape": [1024]}
    assert render.speedup(f, fast, slow, at_least=1.5) == pytest.approx(2.0)
    with pytest.raises(render.ClaimFailed, match=r"at least 2\.5x"):
        render.speedup(f, fast, slow, at_least=2.5)
    with pytest.raises(render.ClaimFailed, match=r"give 0\.500x"):
        render.speedup(f, slow, fast, at_least=1.0)  # the claim reversed


def test_at_least_claim() -> None:
    f = results_file()
    sel = {"impl": "cuda:1", "shape": [1024]}
    assert render.check_at_least(f, sel, "frac_of_ceiling", 0.9) == 1.0
    with pytest.raises(render.ClaimFailed, match=r"frac_of_ceiling >= 1\.5"):
        render.check_at_least(f, sel, "frac_of_ceiling", 1.5)


def test_plot_is_deterministic_and_themeable() -> None:
    f = results_file()
    a = render.line_plot(f, lang="en", href="r.json", title="t", x_label="n")
    b = render.line_plot(f, lang="en", href="r.json", title="t", x_label="n")
    assert a == b
    assert "currentColor" in a and "<svg" in a and 'stroke-dasharray="6 4"' in a  # peer dashed
    assert len(re.findall(r"<circle", a)) == 6


def test_svg_rejects_empty_plot() -> None:
    with pytest.raises(ValueError, match="no points"):
        svgplot.render(svgplot.Plot("empty", "x", "y", []))


def test_render_table_benchmark(benchmark) -> None:  # type: ignore[no-untyped-def]
    f = results_file()
    big = copy.deepcopy(f.data)
    big["records"] = big["records"] * 50
    ff = ResultsFile("vector_add", "test-gpu", f.path, big)
    out = benchmark(render.line_plot, ff, lang="es", href="r.json", title="t", x_label="n")
    assert out.startswith("<figure")


def test_numpy_fallback_benchmark(benchmark) -> None:  # type: ignore[no-untyped-def]
    a = torch.randn(1 << 20)
    b = torch.randn(1 << 20)
    out = benchmark(vector_add, a, b, impl="numpy")
    assert torch.equal(out, a + b)


def test_grid_table_pivots_two_fields() -> None:
    f = results_file()
    for i, r in enumerate(f.data["records"]):
        r["block_size"], r["num_warps"] = (64, 128)[i % 2], (1, 2, 4)[i // 2 % 3]
    md = render.grid_table(
        f,
        rows="block_size",
        cols="num_warps",
        field="median_us",
        lang="en",
        href="r.json",
        best="min",
    )
    assert md.splitlines()[0] == "| block_size ↓ num_warps → | 1 | 2 | 4 |"
    assert "**2.00\u202fµs**" in md and "**4.00" not in md and "**3.00" not in md  # ties bold
