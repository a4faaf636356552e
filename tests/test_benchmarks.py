"""benchmarks/ab.py and make_readme_table.py on the CPU: the suites' shapes, every op
(tiled_linear's linear_gelu included) through ab.py's main on --smoke shapes, the
verification, the peer columns and the suite tables. No timing is checked."""
import json
import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F

import tilelab_torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import ab  # noqa: E402
import common  # noqa: E402
import make_readme_table  # noqa: E402

FAST = ["--smoke", "--warmup", "1", "--rep", "1", "--no-progress", "--device", "cpu"]
ROW_KEYS = {"op", "suite", "name", "shape", "dtype", "M", "N", "K", "kernel", "ms", "cublas_ms", "ratio",
            "rel_err", "cublas_rel_err", "status"}


@pytest.fixture(autouse=True)
def keep_precision():
    """ab.py sets the fp32 matmul precision per row; put it back for the other tests."""
    old = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(old)


def run_ab(tmp_path, *argv) -> tuple[int, dict]:
    rc = ab.main([*argv, "--out", str(tmp_path)])
    name = next(argv[i + 1] for i, a in enumerate(argv) if a == "--suite") if "--suite" in argv else "ab"
    path = tmp_path / (f"suite_{name}.json" if "--suite" in argv else "ab.json")
    return rc, json.loads(path.read_text())


def by_name(cases, name, op):
    return next(c for c in cases if c.name == name and c.op == op)


def test_suite_shapes_are_read_m_k_n():
    """The issue writes M x K x N; ab.py's cases keep M, N, K under their own names."""
    t = ab.suite_cases("transformer", ab.ALL_OPS, ["bf16"])
    c = by_name(t, "gpt2.c_attn", "mm")
    assert (c.B, c.M, c.K, c.N) == (1, 4096, 768, 2304)
    c = by_name(t, "llama3-8b.mlp_down", "linear_gelu")
    assert (c.M, c.K, c.N) == (4096, 14336, 4096)
    c = by_name(t, "gpt2.attn.context", "bmm")
    assert (c.B, c.M, c.K, c.N) == (96, 512, 512, 64)
    assert {c.op for c in t} == {"mm", "linear", "linear_gelu", "bmm"}  # all: no addmm; no nobias entries
    assert len([c for c in t if c.op == "mm"]) == 11 and len([c for c in t if c.op == "bmm"]) == 3

    s = ab.suite_cases("skinny", ab.ALL_OPS, ["fp32", "bf16"])
    decode = [c for c in s if c.op == "linear_nobias" and c.name.startswith("llama3-8b.decode.")]
    assert len(decode) == 2 * 3 * 8 and {c.M for c in decode} == {1, 2, 4, 8, 16, 32, 64, 128}
    assert {(c.K, c.N) for c in decode} == {(4096, 4096), (4096, 14336), (14336, 4096)}
    heads = [c for c in s if c.name.startswith("lm_head.decode.")]  # into a vocabulary, 1 and 16 rows
    assert {(c.op, c.M, c.K, c.N) for c in heads} == {("linear_nobias", m, k, n) for m in (1, 16)
                                                      for k, n in ((768, 50257), (4096, 32000))}
    dots = [c for c in s if c.op == "bmm"]
    assert [(c.B, c.M, c.K, c.N, c.dtype) for c in dots] == [(1024, 1, 128, 1, "fp32")]  # fp32 only
    c = by_name(s, "odd.2x3x100003", "mm")
    assert (c.M, c.K, c.N) == (2, 3, 100003)


def test_smoke_keeps_alignment():
    assert [ab.smoke_size(d) for d in (1, 5, 64, 4096, 50257, 100003)] == [1, 5, 64, 32, 49, 35]
    assert ab.padded_sizes(dict(B=7, M=1, N=100003, K=3)) == dict(B=7, M=1, N=100008, K=8)
    assert ab.needs_padding(dict(B=1, M=1, N=4096, K=4096), "bf16") is False  # M = 1 is not padded
    assert ab.needs_padding(dict(B=1, M=2, N=4096, K=4096), "fp16") is True
    assert ab.needs_padding(dict(B=1, M=2, N=4096, K=4096), "fp32") is False


