"""The probe helpers (minikernel.bench.probe) the side-probe scripts of labs/ share: the best of
interleaved rounds, a peer that refuses, the printed table. No GPU: the timer is a stand-in.
The tests that compile a probe's kernels (a minute of NVRTC each) are in test_probe_*_kernels.py,
two files that pytest-xdist can run side by side."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from probe_loader import load_probe

from minikernel.bench.probe import add_peer, race, report


def test_race_keeps_each_candidates_best_over_interleaved_rounds() -> None:
    order: list[str] = []
    times = {"a": itertools.cycle([5.0, 3.0, 4.0]), "b": itertools.cycle([2.0, 6.0, 7.0])}
    cands = {name: (lambda name=name: name) for name in times}

    def timer(fn):  # type: ignore[no-untyped-def]
        name = fn()
        order.append(name)
        return next(times[name])

    assert race(cands, 3, timer) == {"a": 3.0, "b": 2.0}
    assert order == ["a", "b"] * 3  # every candidate once per round, in the same order
    with pytest.raises(ValueError, match="at least 1"):
        race(cands, 0, timer)


def test_add_peer_calls_once_and_skips_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    cands: dict = {}
    add_peer(cands, "ok", lambda: lambda: calls.append(1))
    assert list(cands) == ["ok"] and calls == [1]

    def refuses() -> None:
        raise ValueError("rows over 65536")

    add_peer(cands, "liger", lambda: refuses)
    assert list(cands) == ["ok"]
    assert "liger: ValueError: rows over 65536" in capsys.readouterr().out


def test_admit_adds_only_a_candidate_whose_output_passes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """admit runs a candidate once and adds it only if its output is within the tolerance of
    the reference: not a wrong one, not one with NaN where it wrote nothing (the check call's
    output), not one whose launch fails."""
    import torch

    from minikernel.bench.probe import admit

    ref = torch.ones(4)
    cands: dict = {}
    admit(cands, "close", lambda: ref + 1e-4, ref, 1e-3, "32 registers")
    admit(cands, "off", lambda: ref + 1.0, ref, 1e-3)
    admit(cands, "gap", lambda: ref, ref, 1e-3, check=lambda: torch.tensor([1.0, float("nan")] * 2))
    admit(cands, "fails", lambda: 1 / 0, ref, 1e-3)
    assert list(cands) == ["close"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("  close: 32 registers, max diff") and out[0].endswith(" ok")
    assert out[1].endswith("WRONG") and out[2].endswith("WRONG")
    assert out[3] == "  fails: ZeroDivisionError: division by zero"


def test_report_sorts_fastest_first_with_the_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    report("32768 x 1024 bfloat16", 50.0, {"slow": 100.0, "fast": 62.5})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "32768 x 1024 bfloat16: the model at the ceiling 50.0 us"
    assert lines[1].split() == ["fast", "62.5", "us", "0.800", "of", "the", "ceiling"]
    assert lines[2].split()[0] == "slow" and lines[2].split()[3] == "0.500"


def test_with_load_hint_swaps_only_the_named_loads() -> None:
    from minikernel.bench.probe import LOAD_HINTS, with_load_hint

    src = '#include "common.cuh"\n    a = load_vec_plain(x + i);\n    b = load_vec_plain(y + i);\n'
    out = with_load_hint(src, "cg", ["    a = load_vec_plain(x + i);\n"])
    assert "a = load_vec_probe(x + i);" in out and "b = load_vec_plain(y + i);" in out
    assert LOAD_HINTS["cg"] in out and out.index("load_vec_probe(const T* p)") < out.index("a =")
    with pytest.raises(ValueError, match="not one line"):
        with_load_hint(src, "na", ["    c = load_vec_plain(z + i);\n"])  # not in the source
    with pytest.raises(ValueError, match=r"common\.cuh"):
        with_load_hint(src.replace("common", "other"), "na", [])


def test_softmax_loads_probe_still_applies() -> None:
    """labs/probe_softmax_loads.py edits two load lines of softmax.cu; they must still be there
    once each, or the probe would stop with 'softmax.cu changed'."""
    from minikernel.bench.probe import LOAD_HINTS
    from minikernel.kernels.softmax.cuda_kernels import CU_FILE

    probe = load_probe("probe_softmax_loads")
    src = CU_FILE.read_text()
    out = probe.variants(src)
    assert set(out) == {"shipped", *LOAD_HINTS} and out["shipped"] == src
    for hint in LOAD_HINTS:
        assert out[hint].count("load_vec_probe(") == 1 + len(probe.LOADS)  # definition + calls
    with pytest.raises(SystemExit, match=r"softmax\.cu changed"):
        probe.variants(src.replace(probe.LOADS[1], ""))


def test_probe_softmax_stores_edits_rung_14_only() -> None:
    """labs/probe_softmax_stores.py swaps rung 14's .cs store for rung 16's plain one; the line
    must still be in softmax.cu once, and the copy must leave every other store as it is."""
    from minikernel.kernels.softmax.cuda_kernels import CU_FILE

    probe = load_probe("probe_softmax_stores")
    src = CU_FILE.read_text()
    out = probe.variants(src)
    assert set(out) == {"shipped", "wb", "wb_mf"} and out["shipped"] == src
    for name in ("wb", "wb_mf"):
        assert out[name].count("__stwb(") == src.count("__stwb(") + 1
        assert out[name].count("store_vec(") == src.count("store_vec(") - 1
    # wb_mf: the exchange of softmax14_slice is max first for rung 14 too; nothing else moves
    assert probe.EXCHANGE in out["wb"] and probe.EXCHANGE not in out["wb_mf"]
    assert out["wb_mf"].count("cluster_ms_maxfirst(xch, {m, sum})") == 1
    assert " : cluster_ms(xch, {m, sum})" not in out["wb_mf"]
    for line in (probe.CS_STORE, probe.EXCHANGE):
        with pytest.raises(SystemExit, match=r"softmax\.cu changed"):
            probe.variants(src.replace(line, ""))


def test_probe_rmsnorm_forward_weights_stamps_every_planned_shape() -> None:
    """labs/probe_rmsnorm_forward_weights.py appends its two kernels to rmsnorm.cu, stamped for
    every (threads, cluster) rung 5 plans at the probe's shapes, and stops if rmsnorm.cu no
    longer has what they use."""
    import torch

    from minikernel.kernels.rmsnorm import CU_FILE, plan5

    probe = load_probe("probe_rmsnorm_forward_weights")
    src = CU_FILE.read_text()
    text = probe.with_probe_kernels(src)
    assert text.startswith(src) and text.endswith("#endif\n")
    for m, n, dtype_name in probe.SHAPES:
        dtype = getattr(torch, dtype_name)
        sp = plan5(m, n, dtype, (9, 0), True)
        assert sp is not None, (m, n, dtype_name)
        stamp = f"PROBE_ENTRIES({probe.SUFFIX[dtype]}, "
        assert (
            f"{stamp}{'float' if dtype == torch.float32 else 'mk_bf16'}, {sp.threads}, "
            f"{sp.cluster})" in text
        ), (m, n, dtype_name)
    with pytest.raises(SystemExit, match=r"rmsnorm\.cu has no KERNEL5_VECS"):
        probe.with_probe_kernels(src.replace("KERNEL5_VECS", "K5"))


def test_probe_parser_is_every_probes_command_line() -> None:
    """--rounds with the probe's default, --n limited to the lengths it times (a length it does
    not time is refused, not silently skipped), and the docstring's first line as the help."""
    from minikernel.bench.probe import probe_parser

    doc = "What a probe asks.\n\n    python labs/probe_x.py\n"
    parser = probe_parser(doc, (65536, 600, 65536), rounds=3)
    assert parser.description == "What a probe asks."
    args = parser.parse_args([])
    assert args.rounds == 3 and args.n is None
    assert parser.parse_args(["--rounds", "7", "--n", "600"]).n == [600]
    with pytest.raises(SystemExit):
        parser.parse_args(["--n", "4096"])
    assert not hasattr(probe_parser(doc).parse_args([]), "n")  # a probe of fixed shapes


