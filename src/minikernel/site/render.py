"""Renderers: pure functions from results (and a language) to Markdown / HTML / SVG text.

They know nothing of MkDocs; ``macros.py`` binds them to pages. Every output carries its
provenance (GPU, date, commit, versions, a link to the results file) and flags stale numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape
from typing import Any

from . import fmt, svgplot
from .data import HOST_BOUND_FRAC, ResultsFile, is_host_bound, is_stale, one, select


class ClaimFailed(AssertionError):
    """A comparison a page states no longer holds for the committed results."""


TEXT = {
    "en": {
        "measured": "Measured on {gpu} on {date}, commit {commit}{dirty}",
        "versions": "driver {driver}, CUDA {cuda}, PyTorch {torch}, Triton {triton}",
        "file": "results file",
        "dirty": " (uncommitted changes)",
        "stale": "stale",
        "stale_title": "The source of this kernel has changed since it was measured; "
        "run 'nox -s labs -- {op}' to measure it again.",
        "stale_note": "† stale: the kernel's source changed after this was measured.",
        "host_bound": "host-bound",
        "host_bound_title": "Issuing one call from the host took {host}, against {time} on the "
        "GPU: outside a CUDA graph, the host would set this call's pace.",
        "host_bound_note": "‡ host-bound: issuing one call from the host took at least "
        "{frac} of the GPU time shown. The time is the GPU's (each timed call waited behind a "
        "GPU-side lead), but outside a CUDA graph the host would set the pace of this call.",
        "other_gpu": "measured on {gpu}, not on the {slug} this page names",
        "size": "size",
        "shape": "shape",
        "ceiling": "{name} ceiling",
        "copy": "copy",
        "bf16_mm": "bf16 matmul",
        "roof": "roof: {copy} × I up to the {compute} rate, {ridge} FLOP/B at the ridge",
        "intensity": "arithmetic intensity I (FLOP per byte of DRAM traffic)",
        "elements": "elements",
        "missing": "—",
        "ncu_title": "Nsight Compute {version}, `{impl}`, {shape} {dtype}",
        "ncu_title_bwd": "Nsight Compute {version}, `{impl}` backward, {shape} {dtype}",
        "compile_file": "file",
        "nvrtc": "NVRTC, further kernels (in-process)",
        "nvrtc_cold": "NVRTC, first use (new process)",
        "nvcc": "nvcc -cubin (command line)",
        "load_inline": "torch.utils.cpp_extension.load_inline, first use",
        "way": "way to build",
        "time": "time",
        "case": "case",
        "ours": "ours",
        "peer": "peer",
        "rounds_won": "rounds ours was faster",
        "duel_ratio": "peer's time over ours (median of rounds)",
        "margin": "margin: either one's drift from its sweep time",
        "verdict": "verdict",
        "ahead": "ahead",
        "level": "level",
        "behind": "behind",
        "of": "{k} of {n}",
        "duel_inline": "`{a}` faster in {wins} of {n} rounds, `{b}` in {losses}",
    },
    "es": {
        "measured": "Medido en una {gpu} el {date}, commit {commit}{dirty}",
        "versions": "driver {driver}, CUDA {cuda}, PyTorch {torch}, Triton {triton}",
        "file": "fichero de resultados",
        "dirty": " (con cambios sin commitear)",
        "stale": "desactualizado",
        "stale_title": "El código de este kernel ha cambiado desde que se midió; "
        "ejecuta «nox -s labs -- {op}» para medirlo de nuevo.",
        "stale_note": "† desactualizado: el código del kernel cambió después de medirlo.",
        "host_bound": "limitado por el host",
        "host_bound_title": "Lanzar una llamada desde el host costó {host}, frente a {time} en "
        "la GPU: fuera de un CUDA graph, el host marcaría el ritmo de esta llamada.",
        "host_bound_note": "‡ limitado por el host: lanzar una llamada desde el host costó al "
        "menos el {frac} del tiempo de GPU que se muestra. El tiempo es el de la GPU (cada "
        "llamada medida esperó tras una espera previa en la GPU), pero fuera de un CUDA graph "
        "el host marcaría el ritmo de esta llamada.",
        "other_gpu": "medido en una {gpu}, no en la {slug} que nombra esta página",
        "size": "tamaño",
        "shape": "forma",
        "ceiling": "techo de {name}",
        "copy": "copia",
        "bf16_mm": "matmul bf16",
        "roof": "{copy} × I hasta el ritmo de {compute}; punto de cresta en {ridge} FLOP/B",
        "intensity": "intensidad aritmética I (FLOP por byte de tráfico de DRAM)",
        "elements": "elementos",
        "missing": "—",
        "ncu_title": "Nsight Compute {version}, `{impl}`, {shape} {dtype}",
        "ncu_title_bwd": "Nsight Compute {version}, backward de `{impl}`, {shape} {dtype}",
        "compile_file": "fichero",
        "nvrtc": "NVRTC, kernels siguientes (en el mismo proceso)",
        "nvrtc_cold": "NVRTC, primer uso (proceso nuevo)",
        "nvcc": "nvcc -cubin (línea de comandos)",
        "load_inline": "torch.utils.cpp_extension.load_inline, primer uso",
        "way": "forma de compilar",
        "time": "tiempo",
        "case": "caso",
        "ours": "nuestro",
        "peer": "rival",
        "rounds_won": "rondas en que el nuestro fue más rápido",
        "duel_ratio": "tiempo del rival entre el nuestro (mediana de las rondas)",
        "margin": "margen: lo que se movió cualquiera de los dos respecto a su tiempo del barrido",
        "verdict": "veredicto",
        "ahead": "por delante",
        "level": "empate",
        "behind": "por detrás",
        "of": "{k} de {n}",
        "duel_inline": "`{a}` más rápido en {wins} de {n} rondas, `{b}` en {losses}",
    },
}

IMPL_LABELS = {
    "torch:eager": "PyTorch eager",
    "torch:compile": "torch.compile",
    "liger": "Liger-Kernel",
    "quack": "QuACK",
    "cublas": "cuBLAS",
    "cudnn": "cuDNN",
}


def t(lang: str, key: str, **kw: Any) -> str:
    return TEXT[lang][key].format(**kw)


def impl_label(impl: str) -> str:
    if impl in IMPL_LABELS:
        return IMPL_LABELS[impl]
    family, _, rung = impl.partition(":")
    if family == "cuda":
        return f"CUDA C {rung}"
    if family == "triton":
        return f"Triton {rung}"
    if family == "sdpa":
        return f"SDPA {rung}"
    return impl


def is_peer(impl: str) -> bool:
    return not impl.startswith(("cuda:", "triton:"))


# --- provenance ------------------------------------------------------------------------------


def commit_url(repo_url: str, commit: str) -> str | None:
    """``<repo_url>/commit/<sha>``, or None when the site names no repository (``extra.repo_url``
    is empty) or the commit is not a hexadecimal SHA."""
    if not repo_url or not re.fullmatch(r"[0-9a-f]{7,40}", commit or ""):
        return None
    return f"{repo_url.rstrip('/')}/commit/{commit}"


def commit_html(env: dict[str, Any], repo_url: str = "") -> str:
    code = f"<code>{escape(env['commit'])}</code>"
    url = commit_url(repo_url, env["commit"])
    return f'<a class="mk-commit" href="{escape(url)}">{code}</a>' if url else code


def other_gpu_warning(f: ResultsFile, lang: str) -> str:
    """A flag when the file a page reads was measured on another GPU than the one it names."""
    if not f.measured_on_other_gpu:
        return ""
    return (
        f' <span class="mk-stale" data-flag="other-gpu">'
        f"{escape(t(lang, 'other_gpu', gpu=f.env['gpu'], slug=f.slug))}</span>"
    )


def provenance(f: ResultsFile, lang: str, href: str, repo_url: str = "") -> str:
    """One line of HTML: GPU, date, commit (linked when ``repo_url`` is set), versions, and a
    link to the results file."""
    env = f.env
    text = t(
        lang,
        "measured",
        gpu=escape(env["gpu"]),
        date=env["date"][:10],
        commit=commit_html(env, repo_url),
        dirty=t(lang, "dirty") if env.get("dirty") else "",
    )
    versions = t(
        lang,
        "versions",
        **{k: escape(str(env.get(k, "?"))) for k in ("driver", "cuda", "torch", "triton")},
    )
    return (
        f'<p class="mk-provenance">{text} ({versions}). '
        f'<a href="{escape(href)}">{t(lang, "file")}: {escape(f.slug)}/{escape(f.path.name)}</a>'
        f"{other_gpu_warning(f, lang)}</p>"
    )


def host_bound_badge(rec: dict[str, Any], lang: str) -> str:
    title = t(
        lang,
        "host_bound_title",
        host=fmt.duration_us(rec["host_us"], lang),
        time=fmt.duration_us(rec["median_us"], lang),
    )
    return f'<span class="mk-hostbound" title="{escape(title)}">{t(lang, "host_bound")}</span>'


def host_bound_note(lang: str) -> str:
    frac = fmt.percent(HOST_BOUND_FRAC, lang, 0)
    return f'<p class="mk-hostbound-note">{t(lang, "host_bound_note", frac=frac)}</p>\n'


def stale_badge(op: str, lang: str) -> str:
    return (
        f'<span class="mk-stale" title="{escape(t(lang, "stale_title", op=op))}">'
        f"{t(lang, 'stale')}</span>"
    )


# --- values ----------------------------------------------------------------------------------

FIELDS = {
    "GBps": lambda v, lang: fmt.bandwidth(v, lang),
    "TFLOPs": lambda v, lang: fmt.tflops(v, lang),
    "median_us": lambda v, lang: fmt.duration_us(v, lang),
    "p20_us": lambda v, lang: fmt.duration_us(v, lang),
    "p80_us": lambda v, lang: fmt.duration_us(v, lang),
    "duration_ns": lambda v, lang: fmt.duration_us(v / 1000, lang),  # an ncu excerpt's
    "frac_of_ceiling": lambda v, lang: fmt.percent(v, lang),
    "max_rel_err": lambda v, lang: fmt.number(v, lang, 2) if v >= 0.01 else f"{v:.1e}",
    "bytes": lambda v, lang: fmt.bytes_(v, lang),
    "peak_mem_bytes": lambda v, lang: fmt.bytes_(v, lang),
    "added_mem_bytes": lambda v, lang: fmt.bytes_(v, lang),
    "sm_mhz": lambda v, lang: f"{fmt.integer(int(v), lang)} MHz",
    "power_w": lambda v, lang: f"{fmt.integer(round(v), lang)} W",
    "loop_power_w": lambda v, lang: f"{fmt.integer(round(v), lang)} W",
    "loop_us": lambda v, lang: fmt.duration_us(v, lang),
    "energy_mJ": lambda v, lang: f"{fmt.sig(v, lang)}{fmt.THIN_NBSP}mJ",
    "power_limit_w": lambda v, lang: f"{fmt.integer(round(v), lang)} W",  # env's
    "loop_sm_mhz": lambda v, lang: f"{fmt.integer(int(v), lang)} MHz",
    "loop_capped_frac": lambda v, lang: fmt.percent(v, lang, 0),
    # ncu counts that the CSV hands over as floats: whole numbers on a page
    "registers_per_thread": lambda v, lang: fmt.integer(round(v), lang),
    "block_size": lambda v, lang: fmt.integer(round(v), lang),
    "grid_size": lambda v, lang: fmt.integer(round(v), lang),
}


def format_value(field: str, value: Any, lang: str) -> str:
    if value is None:
        return TEXT[lang]["missing"]
    f = FIELDS.get(field)
    if f is not None:
        return f(value, lang)
    if isinstance(value, float):
        return fmt.sig(value, lang)
    if isinstance(value, int):
        return fmt.integer(value, lang)
    return escape(str(value))


def inline(
    f: ResultsFile,
    value_html: str,
    lang: str,
    href: str,
    *,
    stale: bool = False,
    host_bound: dict[str, Any] | None = None,
    repo_url: str = "",
) -> str:
    """A number in running text with its provenance as a superscript: GPU and date linking to
    the results file, the commit (linked when ``repo_url`` is set; in the tooltip always), a
    stale badge when ``stale``, a host-bound badge when ``host_bound`` (the record) is, and a
    flag when the file was measured on another GPU."""
    env = f.env
    title = (
        f"{env['gpu']} · {env['date'][:10]} · commit {env['commit']} · "
        f"PyTorch {env['torch']} · Triton {env['triton']}"
    )
    url = commit_url(repo_url, env["commit"])
    commit = (
        f', <a class="mk-commit" href="{escape(url)}">{escape(env["commit"])}</a>' if url else ""
    )
    badge = f" {stale_badge(f.op, lang)}" if stale else ""
    if host_bound is not None and is_host_bound(host_bound):
        badge += f" {host_bound_badge(host_bound, lang)}"
    return (
        f'<span class="mk-figure">{value_html}<sup class="mk-prov"><a href="{escape(href)}" '
        f'title="{escape(title)}">{escape(env["gpu"].replace("NVIDIA ", ""))}, '
        f"{env['date'][:10]}</a>{commit}</sup>{badge}{other_gpu_warning(f, lang)}</span>"
    )


def any_stale(f: ResultsFile, *sels: dict[str, Any]) -> bool:
    """Whether any record matching one of ``sels`` measured a source that has changed since."""
    return any(is_stale(f.op, r) for sel in sels for r in select(f, **sel))


def figure(
    f: ResultsFile, sel: dict[str, Any], field: str, lang: str, href: str, repo_url: str = ""
) -> str:
    """One measured value, inline, with a superscript link to its provenance."""
    rec = one(f, **sel)
    value = format_value(field, rec.get(field), lang)
    return inline(
        f, value, lang, href, stale=is_stale(f.op, rec), host_bound=rec, repo_url=repo_url
    )


def ratio_value(
    f: ResultsFile,
    num: dict[str, Any],
    den: dict[str, Any],
    field: str,
    at_most: float | None = None,
    at_least: float | None = None,
) -> float:
    """num[field] / den[field]; raises ClaimFailed when it is outside the bounds a page gives
    (``at_most`` for "a quarter of torch's memory or less", ``at_least`` for its converse)."""
    a, b = one(f, **num).get(field), one(f, **den).get(field)
    if a is None or b is None or b == 0:
        raise ClaimFailed(f"{f.path.name}: cannot divide {field} of {num} by {den}")
    r = a / b
    for bound, ok, word in (
        (at_most, lambda: r <= at_most, "at most"),
        (at_least, lambda: r >= at_least, "at least"),
    ):
        if bound is not None and not ok():
            raise ClaimFailed(
                f"{f.path.name}: a page claims {field} of {num} is {word} {bound} times that of "
                f"{den}, but the results give {r:.3f}"
            )
    return r


def speedup(f: ResultsFile, fast: dict[str, Any], slow: dict[str, Any], at_least: float) -> float:
    """time(slow) / time(fast); raises ClaimFailed when it is below ``at_least``."""
    r = ratio_value(f, slow, fast, "median_us")
    if r < at_least:
        raise ClaimFailed(
            f"{f.path.name}: a page claims {fast} is at least {at_least}x as fast as {slow}, "
            f"but the results give {r:.3f}x"
        )
    return r


def check_at_least(f: ResultsFile, sel: dict[str, Any], field: str, threshold: float) -> Any:
    """The record's ``field``; raises ClaimFailed when it is missing or below ``threshold``."""
    v = one(f, **sel).get(field)
    if v is None or v < threshold:
        raise ClaimFailed(
            f"{f.path.name}: a page claims {field} >= {threshold} for {sel}; the results give {v}"
        )
    return v