def check_rows(data, suite):
    rows = data["rows"]
    assert rows and data["meta"]["suite"] == suite and data["meta"]["smoke"] is True
    for r in rows:
        assert ROW_KEYS <= r.keys(), ROW_KEYS - r.keys()
        assert r["status"] == "OK" and r["rel_err"] <= common.TOL[r["dtype"]], r
        letters = "BxMxKxN" if r["op"] == "bmm" else "MxKxN"
        dims = [r["B"], r["M"], r["K"], r["N"]] if r["op"] == "bmm" else [r["M"], r["K"], r["N"]]
        assert r["shape"] == f"{letters}=" + "x".join(map(str, dims))
        assert math.isclose(r["ratio"], r["cublas_ms"] / r["ms"])
        assert ("weight_gbps" in r) == (r["M"] <= 16)
    # the summary: one geometric mean per (op, dtype), of those rows' ratios
    for s in data["summary"]:
        g = [r["ratio"] for r in rows if (r["op"], r["dtype"]) == (s["op"], s["dtype"])]
        assert s["n"] == len(g) and math.isclose(s["geomean_ratio"], math.exp(sum(map(math.log, g)) / len(g)))
    assert {(s["op"], s["dtype"]) for s in data["summary"]} == {(r["op"], r["dtype"]) for r in rows}
    return rows


def test_transformer_suite_every_op(tmp_path):
    rc, data = run_ab(tmp_path, "--suite", "transformer", "--dtypes", "fp32,bf16", *FAST)
    assert rc == 0
    rows = check_rows(data, "transformer")
    assert {r["op"] for r in rows} == {"mm", "linear", "linear_gelu", "bmm"}
    assert all("B" in r for r in rows if r["op"] == "bmm")
    lm = next(r for r in rows if r["name"] == "gpt2.lm_head" and r["op"] == "linear_gelu")
    assert (lm["M"], lm["K"], lm["N"]) == (32, 32, 49)  # 4096 x 768 x 50257, smoked

    md = make_readme_table.build(str(tmp_path), suite_tables=True)
    assert "Suite `transformer`" in md and "| linear_gelu | bf16 | 11 |" in md
    assert "| linear_gelu | gpt2.lm_head | - | 32 | 32 | 49 | bf16 |" in md


def test_skinny_suite_and_pad_peer(tmp_path):
    rc, data = run_ab(tmp_path, "--suite", "skinny", "--dtypes", "fp32,bf16", "--peer", "pad", *FAST)
    assert rc == 0
    rows = check_rows(data, "skinny")
    assert {r["op"] for r in rows} == {"mm", "linear", "linear_nobias", "linear_gelu", "bmm"}
    padded = [r for r in rows if ab.needs_padding(dict(B=r.get("B", 1), M=r["M"], N=r["N"], K=r["K"]), r["dtype"])]
    assert {r["name"] for r in padded} >= {"odd.2x3x100003", "odd.5x5x5"}
    for r in rows:
        if r in padded:
            assert r["pad_status"] == "OK" and math.isclose(r["pad_ratio"], r["pad_ms"] / r["ms"])
        else:
            assert "pad_ms" not in r  # aligned, a dimension of 1, or fp32
    assert all(s.get("n_pad", 0) == 0 for s in data["summary"] if s["dtype"] == "fp32")
    assert "geomean pad ratio" in make_readme_table.build(str(tmp_path))


def test_unaligned_suite_is_padded_throughout(tmp_path):
    """Every product of the unaligned suite has a dimension pad_mm would pad, and keeps one when smoked."""
    cases = ab.suite_cases("unaligned", ab.ALL_OPS, ["bf16"])
    assert {c.name for c in cases} == {"gpt2.lm_head", "gpt2.lm_head.t128", "square.4095", "square.4097",
                                       "square.6143"}
    for smoke in (False, True):
        for c in ab.suite_cases("unaligned", ab.ALL_OPS, ["bf16", "fp16"], smoke=smoke):
            assert ab.needs_padding(dict(B=c.B, M=c.M, N=c.N, K=c.K), c.dtype), c
    rc, data = run_ab(tmp_path, "--suite", "unaligned", "--dtypes", "bf16", "--peer", "pad", *FAST)
    assert rc == 0
    rows = check_rows(data, "unaligned")
    assert rows and all(r["pad_status"] == "OK" for r in rows)


def test_kept_precision_is_put_back():
    """The tools' loops set the precision per dtype; common.kept_precision restores the caller's, error or not."""
    before = torch.get_float32_matmul_precision()
    with pytest.raises(ValueError):
        with common.kept_precision():
            common.set_precision("tf32" if before == "highest" else "fp32")
            raise ValueError
    assert torch.get_float32_matmul_precision() == before


def test_write_json_replaces_the_file_whole(tmp_path):
    """The tools rewrite their JSON after every measurement (rows_ab.py): each write replaces the file whole,
    through a temporary file renamed over it, and leaves nothing else behind."""
    path = tmp_path / "sub" / "rows.json"
    common.write_json(str(path), {"rows": [1]})
    common.write_json(str(path), {"rows": [1, 2]})
    assert json.loads(path.read_text()) == {"rows": [1, 2]}
    assert os.listdir(path.parent) == ["rows.json"]


