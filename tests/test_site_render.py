"""The site's renderers: number formats, tables, plots, provenance, stale flags and claims."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import torch
from test_results import minimal_results

from minikernel.bench.results import RESULTS_DIR
from minikernel.kernels.vector_add import VARIANTS, vector_add
from minikernel.site import fmt, render, svgplot
from minikernel.site.data import MissingResult, ResultsFile, is_stale, one

pytest_plugins = ["site_fixtures"]  # run_mkdocs


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


def test_ratio_claim_fails_outside_its_bounds() -> None:
    f = results_file()
    a, b = {"impl": "triton:1", "shape": [1024]}, {"impl": "cuda:1", "shape": [1024]}
    assert render.ratio_value(f, a, b, "median_us", at_most=0.5) == pytest.approx(0.5)
    with pytest.raises(render.ClaimFailed, match=r"at most 0\.25 times .* give 0\.500"):
        render.ratio_value(f, a, b, "median_us", at_most=0.25)
    with pytest.raises(render.ClaimFailed, match=r"at least 0\.75 times"):
        render.ratio_value(f, a, b, "median_us", at_least=0.75)


def test_added_memory_is_derived_from_peak_and_base() -> None:
    data = minimal_results()
    rec = data["records"][0]
    # Placeholder values that only exercise the derivation (not measurements).
    rec.update(peak_mem_bytes=5000, base_mem_bytes=1200)
    data["records"].append({k: v for k, v in rec.items() if k != "base_mem_bytes"})
    f = ResultsFile("vector_add", "test-gpu", Path("/x/test-gpu/vector_add.json"), data)
    assert f.data["records"][0]["added_mem_bytes"] == 3800
    assert "added_mem_bytes" not in f.data["records"][1]  # no base, nothing derived


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


def test_roofline_points_sit_under_the_roof_by_their_fraction_of_the_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    f = results_file()  # ceilings: copy 1 GB/s, bf16 matmul 1 TFLOP/s; ridge at 1000 FLOP/B
    cases = [({"shape": [1024]}, 0.5), ({"shape": [4096]}, 2.0)]
    a = render.roofline_plot(
        f, lang="en", href="r.json", title="t", impls=["triton:1", "torch:eager"], cases=cases
    )
    assert a == render.roofline_plot(
        f, lang="en", href="r.json", title="t", impls=["triton:1", "torch:eager"], cases=cases
    )
    assert len(re.findall(r"<circle", a)) == 4  # two cases x two impls; the roof has no markers
    assert "1,000 FLOP/B at the ridge" in a and 'stroke-dasharray="6 4"' in a  # peer dashed
    es = render.roofline_plot(
        f, lang="es", href="r.json", title="t", impls=["triton:1"], cases=cases
    )
    assert "punto de cresta en 1000 FLOP/B" in es
    # A point's rate is GB/s x I: triton:1 at 1024 runs 12 x 1024 / 2 / 1000 GB/s.
    seen = []
    monkeypatch.setattr(svgplot, "render", lambda plot, lang="en": seen.append(plot) or "")
    render.roofline_plot(f, lang="en", href="r.json", title="t", impls=["triton:1"], cases=cases)
    roof, pts = seen[0].series
    assert roof.points[1] == (1000.0, 1.0) and not roof.markers
    gbps = 12.0 * 1024 / 2.0 / 1000
    assert pts.points[0] == (0.5, gbps / 1000 * 0.5)
    with pytest.raises(render.ClaimFailed, match="at least one case"):
        render.roofline_plot(f, lang="en", href="r.json", title="t", impls=["triton:1"], cases=[])
    with pytest.raises(MissingResult):
        render.roofline_plot(
            f, lang="en", href="r.json", title="t", impls=["quack"], cases=cases[:1]
        )


def test_svg_grows_to_hold_every_legend_row() -> None:
    series = [svgplot.Series("a long legend label " * 2 + str(k), [(1.0, 1.0)]) for k in range(9)]
    short = svgplot.render(svgplot.Plot("t", "x", "y", series[:2]))
    tall = svgplot.render(svgplot.Plot("t", "x", "y", series))
    assert 'viewBox="0 0 720 400"' in short
    height = int(re.search(r'viewBox="0 0 720 (\d+)"', tall).group(1))
    rows = len(
        set(re.findall(r'<text x="100(?:\.0)?" y="(\d+)"', tall))
    )  # one label opens each row
    assert rows >= 3 and height == 400 + (rows - 2) * 18
    last = max(int(y) for y in re.findall(r'<text x="\d+(?:\.\d+)?" y="(\d+)" fill', tall))
    assert last < height  # the last row is inside the picture


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


# --- commit links -----------------------------------------------------------------------------


def test_commit_links_only_when_the_site_names_a_repository() -> None:
    f = results_file()
    sel = {"impl": "cuda:1", "shape": [1024]}
    for html in (render.provenance(f, "en", "r.json"), render.figure(f, sel, "GBps", "en", "r")):
        assert "/commit/" not in html
    repo = "https://example.org/minikernel/"
    prov = render.provenance(f, "en", "r.json", repo_url=repo)
    assert '<a class="mk-commit" href="https://example.org/minikernel/commit/0000000">' in prov
    fig = render.figure(f, sel, "GBps", "es", "r.json", repo_url=repo)
    assert 'href="https://example.org/minikernel/commit/0000000"' in fig
    assert 'href="r.json"' in fig and "Test GPU, 2026-01-01" in fig  # GPU and date, linked
    assert render.commit_url(repo, "not-a-sha") is None


def test_inline_numbers_carry_provenance_and_staleness() -> None:
    f = results_file()
    html = render.inline(f, "1.5×", "en", "r.json", stale=True)
    assert html.startswith('<span class="mk-figure">1.5×<sup class="mk-prov">')
    assert ">stale<" in html
    assert render.any_stale(f, {"impl": "triton:1"}) is False
    one(f, impl="triton:1", shape=[4096])["source_hash"] = "sha256:" + "1" * 64
    assert render.any_stale(f, {"impl": "cuda:1"}, {"impl": "triton:1"}) is True


# --- the flags in a built page ----------------------------------------------------------------

FRESH = {"impl": "triton:1", "shape": [268435456], "dtype": "float32"}
CHANGED = {"impl": "cuda:2", "shape": [268435456], "dtype": "float32"}  # also has an ncu excerpt

PAGE = """\
---
render_macros: true
---
# Flags