def check_at_most(f: ResultsFile, sel: dict[str, Any], field: str, threshold: float) -> Any:
    """The record's ``field``; raises ClaimFailed when it is missing or above ``threshold``.
    For statements like "the target of 93 % is not met here": they must fail too when a new
    run meets it, so that the page is rewritten."""
    v = one(f, **sel).get(field)
    if v is None or v > threshold:
        raise ClaimFailed(
            f"{f.path.name}: a page claims {field} <= {threshold} for {sel}; the results give {v}"
        )
    return v


def best_impl(
    f: ResultsFile, sel: dict[str, Any], among: list[str] | None, field: str, best: str
) -> dict[str, Any]:
    """The record that is best in ``field`` among the implementations ``among`` (or all)."""
    recs = [r for r in select(f, **sel) if among is None or r["impl"] in among]
    recs = [r for r in recs if r.get(field) is not None]
    if not recs:
        raise ClaimFailed(f"{f.path.name}: no records with {field} for {sel} among {among}")
    return (max if best == "max" else min)(recs, key=lambda r: r[field])


def ncu_matches(n: dict, impl: str, shape=None, dtype=None, pass_=None) -> bool:
    """Whether ncu excerpt ``n`` is ``impl``'s, at ``shape`` / ``dtype`` / ``pass_`` where
    given (``"fwd"`` matches the forward excerpts, which carry no pass, ``"bwd"`` the backward
    ones): a lab may profile one implementation at one shape both ways."""
    return (
        n["impl"] == impl
        and (shape is None or list(n["shape"]) == list(shape))
        and (dtype is None or n["dtype"] == dtype)
        and (pass_ is None or (n.get("pass") or "fwd") == pass_)
    )