def test_rounds_take_the_median_of_medians(tmp_path, monkeypatch):
    """--rounds N measures every time N times and keeps the median: one spike in three moves nothing."""
    times = iter([1.0, 9.0, 2.0] * 1000)
    monkeypatch.setattr(ab.common, "_bench_once", lambda *args: next(times))
    assert ab.common.bench(lambda: None, "cpu", rounds=3) == 2.0
    assert ab.common.bench(lambda: None, "cpu") == 1.0  # one round: the measurement itself
    rc, data = run_ab(tmp_path, "--shapes", "8x8x8", "--dtypes", "fp32", "--rounds", "3", "--warmup", "1", "--rep", "1",
                      "--no-progress", "--device", "cpu")
    assert rc == 0 and data["meta"]["rounds"] == 3
    assert all(r["ms"] == 2.0 and r["cublas_ms"] == 2.0 for r in data["rows"] if r.get("ms"))


@pytest.mark.parametrize("op", ["mm", "addmm", "linear", "linear_nobias", "linear_gelu", "bmm"])
def test_each_op_calls_tilelab(op, monkeypatch):
    """The tilelab side of each op is the matching tilelab call (tiled_linear for the linear ops)
    and agrees with torch's side."""
    calls = []
    for fn in ("tiled_mm", "tiled_addmm", "tiled_linear", "tiled_bmm"):
        real = getattr(tilelab_torch, fn)
        monkeypatch.setattr(tilelab_torch, fn, lambda *a, _f=fn, _r=real, **kw: calls.append((_f, kw)) or _r(*a, **kw))
    inputs = ab.make_inputs(op, dict(B=3, M=5, N=6, K=7), torch.float64, "cpu")
    out = ab.OPS[op].tilelab(*inputs, variant=None)
    torch.testing.assert_close(out, ab.OPS[op].torch(*inputs))
    want = {"mm": "tiled_mm", "addmm": "tiled_addmm", "bmm": "tiled_bmm"}.get(op, "tiled_linear")
    assert [c[0] for c in calls] == [want]
    assert calls[0][1].get("activation") == ("gelu" if op == "linear_gelu" else None)


def test_verification_catches_a_missing_activation(tmp_path, monkeypatch):
    """A tilelab side that forgets the GELU is out of tolerance: status CHECK, exit code 1."""
    monkeypatch.setitem(ab.OPS, "linear_gelu", ab.OPS["linear_gelu"]._replace(
        tilelab=lambda x, w, b, **kw: tilelab_torch.tiled_linear(x, w, b, **kw)))
    rc, data = run_ab(tmp_path, "--op", "linear_gelu", "--shapes", "16x24x40", "--dtypes", "fp32", *FAST[1:])
    assert rc == 1 and data["rows"][0]["status"] == "CHECK"


def test_triton_peer_columns(tmp_path, monkeypatch):
    """The triton columns' plumbing with torch.compile replaced (a CPU has no Triton GEMM
    templates): its arguments, verification, ratio; then a failing compile that the row reports."""
    seen = []

    def fake_compile(fn, **kw):
        seen.append(kw)
        return lambda *a: F.gelu(F.linear(*a))  # the right values, computed another way

    monkeypatch.setattr(torch, "compile", fake_compile)
    rc, data = run_ab(tmp_path, "--op", "linear_gelu", "--shapes", "16x24x40", "--dtypes", "fp32",
                      "--peer", "triton", *FAST[1:])
    r = data["rows"][0]
    assert rc == 0 and seen == [dict(mode="max-autotune-no-cudagraphs", dynamic=False, fullgraph=True)]
    assert r["triton_status"] == "OK" and math.isclose(r["triton_ratio"], r["triton_ms"] / r["ms"])

    monkeypatch.setattr(torch, "compile", lambda fn, **kw: lambda *a: (_ for _ in ()).throw(RuntimeError("no luck")))
    rc, data = run_ab(tmp_path, "--op", "mm", "--shapes", "8x8x8", "--dtypes", "fp32", "--peer", "triton", *FAST[1:])
    r = data["rows"][0]
    assert rc == 0 and r["status"] == "OK" and r["ms"] > 0
    assert r["triton_ms"] is None and "triton_ratio" not in r and "no luck" in r["triton_status"]
    assert r["triton_status"].startswith("FAIL")


@pytest.mark.parametrize("argv, message", [
    (["--suite", "skinny", "--shapes", "8x8x8"], "not allowed with"),
    (["--op", "all"], "--op all needs --suite"),
    (["--smoke"], "needs --suite"),
    (["--suite", "transformer", "--op", "linear_nobias"], "has no linear_nobias shapes"),
    (["--dtypes", "fp8"], "unknown dtype"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit):
        ab.main([*argv, "--device", "cpu"])
    assert message in capsys.readouterr().err


# ---- benchmarks/tools/chooser_picks.py: the dispatcher's picks for the suites on a described GPU
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "tools"))
import chooser_picks  # noqa: E402