<div id="fresh" markdown>{{ figure("vector_add", %(fresh)s) }}</div>

<div id="changed" markdown>{{ figure("vector_add", %(changed)s) }}</div>

<div id="speedup" markdown>
{{ speedup("vector_add", fast=%(fresh)s, slow=%(changed)s, at_least=0) }}
</div>

<div id="table" markdown>

{{ results_table("vector_add", dtype="float32", impls=["triton:1", "cuda:2"]) }}

</div>

<div id="plot" markdown>
{{ results_plot("vector_add", title="t", x_label="n", dtype="float32",
                impls=["triton:1", "cuda:2"]) }}
</div>

<div id="ncu" markdown>

{{ ncu("vector_add", "cuda:2") }}

</div>
"""

OTHER_GPU_PAGE = """\
---
render_macros: true
results_gpu: rtx-5090
---
# Another GPU

<div id="other" markdown>{{ figure("vector_add", %(fresh)s) }}</div>
"""

MINI_SITE = """\
site_name: flags
extra:
  results_gpu: h200
  results_dir: results
  repo_url: https://example.org/minikernel
markdown_extensions: [md_in_html, tables]
plugins:
  - macros:
      modules: [minikernel.site.macros]
      render_by_default: false
      on_error_fail: true
      on_undefined: strict