def ncu_record(
    f: ResultsFile,
    impl: str,
    shape: list | None = None,
    dtype: str | None = None,
    pass_: str | None = None,
) -> dict[str, Any]:
    """The one ncu excerpt of ``impl`` that matches (see ncu_matches); a page's claim fails
    when none or several do."""
    found = [n for n in f.data.get("ncu", []) if ncu_matches(n, impl, shape, dtype, pass_)]
    if len(found) != 1:
        raise ClaimFailed(f"{f.path.name}: expected one ncu excerpt for {impl}, found {len(found)}")
    return found[0]


def top_level_value(f: ResultsFile, path: str) -> Any:
    """A value from the results file outside the records, by dotted path (``e1.saved_bytes``)."""
    node: Any = f.data
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ClaimFailed(f"{f.path.name}: no value at {path!r}")
    return node


# --- tables ----------------------------------------------------------------------------------


def _shape_key(rec: dict[str, Any]) -> tuple:
    return tuple(rec["shape"])


def pivot_table(
    f: ResultsFile,
    *,
    field: str,
    lang: str,
    href: str,
    impls: Iterable[str] | None = None,
    dtype: str | None = None,
    pass_: str | None = None,
    shapes: Iterable[list] | None = None,
    best: str | None = "max",
    extra: dict[str, Any] | None = None,
    repo_url: str = "",
) -> str:
    """Rows: shapes; columns: implementations; cells: ``field``. The best cell of each row is
    bold (``best='max'`` or ``'min'``); stale cells carry a dagger."""
    recs = select(f, dtype=dtype, pass_=pass_, **(extra or {}))
    if not recs:
        raise ClaimFailed(f"{f.path.name}: no records for dtype={dtype} pass={pass_} {extra}")
    impl_list = list(impls) if impls else list(dict.fromkeys(r["impl"] for r in recs))
    shape_list = (
        [tuple(s) for s in shapes]
        if shapes
        else sorted(
            dict.fromkeys(_shape_key(r) for r in recs), key=lambda s: [str(x).zfill(12) for x in s]
        )
    )
    by: dict[tuple, dict[str, Any]] = {}
    for r in recs:
        key = (_shape_key(r), r["impl"])
        if key in by:
            raise ClaimFailed(
                f"{f.path.name}: two records for {key[1]} at {list(key[0])} ({dtype}, {pass_}); "
                "narrow the selection with where={...} (a field a record lacks matches 'none')"
            )
        by[key] = r
    missing = [i for i in impl_list if not any(k[1] == i for k in by)]
    if missing:
        raise ClaimFailed(f"{f.path.name}: no records for impl(s) {missing} (dtype={dtype})")
    header = [t(lang, "shape")] + [f"`{i}`<br>{escape(impl_label(i))}" for i in impl_list]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "--:|" * len(impl_list)]
    any_stale = any_host = False
    for s in shape_list:
        row_recs = [by.get((s, i)) for i in impl_list]
        values = [r.get(field) if r else None for r in row_recs]
        present = [v for v in values if v is not None]
        winner = (max if best == "max" else min)(present) if (best and present) else None
        cells = [
            _cell(f, r, field, v, v is not None and v == winner and len(present) > 1, lang)
            for r, v in zip(row_recs, values, strict=True)
        ]
        any_stale = any_stale or any(" †" in c for c in cells)
        any_host = any_host or any(c.endswith(" ‡") for c in cells)
        lines.append(f"| {fmt.shape(list(s), lang)} | " + " | ".join(cells) + " |")
    out = "\n".join(lines) + "\n\n"
    if any_stale:
        out += f'<p class="mk-stale-note">{t(lang, "stale_note")}</p>\n'
    if any_host:
        out += host_bound_note(lang)
    return out + provenance(f, lang, href, repo_url) + "\n"