needs_dispatcher = pytest.mark.skipif(not tilelab_torch.built_with_cuda(),
                                      reason="explain_described needs a CUDA build of tilelab")


@needs_dispatcher
def test_chooser_picks_lines_match_explain_described(tmp_path):
    """One line a problem, each the described GPU's pick for that product: the suite's forward product,
    with --training its dX (dY @ W) and dW (dY^T @ X), with --rows the decode batches of its weights."""
    out = tmp_path / "picks.txt"
    assert chooser_picks.main(["--suites", "skinny", "--dtypes", "bf16,tf32", "--training", "--rows", "24",
                               "--out", str(out)]) == 0
    lines = [line.split() for line in out.read_text().splitlines()]
    assert lines and all(len(parts) == 8 for parts in lines)
    names = {k.name for k in tilelab_torch.kernels("cuda")}
    assert all(parts[6] in names and parts[7].startswith("s") for parts in lines)
    assert {parts[4] for parts in lines} == {"fwd", "dX", "dW"} and {parts[3] for parts in lines} == {"bf16", "tf32"}
    by_key = {" ".join(parts[:6]): parts[6:] for parts in lines}
    # 16 decoded rows of Llama-3-8B's mlp_up (x @ W.t(), W 14336 x 4096), its dX and its dW
    H200 = dict(sm=90, num_sms=132)
    x, w = torch.empty(16, 4096, dtype=torch.bfloat16), torch.empty(14336, 4096, dtype=torch.bfloat16)
    dy = torch.empty(16, 14336, dtype=torch.bfloat16)
    for product, (a, b), shape in (("fwd", (x, w.t()), "1x16x4096x14336"), ("dX", (dy, w), "1x16x14336x4096"),
                                   ("dW", (dy.t(), x), "1x14336x16x4096")):
        e = tilelab_torch.explain_described(a, b, **H200)
        key = f"skinny llama3-8b.decode.mlp_up linear_nobias bf16 {product} {shape}"
        s = e.details.get("split_k", 1)
        way = f"/{chooser_picks.split_way(e.details)}" if s > 1 else ""
        assert by_key[key] == [e.kernel, f"s{s}{way}"], (key, e)
    # a split pick names how its slices are added, as explain's details say
    splits = [parts[7] for parts in lines if parts[7] != "s1"]
    assert splits and all(p.split("/")[1] in picks_ab.WAYS for p in splits), splits
    assert "skinny rows.24x4096x14336 linear_nobias bf16 fwd 1x24x4096x14336" in by_key
    assert torch.get_float32_matmul_precision() == "highest"  # the tf32 rows' precision is put back
    # a forward product with an epilogue (linear_gelu: + bias + GELU) is the pick for it, explain()'s bias= and
    # activation= given
    x1, w1, b1 = (torch.empty(*shape, dtype=torch.bfloat16) for shape in ((1, 8192), (8192, 8192), (8192,)))
    e = tilelab_torch.explain_described(x1, w1.t(), bias=b1, activation="gelu", **H200)
    key = "skinny gemv.m1 linear_gelu bf16 fwd 1x1x8192x8192"
    assert by_key[key][0] == e.kernel, (key, e)


def test_chooser_picks_rows_ops():
    """--rows-ops lists the decode batches as those ops: each with its epilogue (chooser_picks.epilogue)."""
    probs = [p for p in chooser_picks.problems(["skinny"], ["bf16"], False, [4], ("linear_nobias", "linear_gelu"))
             if p.name.startswith("rows.")]
    ops = {p.op for p in probs}
    assert ops == {"linear_nobias", "linear_gelu"}
    assert all((p.bias is not None, p.activation) == ((False, None) if p.op == "linear_nobias" else (True, "gelu"))
               for p in probs)
    assert chooser_picks.epilogue("linear", "fwd") == (True, None)
    assert chooser_picks.epilogue("linear_gelu", "dX") == (False, None)  # the gradients' products: bare
    assert chooser_picks.kind("linear", "fwd") != chooser_picks.kind("linear_nobias", "fwd")
    assert chooser_picks.kind("linear_nobias", "fwd") != chooser_picks.kind("mm", "fwd")


def test_chooser_picks_rows_list_a_shared_weight_once():
    """--rows adds decode batches of every suite's weights; a weight both suites have (GPT-2's and
    Llama's projections appear in each) is listed once, so a diff counts each product once."""
    probs = list(chooser_picks.problems(["transformer", "skinny"], ["bf16"], False, [24]))
    decode = [(p.dtype, p.product, tuple(p.a.shape), tuple(p.b.shape)) for p in probs if p.name.startswith("rows.")]
    assert decode and len(decode) == len(set(decode))
    suites = {p.suite for p in probs if p.name.startswith("rows.")}
    assert suites == {"transformer", "skinny"}  # the skinny suite's own weights still get theirs