"""


def _section(html: str, div_id: str) -> str:
    """The HTML from ``<div id=div_id>`` to the next such div (or the end of the article)."""
    start = html.index(f'<div id="{div_id}">')
    nxt = html.find('<div id="', start + 1)
    return html[start : nxt if nxt != -1 else None]


@pytest.fixture(scope="module")
def flagged_site(tmp_path_factory: pytest.TempPathFactory, run_mkdocs) -> Path:  # type: ignore[no-untyped-def]
    """A small site built from a copy of the H200 results in which every hash is refreshed to
    the source as it is now, except the record ``CHANGED``, whose hash is changed: as if its
    kernel had been edited after the lab ran. The same file also sits in a folder named for
    another GPU (rtx-5090), which a second page names."""
    root = tmp_path_factory.mktemp("flags")
    data = json.loads((RESULTS_DIR / "h200" / "vector_add.json").read_text())
    for rec in data["records"]:
        if rec["impl"] in VARIANTS:
            rec["source_hash"] = VARIANTS[rec["impl"]].source_hash()
    one(ResultsFile("vector_add", "h200", Path("x"), data), **CHANGED)["source_hash"] = (
        "sha256:" + "0" * 64
    )
    for slug in ("h200", "rtx-5090"):
        (root / "results" / slug).mkdir(parents=True)
        (root / "results" / slug / "vector_add.json").write_text(json.dumps(data))
    docs = root / "docs"
    docs.mkdir()
    (docs / "results").symlink_to(root / "results", target_is_directory=True)
    sels = {"fresh": repr(FRESH), "changed": repr(CHANGED)}
    (docs / "index.md").write_text(PAGE % sels)
    (docs / "other.md").write_text(OTHER_GPU_PAGE % sels)
    (root / "mkdocs.yml").write_text(MINI_SITE)
    proc = run_mkdocs("build", "--strict", cwd=root)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return root / "site"


@pytest.mark.site
def test_changed_hash_flags_every_number_from_that_record(flagged_site: Path) -> None:
    html = (flagged_site / "index.html").read_text()
    stale = 'class="mk-stale" title="The source of this kernel has changed'
    assert stale not in _section(html, "fresh")
    assert stale in _section(html, "changed")
    assert stale in _section(html, "speedup")  # computed from the changed record
    table = _section(html, "table")
    assert "†" in table and "mk-stale-note" in table
    assert "CUDA C 2 (stale)" in _section(html, "plot") and "Triton 1 (stale)" not in html
    assert stale in _section(html, "ncu")  # the excerpt was taken with the changed kernel


@pytest.mark.site
def test_every_number_links_to_its_results_file_and_commit(flagged_site: Path) -> None:
    html = (flagged_site / "index.html").read_text()
    for div in ("fresh", "changed", "speedup", "table", "plot", "ncu"):
        part = _section(html, div)
        assert re.search(r'href="(\./)?results/h200/vector_add\.json"', part), div
        assert "https://example.org/minikernel/commit/" in part, div
        assert "H200" in part and re.search(r"20\d\d-\d\d-\d\d", part), div
    assert (flagged_site / "results" / "h200" / "vector_add.json").is_file()


@pytest.mark.site
def test_figure_from_another_gpu_than_the_page_names_is_flagged(flagged_site: Path) -> None:
    html = (flagged_site / "other" / "index.html").read_text()
    assert "measured on NVIDIA H200, not on the rtx-5090 this page names" in html
    assert "not on the" not in (flagged_site / "index.html").read_text()


def test_two_records_for_one_cell_fail_instead_of_hiding_one() -> None:
    f = results_file()
    extra = dict(one(f, impl="cuda:1", shape=[1024]), epilogue="bias+relu", median_us=9.0)
    f.data["records"].append(extra)
    with pytest.raises(render.ClaimFailed, match="two records for cuda:1"):
        render.pivot_table(f, field="median_us", lang="en", href="r.json")
    # a field a record lacks matches "none": the plain records, without the epilogue one
    md = render.pivot_table(
        f, field="median_us", lang="en", href="r.json", extra={"epilogue": "none"}
    )
    assert "9.00" not in md
    assert one(f, impl="cuda:1", shape=[1024], epilogue="bias+relu")["median_us"] == 9.0


def test_at_most_claim_and_top_level_values() -> None:
    f = results_file()
    sel = {"impl": "cuda:1", "shape": [1024]}
    assert render.check_at_most(f, sel, "frac_of_ceiling", 1.0) == 1.0
    with pytest.raises(render.ClaimFailed, match=r"frac_of_ceiling <= 0\.9"):
        render.check_at_most(f, sel, "frac_of_ceiling", 0.9)
    assert render.top_level_value(f, "ceilings.copy_GBps") == 1.0
    assert render.top_level_value(f, "records.0.impl") == "cuda:1"
    with pytest.raises(render.ClaimFailed, match=r"no value at 'e1\.saved_bytes'"):
        render.top_level_value(f, "e1.saved_bytes")


def test_best_impl_and_ncu_record() -> None:
    f = results_file()
    assert render.best_impl(f, {"shape": [1024]}, None, "median_us", "min")["impl"] == "triton:1"
    assert (
        render.best_impl(f, {"shape": [1024]}, ["cuda:1", "torch:eager"], "median_us", "min")[
            "impl"
        ]
        == "torch:eager"
    )
    with pytest.raises(render.ClaimFailed, match="expected one ncu excerpt"):
        render.ncu_record(f, "cuda:1")


def test_host_bound_times_are_marked() -> None:
    """A record whose host cost per call (host_us) reaches HOST_BOUND_FRAC of its time gets a
    badge inline and a double dagger in tables, with a note; one below it, or without host_us
    (graph replay, older runs), gets neither."""
    from minikernel.site.data import HOST_BOUND_FRAC, is_host_bound

    f = results_file()
    slow = one(f, impl="cuda:1", shape=[1024])  # placeholder: median_us 4.0
    quick = one(f, impl="triton:1", shape=[1024])
    assert not is_host_bound(slow)  # no host_us: not marked
    slow["host_us"] = HOST_BOUND_FRAC * slow["median_us"]
    quick["host_us"] = 0.5 * HOST_BOUND_FRAC * quick["median_us"]
    assert is_host_bound(slow) and not is_host_bound(quick)
    html = render.figure(f, {"impl": "cuda:1", "shape": [1024]}, "median_us", "en", "r.json")
    assert 'class="mk-hostbound"' in html and ">host-bound<" in html
    assert "mk-hostbound" not in render.figure(
        f, {"impl": "triton:1", "shape": [1024]}, "median_us", "en", "r.json"
    )
    md = render.pivot_table(f, field="median_us", lang="es", href="r.json", best="min")
    assert md.count("‡") == 2  # the one cell, and the note under the table
    assert "mk-hostbound-note" in md and "limitado por el host" in md
    slow["source_hash"] = "sha256:" + "0" * 64  # stale and host-bound: both marks, both notes
    md = render.pivot_table(f, field="median_us", lang="en", href="r.json", best="min")
    assert " † ‡" in md and "mk-stale-note" in md and "mk-hostbound-note" in md


def test_clock_and_power_fields_format_with_units() -> None:
    """The lab's clock fields (bench/clocks.py) read as a clock and a power in both languages."""
    assert render.format_value("sm_mhz", 1980, "en") == "1,980 MHz"
    assert render.format_value("sm_mhz", 1418.0, "es") == "1418 MHz"
    assert render.format_value("power_w", 699.6, "en") == "700 W"
    assert render.format_value("power_limit_w", 700.0, "es") == "700 W"
    assert render.format_value("loop_sm_mhz", 1791, "en") == "1,791 MHz"
    assert render.format_value("loop_capped_frac", 0.652, "en") == "65\u202f%"
    assert render.format_value("loop_capped_frac", 1.0, "es") == "100\u202f%"
    # ncu's counts arrive as floats from its CSV; a page shows them whole
    assert render.format_value("registers_per_thread", 55.0, "en") == "55"
    assert render.format_value("block_size", 1024.0, "en") == "1,024"