def _cell(
    f: ResultsFile, r: dict[str, Any] | None, field: str, v: Any, best: bool, lang: str
) -> str:
    """One table cell: the value, in bold when it is the row's best, with a dagger when the
    record is stale (its kernel's source changed since it was measured)."""
    text = format_value(field, v, lang)
    if best:
        text = f"**{text}**"
    if r is not None and is_stale(f.op, r):
        text += " †"
    if r is not None and is_host_bound(r):
        text += " ‡"
    return text


def grid_table(
    f: ResultsFile,
    *,
    rows: str,
    cols: str,
    field: str,
    lang: str,
    href: str,
    where: dict[str, Any] | None = None,
    best: str | None = "max",
    repo_url: str = "",
) -> str:
    """Two record fields as the axes (e.g. block_size down, num_warps across), ``field`` in
    the cells; the best cell of the whole grid in bold."""
    recs = [r for r in select(f, **(where or {})) if rows in r and cols in r]
    if not recs:
        raise ClaimFailed(f"{f.path.name}: no records with fields {rows!r} and {cols!r} {where}")
    row_vals = sorted(dict.fromkeys(r[rows] for r in recs))
    col_vals = sorted(dict.fromkeys(r[cols] for r in recs))
    by: dict[tuple, dict[str, Any]] = {}
    for r in recs:
        if (r[rows], r[cols]) in by:
            raise ClaimFailed(
                f"{f.path.name}: two records at {rows}={r[rows]}, {cols}={r[cols]}; "
                "narrow the selection with where={...}"
            )
        by[(r[rows], r[cols])] = r
    present = [r[field] for r in recs if r.get(field) is not None]
    winner = (max if best == "max" else min)(present) if (best and present) else None
    lines = [
        f"| {escape(rows)} ↓ {escape(cols)} → | " + " | ".join(str(c) for c in col_vals) + " |",
        "|---|" + "--:|" * len(col_vals),
    ]
    any_stale = any_host = False
    for rv in row_vals:
        cells = []
        for cv in col_vals:
            r = by.get((rv, cv))
            v = r.get(field) if r else None
            cells.append(_cell(f, r, field, v, v is not None and v == winner, lang))
        any_stale = any_stale or any(" †" in c for c in cells)
        any_host = any_host or any(c.endswith(" ‡") for c in cells)
        lines.append(f"| {rv} | " + " | ".join(cells) + " |")
    out = "\n".join(lines) + "\n\n"
    if any_stale:
        out += f'<p class="mk-stale-note">{t(lang, "stale_note")}</p>\n'
    if any_host:
        out += host_bound_note(lang)
    return out + provenance(f, lang, href, repo_url) + "\n"