def test_product_operands_are_the_problems_layouts():
    """picks_ab.py rebuilds a moved problem from its key with product_operands: the same shapes and strides
    as the problem chooser_picks explained, for each op and product."""
    for p in chooser_picks.problems(["transformer", "skinny"], ["bf16"], True, [24]):
        B = p.a.shape[0] if p.a.dim() == 3 else 1
        M, K = p.a.shape[-2:]
        N = p.b.shape[-1]
        a, b = chooser_picks.product_operands(p.op, p.product, B, M, K, N,
                                              lambda *shape: torch.empty(*shape, dtype=torch.bfloat16))
        assert (a.shape, a.stride(), b.shape, b.stride()) == (p.a.shape, p.a.stride(), p.b.shape, p.b.stride()), p.key()


import picks_ab  # noqa: E402


def test_picks_ab_reads_a_diff_once_a_product(tmp_path, capsys):
    """The moved problems of a --diff listing, each product once: the same fwd product under two names of
    one layout and epilogue (linear_nobias in two suites) is timed once, one with a bias (linear), one with
    a bias and GELU (linear_gelu) and an mm of the same shape (another layout) apart."""
    lines = ["skinny a linear_nobias bf16 fwd 1x16x4096x4096  gemv_mma_16x32x64 s1 -> hopper_128x128x64 s2/kernel",
             "transformer b linear_nobias bf16 fwd 1x16x4096x4096  gemv_mma_16x32x64 s1 -> hopper_128x128x64 s2",
             "transformer b linear bf16 fwd 1x16x4096x4096  gemv_mma_16x32x64 s1 -> hopper_128x128x64 s2",
             "transformer b linear_gelu bf16 fwd 1x16x4096x4096  gemv_mma_16x32x64 s1 -> hopper_m64_64x64x64 s1",
             "skinny c mm bf16 fwd 1x16x4096x4096  gemv_mma_rowb_16x32x64 s1 -> hopper_m64_64x64x64 s4/pass",
             "skinny a linear bf16 dW 1x4096x16x4096  hopper_128x128x64 s3/kernel -> hopper_128x128x64 s3/pass",
             "skinny a linear bf16 dX 1x16x4096x4096  hopper_128x128x64 s2 -> hopper_128x64x64 s1",
             "2 of 9 problems changed their pick", "  bf16 fwd: 2 row"]
    moved = picks_ab.parse_diff(lines)
    assert [(m.op, m.product, m.shape, m.old, m.new) for m in moved] == [
        ("linear_nobias", "fwd", (1, 16, 4096, 4096), ("gemv_mma_16x32x64", 1, None),
         ("hopper_128x128x64", 2, "kernel")),
        ("linear", "fwd", (1, 16, 4096, 4096), ("gemv_mma_16x32x64", 1, None), ("hopper_128x128x64", 2, None)),
        ("linear_gelu", "fwd", (1, 16, 4096, 4096), ("gemv_mma_16x32x64", 1, None), ("hopper_m64_64x64x64", 1, None)),
        ("mm", "fwd", (1, 16, 4096, 4096), ("gemv_mma_rowb_16x32x64", 1, None), ("hopper_m64_64x64x64", 4, "pass")),
        ("linear", "dW", (1, 4096, 16, 4096), ("hopper_128x128x64", 3, "kernel"), ("hopper_128x128x64", 3, "pass")),
        ("linear", "dX", (1, 16, 4096, 4096), ("hopper_128x128x64", 2, None), ("hopper_128x64x64", 1, None))]
    with pytest.raises(ValueError, match="not a pick"):
        picks_ab.parse_diff(["skinny a linear bf16 fwd 1x16x4096x4096  hopper_128x128x64 s2/atomics -> "
                             "hopper_128x128x64 s1"])
    empty = tmp_path / "empty.txt"
    empty.write_text("0 of 9 problems changed their pick\n")
    assert picks_ab.main([str(empty)]) == 1 and "no moved problems" in capsys.readouterr().err
    if not torch.cuda.is_available():
        listing = tmp_path / "moved.txt"
        listing.write_text("\n".join(lines) + "\n")
        with pytest.raises(SystemExit):
            picks_ab.main([str(listing)])
        assert "needs a CUDA GPU" in capsys.readouterr().err


def test_picks_ab_copies_of_b_are_bounded():
    """B's copies hold --b-mb MB, at least 2 of them, and at most --max-copies: a weight gradient's B over a
    one-row decode batch (1 x 1024 bf16, 2 KB) would otherwise be 81920 calls in one graph."""
    big, tiny = torch.empty(4096, 4096, dtype=torch.bfloat16), torch.empty(1, 1024, dtype=torch.bfloat16)
    assert picks_ab.copies_of(big, 160) == 5 and picks_ab.copies_of(big, 4) == 2
    assert picks_ab.copies_of(tiny, 160) == picks_ab.MAX_COPIES and picks_ab.copies_of(tiny, 160, 1000) == 1000


