"""The mkdocs-macros module: binds the renderers in ``render.py`` to pages.

Pages opt in with ``render_macros: true`` in their front matter. Every macro takes the op name
(the results file) and selects records by field; a missing file or record, or a claim that no
longer holds, raises, and with ``on_error_fail: true`` the build fails. The macros are
documented for contributors in docs/contributing.md.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from . import data, render
from .notebooks import generate

ROOT = Path(__file__).resolve().parents[3]


def error_page(error: Exception, markdown: str, page: Any) -> str:
    """The error text mkdocs-macros writes (and logs) for a page whose claim failed.

    Its own formatter puts the message into its text and then applies ``%`` to the whole, so a
    message with a per cent sign in it ("within 5 % of the byte model") raised a TypeError
    inside the error handler and the log showed that instead of the claim. This one inserts
    the message after formatting; :func:`define_env` registers it for our two failure types."""
    import traceback

    return "\n".join(
        [
            "# _Macro Rendering Error_",
            "",
            f"_File_: `{page.file.src_path}`",
            "",
            f"_{type(error).__name__}_: {error}",
            "",
            "```",
            traceback.format_exc(),
            "```",
        ]
    )


def _register_error_page() -> None:
    try:
        from mkdocs_macros.errors import format_error
    except ImportError:  # an older mkdocs-macros: its formatter is the only one
        return
    for kind in (render.ClaimFailed, data.MissingResult):
        format_error.register(kind, error_page)


def define_env(env: Any) -> None:  # noqa: C901 - one closure per macro, by design
    _register_error_page()
    extra = env.conf.get("extra", {}) or {}
    default_gpu = extra.get("results_gpu", "h200")
    # extra.repo_url: when set, commits link to <repo_url>/commit/<sha> (empty: unlinked).
    repo_url = (extra.get("repo_url") or "").strip()
    # extra.results_dir: where the results files are read from (relative to mkdocs.yml); the
    # tests point it at a modified copy. Default: labs/results of this checkout.
    results_root = data.RESULTS_DIR
    if extra.get("results_dir"):
        results_root = (Path(env.conf["config_file_path"]).parent / extra["results_dir"]).resolve()
    generate(ROOT / "labs", Path(env.conf["docs_dir"]))
    data.current_hash.cache_clear()

    def lang() -> str:
        page = env.page
        locale = getattr(getattr(page, "file", None), "locale", None)
        return locale or env.conf["theme"].get("language") or "en"

    def gpu_of(gpu: str | None) -> str:
        meta = getattr(env.page, "meta", {}) or {}
        return gpu or meta.get("results_gpu") or default_gpu

    def href(op: str, slug: str) -> str:
        # Results files are copied into the site under results/ (docs/results links to them).
        url = env.page.url or ""
        depth = url.count("/")  # "a/b/page/" and "a/b/page.html" both sit 3 and 2 deep
        return posixpath.join(*([".."] * depth or ["."]), "results", slug, f"{op}.json")

    def load(op: str, gpu: str | None) -> data.ResultsFile:
        slug = gpu_of(gpu)
        return data.results_file(op, slug, results_root)

    def inline(f: data.ResultsFile, text: str, *sels: dict) -> str:
        """A number with its provenance; stale when a record it was computed from is."""
        return render.inline(
            f, text, lang(), href(f.op, f.slug), stale=render.any_stale(f, *sels), repo_url=repo_url
        )

    @env.macro
    def results_table(
        op: str,
        field: str = "GBps",
        impls: list[str] | None = None,
        dtype: str | None = None,
        pass_: str | None = None,
        shapes: list[list] | None = None,
        best: str | None = "max",
        gpu: str | None = None,
        where: dict | None = None,
    ) -> str:
        """Pivot table: shapes down, implementations across, ``field`` in the cells."""
        f = load(op, gpu)
        return render.pivot_table(
            f,
            field=field,
            lang=lang(),
            href=href(op, f.slug),
            impls=impls,
            dtype=dtype,
            pass_=pass_,
            shapes=shapes,
            best=best,
            extra=where,
            repo_url=repo_url,
        )

    @env.macro
    def results_grid(
        op: str,
        rows: str,
        cols: str,
        field: str = "GBps",
        where: dict | None = None,
        best: str | None = "max",
        gpu: str | None = None,
    ) -> str:
        """Two record fields as axes (e.g. block_size x num_warps), ``field`` in the cells."""
        f = load(op, gpu)
        return render.grid_table(
            f,
            rows=rows,
            cols=cols,
            field=field,
            lang=lang(),
            href=href(op, f.slug),
            where=where,
            best=best,
            repo_url=repo_url,
        )

    @env.macro
    def results_plot(
        op: str,
        title: str,
        x_label: str,
        field: str = "GBps",
        x: str = "n",
        impls: list[str] | None = None,
        dtype: str | None = None,
        pass_: str | None = None,
        ceiling: str | None = "copy_GBps",
        gpu: str | None = None,
        where: dict | None = None,
        log_y: bool = False,
    ) -> str:
        """An inline SVG line plot of ``field`` against a shape dimension, with the ceiling."""
        f = load(op, gpu)
        return render.line_plot(
            f,
            lang=lang(),
            href=href(op, f.slug),
            title=title,
            x_label=x_label,
            field=field,
            x=x,
            impls=impls,
            dtype=dtype,
            pass_=pass_,
            ceiling=ceiling,
            extra=where,
            log_y=log_y,
            repo_url=repo_url,
        )

    @env.macro
    def roofline_plot(
        op: str,
        title: str,
        impls: list[str],
        cases: list,
        compute: str = "bf16_mm_TFLOPs",
        gpu: str | None = None,
    ) -> str:
        """An inline SVG roofline from the run's ceilings, a point per implementation and case:
        ``cases`` is a list of (selector, FLOP per byte from the op's models)."""
        f = load(op, gpu)
        return render.roofline_plot(
            f,
            lang=lang(),
            href=href(op, f.slug),
            title=title,
            impls=impls,
            cases=[(sel, intensity) for sel, intensity in cases],
            compute=compute,
            repo_url=repo_url,
        )

    @env.macro
    def figure(op: str, sel: dict, field: str = "GBps", gpu: str | None = None) -> str:
        """One measured value, inline, with its provenance."""
        f = load(op, gpu)
        return render.figure(f, sel, field, lang(), href(op, f.slug), repo_url)

    @env.macro
    def value(
        op: str, sel: dict, field: str = "GBps", gpu: str | None = None, raw: bool = False
    ) -> Any:
        """One measured value, formatted, with no provenance (for use next to a figure());
        ``raw=True`` gives the number itself, for a page's conditions (which sentence a
        result supports), never for display."""
        f = load(op, gpu)
        rec = data.one(f, **sel)
        if raw:
            return rec.get(field)
        return render.format_value(field, rec.get(field), lang())

    @env.macro
    def ratio(
        op: str,
        num: dict,
        den: dict,
        field: str = "median_us",
        gpu: str | None = None,
        at_most: float | None = None,
        at_least: float | None = None,
    ) -> str:
        """num[field] / den[field], e.g. a slowdown or a speed-up, as "1.23×"; fails the build
        if it is above ``at_most`` or below ``at_least`` when the page gives them."""
        f = load(op, gpu)
        r = render.ratio_value(f, num, den, field, at_most, at_least)
        return inline(f, render.fmt.ratio(r, lang()), num, den)

    @env.macro
    def speedup(
        op: str, fast: dict, slow: dict, at_least: float = 1.0, gpu: str | None = None
    ) -> str:
        """time(slow) / time(fast) as "1.23×"; fails the build if it is below ``at_least``."""
        f = load(op, gpu)
        r = render.speedup(f, fast, slow, at_least)
        return inline(f, render.fmt.ratio(r, lang()), fast, slow)

    @env.macro
    def at_least(op: str, sel: dict, field: str, threshold: float, gpu: str | None = None) -> str:
        """The value of ``field`` (formatted); fails the build if it is below ``threshold``."""
        f = load(op, gpu)
        v = render.check_at_least(f, sel, field, threshold)
        return inline(f, render.format_value(field, v, lang()), sel)

    @env.macro
    def at_most(op: str, sel: dict, field: str, threshold: float, gpu: str | None = None) -> str:
        """The value of ``field`` (formatted); fails the build if it is above ``threshold``."""
        f = load(op, gpu)
        v = render.check_at_most(f, sel, field, threshold)
        return inline(f, render.format_value(field, v, lang()), sel)

    @env.macro
    def result_value(
        op: str, path: str, kind: str = "auto", gpu: str | None = None, raw: bool = False
    ) -> Any:
        """A value stored outside the records (``e1.saved_bytes``, ``env.sms``), formatted as
        ``kind`` (bytes, percent, us, seconds, GBps, auto), with provenance; ``raw=True`` gives
        the value itself, for a page's guards and arithmetic."""
        f = load(op, gpu)
        v = render.top_level_value(f, path)
        if raw:
            return v
        field = {
            "bytes": "bytes",
            "percent": "frac_of_ceiling",
            "us": "median_us",
            "GBps": "GBps",
        }.get(kind, path.rsplit(".", 1)[-1])
        if kind == "seconds":
            text = render.fmt.seconds(v, lang())
        else:
            text = render.format_value(field, v, lang())
        return inline(f, text)

    @env.macro
    def best_of(
        op: str,
        sel: dict,
        among: list[str] | None = None,
        field: str = "GBps",
        best: str = "max",
        gpu: str | None = None,
    ) -> str:
        """The name (`impl`) of the best implementation for ``sel`` in this run, so that a
        sentence naming the winner changes when the winner does."""
        f = load(op, gpu)
        rec = render.best_impl(f, sel, among, field, best)
        return inline(f, f"`{rec['impl']}`", {**sel, "impl": rec["impl"]})

    @env.macro
    def best_name(
        op: str,
        sel: dict,
        among: list[str] | None = None,
        field: str = "GBps",
        best: str = "max",
        gpu: str | None = None,
    ) -> str:
        """The bare ``impl`` string of best_of's winner, to pass to other macros (for instance
        the ncu excerpt of whichever rung the lab found fastest and profiled)."""
        return str(render.best_impl(load(op, gpu), sel, among, field, best)["impl"])

    @env.macro
    def duels_table(op: str, gpu: str | None = None) -> str:
        """Every close call of the run (minikernel.bench.duel): ours against the fastest peer
        in interleaved rounds, with the sign test's verdict."""
        f = load(op, gpu)
        return render.duels_table(f, lang(), href(op, f.slug), repo_url)

    @env.macro
    def duel(op: str, sel: dict, state: str | None = None, gpu: str | None = None) -> str:
        """The duel at the case ``sel`` in words ("`cuda:5` faster in 5 of 8 rounds, `quack` in
        3"), with provenance; fails the build when there is none, or when ``state`` (ahead,
        level, behind: what the sentence around it says) is not its verdict."""
        f = load(op, gpu)
        res = render.check_duel(f, sel, state)
        text = render.t(
            lang(),
            "duel_inline",
            a=res["a"],
            b=res["b"],
            wins=res["wins"],
            n=res["n"],
            losses=res["losses"],
        )
        return render.inline(
            f,
            text,
            lang(),
            href(op, f.slug),
            stale=render.duel_stale(f.op, res["record"]),
            repo_url=repo_url,
        )

    @env.macro
    def duel_cases(op: str, gpu: str | None = None) -> list[dict]:
        """Every duel of the run, in the order it ran, as plain values for a page's lists and
        conditions: ``shape``, ``dtype``, ``pass``, ``a`` (ours), ``b`` (the peer), ``state``
        (ahead, level, behind: the verdict), ``sign`` (the sign test's call alone), ``wins``,
        ``losses``, ``ratio`` and ``margin`` (minikernel.bench.duel.verdict)."""
        f = load(op, gpu)
        out = []
        for rec in f.data.get("duels", []):
            res = render.duel_result(f, rec)
            out.append(
                {
                    "shape": rec["shape"],
                    "dtype": rec["dtype"],
                    "pass": rec["pass"],
                    **{k: res[k] for k in ("a", "b", "state", "sign", "wins", "losses")},
                    **{k: res[k] for k in ("ratio", "margin")},
                }
            )
        return out

    @env.macro
    def duel_state(op: str, sel: dict, gpu: str | None = None) -> str:
        """The verdict of the duel at the case ``sel``: "ahead", "level" or "behind" (ours
        against the peer), or "none" when the run had no close call there, for a page's
        conditions (which sentence the results support)."""
        f = load(op, gpu)
        rec = render.duel_record(f, sel)
        return "none" if rec is None else render.duel_result(f, rec)["state"]

    @env.macro
    def expect(text: str, name: str, what: str, op: str | None = None) -> str:
        """Pass a rendered name through (from best_of or ncu_stall) if it is ``name``; else fail
        the build, because the sentence around it explains why it is ``name``."""
        if f"`{name}`" not in str(text):
            where = f" ({op})" if op else ""
            raise render.ClaimFailed(
                f"{what}{where} is no longer `{name}` in the results: rewrite the sentence that "
                "explains it"
            )
        return text

    @env.macro
    def launch_config(op: str, sel: dict, gpu: str | None = None, **claims: Any) -> str:
        """The launch config an autotuned Triton rung ran the record ``sel`` with (its
        ``config``), in words, with provenance: "2 warps, row read twice". Keyword arguments are
        what the page says about it (``RELOAD=True``): the build fails if the run chose
        otherwise, or if the record has no config."""
        f = load(op, gpu)
        rec = data.one(f, **sel)
        config = rec.get("config")
        if not config:
            raise data.MissingResult(
                f"{f.path.name}: the record {sel} has no launch config (the lab records one for "
                "autotuned Triton rungs only)"
            )
        for key, want in claims.items():
            if config.get(key) != want:
                raise render.ClaimFailed(
                    f"{op}: at {sel} the autotuner chose {key}={config.get(key)!r}, the page "
                    f"says {want!r}: rewrite the sentence"
                )
        return inline(f, render.fmt.launch_config(config, lang()), sel)

    @env.macro
    def ncu_stall(
        op: str,
        impl: str,
        rank: int = 1,
        shape: list | None = None,
        gpu: str | None = None,
        pass_: str | None = None,
    ) -> str:
        """The ``rank``-th largest stall reason in an ncu excerpt (e.g. `long_scoreboard`)."""
        f = load(op, gpu)
        stalls = render.ncu_record(f, impl, shape, pass_=pass_)["metrics"]["top_stalls"]
        if not 1 <= rank <= len(stalls):
            raise render.ClaimFailed(f"{op}: {impl}'s excerpt has {len(stalls)} stall reasons")
        return inline(f, f"`{stalls[rank - 1]['reason']}`")

    @env.macro
    def predict_us(op: str, nbytes: int, name: str = "copy_GBps", gpu: str | None = None) -> str:
        """The time ``nbytes`` take at the measured ceiling: a prediction, made before the
        kernel's own numbers are read."""
        f = load(op, gpu)
        us = nbytes / (f.data["ceilings"][name] * 1e9) * 1e6
        return inline(f, render.format_value("median_us", us, lang()))

    @env.macro
    def number(value: float, digits: int = 1) -> str:
        """A number a page computed from raw results (``ncu_metric(..., raw=True)``), written
        the page's language's way: "16.1" in English, "16,1" in Spanish."""
        return render.fmt.number(value, lang(), digits)

    @env.macro
    def ceiling(op: str, name: str = "copy_GBps", gpu: str | None = None) -> str:
        f = load(op, gpu)
        v = f.data["ceilings"][name]
        return inline(
            f, render.format_value("GBps" if name.endswith("GBps") else "TFLOPs", v, lang())
        )

    @env.macro
    def ncu(
        op: str,
        impl: str,
        shape: list | None = None,
        dtype: str | None = None,
        gpu: str | None = None,
        pass_: str | None = None,
    ) -> str:
        """The fixed-metric Nsight Compute excerpt recorded for ``impl`` (at ``shape``,
        ``dtype`` and ``pass_``, "fwd" or "bwd", where given: exactly one must match)."""
        f = load(op, gpu)
        return render.ncu_excerpt(
            f, impl, lang(), href(op, f.slug), shape, dtype, repo_url, pass_=pass_
        )

    @env.macro
    def ncu_metric(
        op: str,
        impl: str,
        metric: str,
        shape: list | None = None,
        gpu: str | None = None,
        raw: bool = False,
        pass_: str | None = None,
    ) -> Any:
        """One metric of an ncu excerpt (bytes, percentages), formatted; ``raw=True`` gives the
        number itself, for a page's guards (the formatted text carries a stale badge when the
        measured source has changed, so two texts can differ when the numbers do not).
        ``pass_`` ("fwd" or "bwd") picks between a forward and a backward excerpt of the same
        implementation and shape."""
        f = load(op, gpu)
        n = render.ncu_record(f, impl, shape, pass_=pass_)
        v = n["metrics"][metric]
        if raw:
            return v
        if metric.endswith("_pct"):
            text = render.fmt.percent(v / 100, lang())
        elif "bytes" in metric:
            text = render.fmt.bytes_(v, lang())
        else:
            text = render.format_value(metric, v, lang())
        return inline(f, text, {"impl": impl, "shape": n["shape"], "dtype": n["dtype"]})

    @env.macro
    def compile_times(op: str, gpu: str | None = None) -> str:
        f = load(op, gpu)
        return render.compile_times_table(f, lang(), href(op, f.slug), repo_url)

    @env.macro
    def provenance(op: str, gpu: str | None = None) -> str:
        f = load(op, gpu)
        return render.provenance(f, lang(), href(op, f.slug), repo_url)