def compile_times_table(f: ResultsFile, lang: str, href: str, repo_url: str = "") -> str:
    """How long each way of building the op's CUDA C took; stale when a CUDA C rung changed."""
    ct = f.data.get("compile_times")
    if not ct:
        raise ClaimFailed(f"{f.path.name}: no compile_times block")
    rows = [
        ("nvrtc_cold_s", "nvrtc_cold"),
        ("nvrtc_s", "nvrtc"),
        ("nvcc_s", "nvcc"),
        ("load_inline_s", "load_inline"),
    ]
    lines = [f"| {t(lang, 'way')} | {t(lang, 'time')} |", "|---|--:|"]
    for key, label in rows:
        if key not in ct or ct[key] is None:
            continue
        v = ct[key]
        cell = fmt.seconds(v, lang) if isinstance(v, int | float) else escape(str(v))
        lines.append(f"| {t(lang, label)} | {cell} |")
    note = f"`{escape(ct['file'])}`, `{escape(ct['arch'])}`"
    if any(is_stale(f.op, r) for r in f.data["records"] if r["impl"].startswith("cuda:")):
        note += f" {stale_badge(f.op, lang)}"
    return "\n".join(lines) + f"\n\n{note}\n\n" + provenance(f, lang, href, repo_url) + "\n"