def test_write_variants_writes_each_copy_under_its_name(tmp_path: Path) -> None:
    from minikernel.bench.probe import write_variants

    files = write_variants({"shipped": "a", "wb": "b"}, tmp_path, "softmax")
    assert files == {"shipped": tmp_path / "softmax_shipped.cu", "wb": tmp_path / "softmax_wb.cu"}
    assert [files[k].read_text() for k in ("shipped", "wb")] == ["a", "b"]


def test_gpu_ceiling_stops_a_probe_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from minikernel.bench.probe import gpu_ceiling

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="probe_x: needs a CUDA GPU"):
        gpu_ceiling("probe_x")


def test_kernel_source_swaps_the_file_and_always_restores_it() -> None:
    import types
    from pathlib import Path

    from minikernel.bench.probe import kernel_source

    module = types.SimpleNamespace(CU_FILE=Path("/real/op.cu"))
    with kernel_source(module, "// edited", "op_probe.cu") as path:
        assert path == module.CU_FILE and path.name == "op_probe.cu"
        assert path.read_text() == "// edited"
    assert Path("/real/op.cu") == module.CU_FILE and not path.exists()
    with pytest.raises(RuntimeError), kernel_source(module, "", "x.cu"):
        raise RuntimeError("a probe failed")
    assert Path("/real/op.cu") == module.CU_FILE


def test_launch_from_points_the_module_at_the_copy_and_clears_its_cache() -> None:
    import functools
    import types
    from pathlib import Path

    from minikernel.bench.probe import launch_from

    calls = []

    @functools.cache
    def kernel(name: str) -> str:
        calls.append(name)
        return f"{module.CU_FILE}:{name}"

    module = types.SimpleNamespace(CU_FILE=Path("/real/op.cu"), _kernel=kernel)
    shipped = launch_from(module, Path("/real/op.cu"), lambda: module._kernel("k"))
    copy = launch_from(module, Path("/tmp/op_copy.cu"), lambda: module._kernel("k"))
    assert shipped() == "/real/op.cu:k" and copy() == "/tmp/op_copy.cu:k"  # not the cached one
    assert shipped() == "/real/op.cu:k" and calls == ["k", "k", "k"]
    assert Path("/real/op.cu") == module.CU_FILE
    failing = launch_from(module, Path("/tmp/op_copy.cu"), lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing()
    assert Path("/real/op.cu") == module.CU_FILE