def test_ncu_excerpt_names_the_backward_pass() -> None:
    """An excerpt recorded with pass "bwd" says so in its title, in both languages; one without
    a pass (every forward excerpt) keeps the plain title. Two excerpts of one impl at two shapes
    are told apart by the shape."""
    rec = {
        "impl": "cuda:1",
        "dtype": "float32",
        "ncu_version": "2025.3",
        "metrics": {},
        "excerpt": "(placeholder)",
    }
    f = results_file(ncu=[dict(rec, shape=[1024]), dict(rec, shape=[4096], **{"pass": "bwd"})])
    fwd = render.ncu_excerpt(f, "cuda:1", "en", "r.json", shape=[1024])
    assert "`cuda:1`, " in fwd and "backward" not in fwd
    assert "`cuda:1` backward," in render.ncu_excerpt(f, "cuda:1", "en", "r.json", shape=[4096])
    assert "backward de `cuda:1`" in render.ncu_excerpt(f, "cuda:1", "es", "r.json", shape=[4096])
    with pytest.raises(render.ClaimFailed, match="expected one ncu excerpt for cuda:1, found 2"):
        render.ncu_excerpt(f, "cuda:1", "en", "r.json")


def test_ncu_excerpt_picks_the_pass_at_one_shape() -> None:
    """One impl profiled forward and backward at the same shape and dtype (a lab may): without a
    pass the page's call is ambiguous and fails; ``pass_`` picks one, "fwd" matching the
    forward excerpts, which carry no pass."""
    rec = {
        "impl": "quack",
        "shape": [16384, 131072],
        "dtype": "float32",
        "ncu_version": "2025.3",
        "metrics": {},
        "excerpt": "(placeholder)",
    }
    f = results_file(ncu=[dict(rec), dict(rec, **{"pass": "bwd"})])
    with pytest.raises(render.ClaimFailed, match="found 2"):
        render.ncu_excerpt(f, "quack", "en", "r.json", shape=[16384, 131072])
    fwd = render.ncu_excerpt(f, "quack", "en", "r.json", shape=[16384, 131072], pass_="fwd")
    bwd = render.ncu_excerpt(f, "quack", "en", "r.json", shape=[16384, 131072], pass_="bwd")
    assert "backward" not in fwd and "`quack` backward," in bwd
    assert render.ncu_matches(rec, "quack", pass_="fwd")
    assert not render.ncu_matches(rec, "quack", pass_="bwd")
    assert not render.ncu_matches(rec, "quack", dtype="bfloat16")


def test_a_failed_claim_with_a_per_cent_sign_reaches_the_error_page() -> None:
    """mkdocs-macros' own error formatter applies ``%`` after inserting the message, so "within
    5 % of" raised a TypeError in the handler and hid the claim. Ours, registered for our
    failure types, shows the message as written."""
    pytest.importorskip("mkdocs_macros")
    from types import SimpleNamespace

    from mkdocs_macros.errors import format_error

    from minikernel.site import macros

    page = SimpleNamespace(file=SimpleNamespace(src_path="x.md"))
    claim = render.ClaimFailed("the DRAM bytes are no longer `within 5 % of the model`")
    macros._register_error_page()
    for error in (claim, MissingResult("100 % missing")):
        text = format_error(error, "", page)
        assert str(error) in text and "`x.md`" in text
        assert text.startswith("# _Macro Rendering Error_")