# --- duels ------------------------------------------------------------------------------------


def duels(f: ResultsFile, **sel: Any) -> list[dict[str, Any]]:
    """The duels (minikernel.bench.duel) of ``f`` matching ``sel`` (shape, dtype, pass...)."""
    from .data import _matches

    if "pass_" in sel:
        sel["pass"] = sel.pop("pass_")
    return [d for d in f.data.get("duels", []) if _matches(d, sel)]


def duel_record(f: ResultsFile, sel: dict[str, Any]) -> dict[str, Any] | None:
    """The one duel at the case ``sel`` (its shape, dtype and pass: ``impl`` and the fields
    that sort a sweep's records are ignored), None when the run had none there; raises
    ClaimFailed if it had two."""
    keys = ("shape", "dtype", "pass", "pass_")  # a record's other fields (its sweep) aside
    found = duels(f, **{k: v for k, v in sel.items() if k in keys})
    if len(found) > 1:
        raise ClaimFailed(f"{f.path.name}: {len(found)} duels at {sel}")
    return found[0] if found else None


def duel_result(f: ResultsFile, rec: dict[str, Any]) -> dict[str, Any]:
    """The verdict of a duel (minikernel.bench.duel.duel_verdict), ours (``impls[0]``) against
    the peer, its margin from the same run's sweep records."""
    from minikernel.bench.duel import duel_verdict

    return duel_verdict(rec, f.data["records"])