@pytest.mark.gpu
@needs_dispatcher
def test_picks_ab_times_both_picks_checked():
    """measure() forces each pick (row and split count), checks it against float64 and times it beside
    cuBLAS; the split override is put back."""
    m = picks_ab.Moved("bf16", "fwd", "linear", (1, 16, 1024, 256), ("hopper_m64_64x64x64", 1, None),
                       ("hopper_m64_64x64x64", 4, "kernel"))
    r = picks_ab.measure(m, b_mb=4)
    assert (r["old_kernel"], r["old_splits"], r["old_way"], r["new_kernel"], r["new_splits"], r["new_way"]) == (
        *m.old, *m.new)
    assert all(r[k] > 0 for k in ("old_us", "new_us", "cublas_us")) and max(r["old_rel_err"], r["new_rel_err"]) < 1e-2
    # linear_gelu's forward runs with its bias and GELU, checked against act(x @ W.t() + b) in float64
    m = picks_ab.Moved("bf16", "fwd", "linear_gelu", (1, 16, 1024, 256), ("gemv_mma_16x32x64", 1, None),
                       ("hopper_m64_64x64x64", 1, None))
    ops = picks_ab.cold_operands(m.dtype, m.op, m.product, m.shape, 4)
    assert ops.epilogue["activation"] == "gelu" and ops.epilogue["bias"].shape == (256,)
    with torch.no_grad():
        bare = ops.a.double() @ ops.bs[0].double()
    assert not torch.allclose(ops.ref, bare, atol=1e-2)  # the reference has the epilogue
    r = picks_ab.measure(m, b_mb=4)
    assert max(r["old_rel_err"], r["new_rel_err"]) < 1e-2
    x = torch.empty(16, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.empty(256, 1024, device="cuda", dtype=torch.bfloat16)
    assert "forced" not in tilelab_torch.explain(x, w.t(), variant="hopper_m64_64x64x64").reason


import rows_ab  # noqa: E402


def test_rows_ab_reads_a_listing_once_a_product(tmp_path, capsys):
    """rows_ab.py takes chooser_picks.py's listing lines (with or without the pick after the shape), each
    product once; a line of another form is an error, not a skipped problem."""
    lines = ["transformer vit.qkv linear bf16 fwd 1x1576x768x2304 hopper_128x256x64 s1",
             "skinny vit.qkv linear bf16 fwd 1x1576x768x2304",
             "skinny vit.qkv linear_nobias bf16 fwd 1x1576x768x2304",
             "# a comment", "",
             "transformer vit.qkv linear bf16 dW 1x2304x1576x768 hopper_128x128x64 s1",
             "transformer vit.qkv linear_nobias bf16 dW 1x2304x1576x768 hopper_128x128x64 s1"]
    got = rows_ab.parse_listing(lines)
    assert got == [rows_ab.Listed("bf16", "fwd", "linear", (1, 1576, 768, 2304)),  # + bias
                   rows_ab.Listed("bf16", "fwd", "linear_nobias", (1, 1576, 768, 2304)),
                   rows_ab.Listed("bf16", "dW", "linear", (1, 2304, 1576, 768))]  # the gradients' products: bare
    with pytest.raises(ValueError, match="not a chooser_picks.py problem"):
        rows_ab.parse_listing(["a b linear bf17 fwd 1x2x3x4"])
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    assert rows_ab.main([str(empty)]) == 1 and "no problems" in capsys.readouterr().err
    if tilelab_torch.built_with_cuda():
        listing = tmp_path / "one.txt"
        listing.write_text(lines[0] + "\n")
        with pytest.raises(SystemExit):
            rows_ab.main([str(listing), "--kernels", "hopper_128x128x64", "hopper_999x1x64"])
        assert "not rows of the table: hopper_999x1x64" in capsys.readouterr().err


def test_rows_ab_takes_a_models_breakdown(tmp_path, capsys):
    """--models: each GEMM of a model_ab.py --breakdown file as the three products autograd runs, in their
    layouts: an nn.Linear's x @ W.t(), dY @ W, dY^T X; a Conv1D's x @ W, dY @ W.t() (x @ W.t()'s layout), X^T dY;
    the forward with the module's bias (linear, addmm) and an erf GELU after it (linear_gelu)."""
    data = {"breakdown": [{"model": "m", "dtype": "bf16", "problems": [
        {"M": 64, "K": 256, "N": 512, "weight_layout": "NxK (Linear)", "modules": ["fc"], "bias": False},
        {"M": 64, "K": 128, "N": 384, "weight_layout": "KxN (Conv1D)", "modules": ["c_attn"], "bias": True},
        {"M": 64, "K": 256, "N": 512, "weight_layout": "NxK (Linear)", "modules": ["fc2"], "bias": False},
        {"M": 64, "K": 256, "N": 512, "weight_layout": "NxK (Linear)", "modules": ["fc1"], "bias": True,
         "activation": "gelu"}]}]}
    got = rows_ab.listing_from_models(data)
    assert got == [rows_ab.Listed("bf16", "fwd", "linear_nobias", (1, 64, 256, 512)),
                   rows_ab.Listed("bf16", "dX", "linear", (1, 64, 512, 256)),
                   rows_ab.Listed("bf16", "dW", "linear", (1, 512, 64, 256)),
                   rows_ab.Listed("bf16", "fwd", "addmm", (1, 64, 128, 384)),
                   rows_ab.Listed("bf16", "fwd", "linear_nobias", (1, 64, 384, 128)),
                   rows_ab.Listed("bf16", "dW", "linear", (1, 128, 64, 384)),
                   # the second Linear: the same three; the third's forward has its bias and GELU
                   rows_ab.Listed("bf16", "fwd", "linear_gelu", (1, 64, 256, 512))]
    # the Conv1D's products, made as rows_ab makes them, are autograd's: dY @ W.t() and X^T @ dY
    make = lambda *shape: torch.empty(*shape)  # noqa: E731
    a, b = chooser_picks.product_operands("linear", "fwd", 1, 64, 384, 128, make)
    w = torch.empty(128, 384)  # Conv1D's W (K, N)
    assert (b.shape, b.stride()) == (w.t().shape, w.t().stride())
    a, b = chooser_picks.product_operands("linear", "dW", 1, 128, 64, 384, make)
    x = torch.empty(64, 128)
    assert (a.shape, a.stride(), b.shape) == (x.t().shape, x.t().stride(), (64, 384))
    src = tmp_path / "models.json"
    src.write_text(json.dumps({"breakdown": []}))
    assert rows_ab.main(["--models", str(src)]) == 1 and "no problems" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rows_ab.main([str(src), "--models", str(src)])
    assert "one of them" in capsys.readouterr().err


@needs_dispatcher
def test_rows_ab_candidates():
    """The rows tried: the families asked for, the dtype's, TF32 rows only for tf32."""
    half = rows_ab.candidates("bf16", ["hopper"])
    assert "hopper_128x256x64" in half and "hopper_swap_72x128x64" in half
    assert not any("tf32" in k for k in half)
    assert "hopper_tf32_128x256x32" in rows_ab.candidates("tf32", ["hopper"])
    assert "hopper_tf32_128x256x32" not in rows_ab.candidates("fp32", ["hopper"])
    assert set(rows_ab.candidates("fp32", ["blocked"])) == {
        k.name for k in tilelab_torch.kernels("cuda") if k.family == "blocked" and k.compiled}


@pytest.mark.gpu
@needs_dispatcher
def test_rows_ab_times_every_row_checked():
    """measure() tries each row at each split count it takes (a family without split-K only unsplit), checks
    each against float64, times it beside cuBLAS and the dispatcher's pick; the split hook is put back."""
    p = rows_ab.Listed("bf16", "fwd", "linear", (1, 64, 1024, 512))
    r = rows_ab.measure(p, ["hopper_m64_64x64x64", "gemv_mma_16x32x64"], [1, 2], b_mb=4, max_copies=8)
    tried = {(x["kernel"], x["splits"]) for x in r["rows"]}
    assert ("hopper_m64_64x64x64", 1) in tried and ("hopper_m64_64x64x64", 2) in tried
    assert all(x["us"] > 0 and x["rel_err"] < 1e-2 for x in r["rows"])
    assert r["cublas_us"] > 0 and r["pick_us"] > 0 and r["pick_kernel"]
    x = torch.empty(64, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.empty(512, 1024, device="cuda", dtype=torch.bfloat16)
    assert "forced" not in tilelab_torch.explain(x, w.t(), variant="hopper_m64_64x64x64").reason
    assert "pick" in rows_ab.summary(r) and "cuBLAS" in rows_ab.summary(r)


def test_chooser_picks_diff(tmp_path, capsys):
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    old.write_text("s a linear bf16 fwd 1x16x4096x4096 gemv_mma_16x32x64 s1\n"
                   "s a linear bf16 dW 1x4096x16x4096 hopper_128x128x64 s1\n"
                   "s b mm fp16 fwd 1x64x4096x4096 hopper_m64_64x64x64 s2\n")
    new.write_text("s a linear bf16 fwd 1x16x4096x4096 hopper_128x128x64 s1\n"
                   "s a linear bf16 dW 1x4096x16x4096 hopper_128x128x64 s1\n"
                   "s b mm fp16 fwd 1x64x4096x4096 hopper_m64_64x64x64 s1\n")
    assert chooser_picks.diff(str(old), str(new)) == 2
    text = capsys.readouterr().out
    assert "gemv_mma_16x32x64 s1 -> hopper_128x128x64 s1" in text and "2 of 3 problems changed" in text
    assert "bf16 fwd: 1 row" in text and "fp16 fwd: 1 split count" in text and "dW" not in text.split("changed")[1]


@pytest.mark.parametrize("argv, message", [(["--dtypes", "fp64"], "unknown dtypes"),
                                           (["--rows", "4,x"], "comma-separated integers"),
                                           (["--rows", "0"], "must be positive"),
                                           (["--rows-ops", "linear,mm"], "--rows-ops takes")])
@needs_dispatcher
def test_chooser_picks_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit):
        chooser_picks.main(argv)
    assert message in capsys.readouterr().err


# ---- benchmarks/tools/dispatch_overhead.py: host cost per call
import dispatch_overhead  # noqa: E402


def test_dispatch_overhead_shape_arguments(capsys):
    for bad in (["--shapes", "128,768"], ["--shapes", "128,x,768"], ["--shapes", "0,768,768"]):
        with pytest.raises(SystemExit):
            dispatch_overhead.main(bad)
        assert "--shapes takes M,K,N" in capsys.readouterr().err


@pytest.mark.gpu
def test_dispatch_overhead_shapes_with_and_without_the_cache(capsys):
    """--shapes prints torch's and tilelab's host cost (cache of picks off and on) for each op, and leaves the
    cache on."""
    assert dispatch_overhead.main(["--dtypes", "bf16", "--families", "--calls", "5", "--shapes", "64,128,96",
                                   "--shape-calls", "5"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "64x128x96" in ln]
    assert len(lines) == 3 and all("cache off" in ln and ", on " in ln for ln in lines), lines
    x = torch.empty(8, 40, device="cuda", dtype=torch.bfloat16)
    tilelab_torch.explain(x, x.t())
    assert torch.ops.tilelab._set_choice_cache(True) == 1  # left on: that pick was kept


import sass_loops  # noqa: E402

_SASS = """
        code for sm_90
                Function : _Z6kernelPf
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                 /* 0x00000a0000017a02 */
        /*0010*/                   LDS.128 R4, [R2] ;                     /* 0x0000000002047984 */
        /*0020*/                   FFMA R8, R4, R6.reuse, R8 ;            /* 0x0000000604087223 */
        /*0030*/                   FFMA R9, R5, R6, R9 ;                  /* 0x0000000605097223 */
        /*0040*/                   FFMA R10, R4, R7, R11 ;                /* 0x000000070a0a7223 */
        /*0050*/              @!P0 FFMA R12, R3, RZ, R13 ;                /* 0x000000ff030c8223 */
        /*0060*/               @P1 BRA 0x10 ;                             /* 0x0000000000001947 */
        /*0070*/                   EXIT ;                                 /* 0x000000000000794d */
"""


def test_sass_loops_counts_same_bank_ffmas():
    """A backward branch is a loop; an FFMA source the previous instruction kept (.reuse, same slot) is
    not read from the register file; two uncached sources with the same register number mod 2 count."""
    funcs = sass_loops.parse_functions(_SASS)
    assert list(funcs) == ["_Z6kernelPf"] and funcs["_Z6kernelPf"][5] == (0x50, "FFMA R12, R3, RZ, R13")
    (loop,) = sass_loops.loops_of(funcs["_Z6kernelPf"], min_ffma=1)
    assert (loop.start, loop.end, len(loop.instrs)) == (0x10, 0x60, 6)
    # R4,R6,R8 all even: a pair; R5,R9 (R6 cached) both odd: a pair; R4,R7,R11: R7 and R11 odd: a pair;
    # R3, R13 odd (RZ is no register): a pair.
    assert (loop.ffma, loop.same_bank) == (4, 4)
    # R4,R10 even: a pair; R5,R9 odd: a pair (R5 kept); R5 cached, R7 odd and R8 even: none.
    assert sass_loops.same_bank_ffmas(["FFMA R8, R4, R7, R10", "FFMA R9, R5.reuse, R6, R9",
                                       "FFMA R1, R5, R7, R8"]) == (3, 2)
    assert sass_loops.loops_of(funcs["_Z6kernelPf"], min_ffma=5) == []
    lines = sass_loops.report(_SASS, "kernel", 1)
    assert len(lines) == 1 and "FFMA 4 (4 same-bank, 100%)" in lines[0] and "LDS 1" in lines[0]