def duel_stale(op: str, rec: dict[str, Any]) -> bool:
    """Whether either side of a duel measured a source that has changed since."""
    return any(
        is_stale(op, {"impl": impl, "source_hash": h}) for impl, h in rec["source_hash"].items()
    )


def check_duel(f: ResultsFile, sel: dict[str, Any], state: str | None) -> dict[str, Any]:
    """The duel at ``sel`` and its result; raises ClaimFailed when there is none, or when a
    page states its verdict (``state``: ahead, level or behind) and the results say otherwise."""
    rec = duel_record(f, sel)
    if rec is None:
        raise ClaimFailed(f"{f.path.name}: no duel at {sel}: the run found no close call there")
    res = duel_result(f, rec)
    if state is not None and res["state"] != state:
        raise ClaimFailed(
            f"{f.path.name}: a page says `{res['a']}` is {state} of `{res['b']}` in the duel at "
            f"{sel}, but the results say {res['state']} ({res['wins']} rounds won, "
            f"{res['losses']} lost of {res['n']}; median ratio {res['ratio']:.4f} against a margin "
            f"of {res['margin']:.4f}): rewrite the sentence"
        )
    return {**res, "record": rec}


def duels_table(f: ResultsFile, lang: str, href: str, repo_url: str = "") -> str:
    """Every duel of the run, in the order it ran: the case, ours and the peer, the rounds ours
    won, the median of the peer's time over ours, and the sign test's verdict."""
    recs = f.data.get("duels", [])
    if not recs:
        raise ClaimFailed(f"{f.path.name}: no duels in this run")
    head = ["case", "ours", "peer", "rounds_won", "duel_ratio", "margin", "verdict"]
    lines = [
        "| " + " | ".join(t(lang, h) for h in head) + " |",
        "|---|---|---|--:|--:|--:|---|",
    ]
    stale = False
    for rec in recs:
        res = duel_result(f, rec)
        mark = " †" if duel_stale(f.op, rec) else ""
        stale = stale or bool(mark)
        case = f"{fmt.shape(rec['shape'], lang)} {rec['dtype']}" + (
            f" {rec['pass']}" if rec["pass"] != "fwd" else ""
        )
        lines.append(
            f"| {case} | `{res['a']}` | `{res['b']}` | "
            f"{t(lang, 'of', k=res['wins'], n=res['n'])} | {fmt.number(res['ratio'], lang, 3)}× | "
            f"{fmt.percent(res['margin'], lang, 2)} | {t(lang, res['state'])}{mark} |"
        )
    out = "\n".join(lines) + "\n\n"
    if stale:
        out += f'<p class="mk-stale-note">{t(lang, "stale_note")}</p>\n'
    return out + provenance(f, lang, href, repo_url) + "\n"


# --- plots -----------------------------------------------------------------------------------


def line_plot(
    f: ResultsFile,
    *,
    lang: str,
    href: str,
    title: str,
    x_label: str,
    field: str = "GBps",
    x: str = "n",
    impls: Iterable[str] | None = None,
    dtype: str | None = None,
    pass_: str | None = None,
    ceiling: str | None = "copy_GBps",
    extra: dict[str, Any] | None = None,
    log_y: bool = False,
    repo_url: str = "",
) -> str:
    """``field`` against one shape dimension (``x``: index into shape, or 'n' for shape[0])."""
    recs = select(f, dtype=dtype, pass_=pass_, **(extra or {}))
    axis = 0 if x == "n" else int(x)
    impl_list = list(impls) if impls else list(dict.fromkeys(r["impl"] for r in recs))
    scale = 1e-3 if field == "GBps" else 1.0  # plot TB/s
    series = []
    for impl in impl_list:
        pts = [
            (float(r["shape"][axis]), r[field] * scale)
            for r in recs
            if r["impl"] == impl and r.get(field) is not None
        ]
        if not pts:
            raise ClaimFailed(f"{f.path.name}: nothing to plot for {impl} ({dtype}, {field})")
        stale = any(is_stale(f.op, r) for r in recs if r["impl"] == impl)
        label = impl_label(impl) + (f" ({t(lang, 'stale')})" if stale else "")
        series.append(svgplot.Series(label, pts, peer=is_peer(impl)))
    hlines = []
    if ceiling:
        name = t(lang, "copy") if ceiling.startswith("copy") else t(lang, "bf16_mm")
        value = f.data["ceilings"][ceiling] * (scale if ceiling.endswith("GBps") else 1)
        shown = format_value(
            "GBps" if ceiling.endswith("GBps") else "TFLOPs", f.data["ceilings"][ceiling], lang
        )
        hlines.append(svgplot.HLine(f"{t(lang, 'ceiling', name=name)}: {shown}", value))
    y_label = {"GBps": "TB/s", "TFLOPs": "TFLOP/s", "median_us": "µs"}.get(field, field)
    svg = svgplot.render(svgplot.Plot(title, x_label, y_label, series, hlines, log_y=log_y), lang)
    return (
        f'<figure class="mk-figure-plot">{svg}<figcaption>{escape(title)}. '
        f"{provenance(f, lang, href, repo_url)}</figcaption></figure>\n"
    )


def roofline_plot(
    f: ResultsFile,
    *,
    lang: str,
    href: str,
    title: str,
    impls: Iterable[str],
    cases: Iterable[tuple[dict[str, Any], float]],
    compute: str = "bf16_mm_TFLOPs",
    repo_url: str = "",
) -> str:
    """A roofline: the attainable rate min(P, B x I) against the arithmetic intensity I on log
    axes, from the run's own ceilings (B the copy ceiling, P the ``compute`` one), and a point
    per implementation and case. ``cases`` pairs a record selector with the intensity the op's
    FLOP and byte models give it (FLOP per byte); a point's rate is its measured GB/s times that
    intensity, so it sits under the slanted roof by exactly its fraction of the copy ceiling."""
    cases = list(cases)
    if not cases:
        raise ClaimFailed(f"{f.path.name}: a roofline needs at least one case")
    bw = f.data["ceilings"]["copy_GBps"] / 1000  # TB/s: TB/s x FLOP/B = TFLOP/s
    peak = f.data["ceilings"][compute]
    ridge = peak / bw
    series = []
    for impl in impls:
        pts = []
        stale = False
        for sel, intensity in cases:
            rec = one(f, **dict(sel, impl=impl))
            pts.append((float(intensity), rec["GBps"] / 1000 * intensity))
            stale = stale or is_stale(f.op, rec)
        label = impl_label(impl) + (f" ({t(lang, 'stale')})" if stale else "")
        series.append(svgplot.Series(label, pts, peer=is_peer(impl)))
    lo = min(i for _, i in cases) / 4
    hi = max(ridge * 4, max(i for _, i in cases) * 4)
    name = t(lang, "bf16_mm") if compute.startswith("bf16_mm") else compute
    roof_label = t(
        lang,
        "roof",
        copy=t(lang, "ceiling", name=t(lang, "copy")),
        compute=name,
        ridge=fmt.number(ridge, lang, 0),
    )
    roof = svgplot.Series(
        roof_label, [(lo, bw * lo), (ridge, peak), (hi, peak)], color="currentColor", markers=False
    )
    plot = svgplot.Plot(
        title,
        t(lang, "intensity"),
        "TFLOP/s",
        [roof, *series],
        log_y=True,
        x_tick_format="plain",
    )
    return (
        f'<figure class="mk-figure-plot">{svgplot.render(plot, lang)}<figcaption>'
        f"{escape(title)}. {provenance(f, lang, href, repo_url)}</figcaption></figure>\n"
    )


# --- ncu -------------------------------------------------------------------------------------


def ncu_excerpt(
    f: ResultsFile,
    impl: str,
    lang: str,
    href: str,
    shape=None,
    dtype=None,
    repo_url: str = "",
    pass_=None,
) -> str:
    """The fixed-metric Nsight Compute excerpt of one kernel; stale when the record it was taken
    with (same impl, shape and dtype) measured a source that has changed since."""
    n = ncu_record(f, impl, shape, dtype, pass_)
    title = t(
        lang,
        "ncu_title_bwd" if n.get("pass") == "bwd" else "ncu_title",
        version=n["ncu_version"],
        impl=impl,
        shape=fmt.shape(n["shape"], lang),
        dtype=n["dtype"],
    )
    if any_stale(f, {"impl": impl, "shape": n["shape"], "dtype": n["dtype"]}):
        title += f" {stale_badge(f.op, lang)}"
    body = n["excerpt"]
    return f"{title}\n\n```text\n{body}\n```\n\n{provenance(f, lang, href, repo_url)}\n"
