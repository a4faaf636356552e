"""benchmarks/model_ab.py and plot_models.py end to end on tiny models (--smoke): the
rows, their consistency (ratio, logit difference), the per-GEMM breakdown against the
swap report, the stand-in models, the step's host reads (what CUDA-graph capture
forbids) and the chart; on a GPU also the CUDA-graph rows. No timing is checked."""
import importlib.util
import json
import math
import os
import statistics
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import model_ab  # noqa: E402
import plot_models  # noqa: E402

ROW_KEYS = {"model", "dtype", "mode", "graphs", "routing", "batch", "seq", "tilelab_per_s", "cublas_per_s", "ratio",
            "max_abs_diff", "bitwise_equal", "note"}
LIBRARY = {"gpt2": "transformers", "llama": "transformers", "vit": "timm"}
AVAILABLE = [k for k in model_ab.MODELS if importlib.util.find_spec(LIBRARY[k]) is not None]
# |logits - cuBLAS logits| of the tiny models (logits of order 1): rounding, not a wrong product
MAX_DIFF = {"fp32": 1e-4, "bf16": 0.1}


@pytest.fixture(autouse=True)
def keep_precision():
    """model_ab.py turns TF32 off for its fp32 rows; put the settings back for the other tests."""
    old = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
           torch.backends.cudnn.allow_tf32)
    yield
    torch.set_float32_matmul_precision(old[0])
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old[1], old[2]


def run(tmp_path, *argv) -> dict:
    out = tmp_path / "models.json"
    assert model_ab.main([*argv, "--smoke", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["header"]["complete"] is True
    assert data["header"]["rounds"] == 2
    assert {"gpu", "torch", "command", "graphs"} <= set(data["header"])
    return data


def check_rows(rows, models, dtypes, modes, graphs):
    want = {(m, d, mo, g, r) for m in models for d in dtypes for mo in modes for g in graphs
            for r in model_ab.ROUTINGS[1:]}
    assert {(r["model"], r["dtype"], r["mode"], r["graphs"], r["routing"]) for r in rows} == want
    for r in rows:
        where = f"{r['model']} {r['dtype']} {r['mode']} graphs={r['graphs']} {r['routing']}"
        assert ROW_KEYS <= set(r), where
        assert "failed" not in r["note"], f"{where}: {r['note']}"
        assert r["tilelab_per_s"] > 0 and r["cublas_per_s"] > 0, where
        assert math.isclose(r["ratio"], r["tilelab_per_s"] / r["cublas_per_s"], rel_tol=1e-9), where
        assert math.isclose(r["ratio"], r["cublas_ms"] / r["tilelab_ms"], rel_tol=1e-9), where
        per_step = r["batch"] * (r["seq"] or 1)
        assert math.isclose(r["tilelab_per_s"], per_step / r["tilelab_ms"] * 1e3, rel_tol=1e-9), where
        assert 0 <= r["max_abs_diff"] <= MAX_DIFF[r["dtype"]], where
        if r["bitwise_equal"]:
            assert r["max_abs_diff"] == 0, where
        elif r["max_abs_diff"] > 0:
            assert not r["bitwise_equal"], where
        assert r["swapped"] > 0, where  # every model has linear layers on tilelab
        # interleaved rounds: each time is the median of its rounds (--smoke: 2)
        assert len(r["tilelab_ms_rounds"]) == len(r["cublas_ms_rounds"]) == 2, where
        assert r["tilelab_ms"] == statistics.median(r["tilelab_ms_rounds"]), where
        assert r["cublas_ms"] == statistics.median(r["cublas_ms_rounds"]), where
        # each round's own ratio, its times paired in order
        assert r["ratio_rounds"] == [c / t for c, t in zip(r["cublas_ms_rounds"], r["tilelab_ms_rounds"])], where
        assert min(r["ratio_rounds"]) > 0, where


@pytest.mark.skipif(not AVAILABLE, reason="needs transformers or timm")
def test_smoke_cpu(tmp_path):
    data = run(tmp_path, "--device", "cpu", "--models", *AVAILABLE, "--breakdown")
    rows = data["rows"]
    check_rows(rows, AVAILABLE, ["bf16", "fp32"], ["forward", "train"], [False])
    for r in rows:
        assert r["note"] == "" and r["name"].startswith(LIBRARY[r["model"]])
        assert r["fused"] == (0 if r["routing"] == "swap(fuse=False)" else 2)  # one MLP per layer, 2 layers
    # the breakdown: every routed module's forward product, grouped, with the fused ones as linear+act
    assert {(b["model"], b["dtype"]) for b in data["breakdown"]} == {(m, d) for m in AVAILABLE
                                                                     for d in ("bf16", "fp32")}
    for b in data["breakdown"]:
        assert "error" not in b, b.get("error")
        probs = b["problems"]
        row = next(r for r in rows if (r["model"], r["dtype"], r["routing"]) == (b["model"], b["dtype"],
                                                                                 "swap(fuse=True)"))
        assert sum(p["count"] for p in probs) == row["swapped"]  # each module runs once per forward
        assert sum(p["count"] for p in probs if p["op"] == "linear+act") == row["fused"]
        # Llama's q/k/v projections run as one product a layer under swap(fuse=True): timed apart and merged
        assert row["merged"] == (2 if b["model"] == "llama" else 0)
        assert sum(e["count"] for e in b["merged"]) == row["merged"]
        tol = 3e-2 if b["dtype"] == "bf16" else 1e-4  # every timed product was checked against float64
        for e in b["merged"]:
            assert e["N"] == sum(e["parts"]) and len(e["parts"]) == 3 and e["kernel"] == "cpu"
            assert 0 <= e["rel_err"] <= tol, e["rel_err"]
            assert math.isclose(e["ratio"], e["cublas_apart_fwd_ms"] / e["tilelab_merged_fwd_ms"], rel_tol=1e-9)
            assert all(e[f"{side}_{how}_fwd_ms"] > 0 for side in ("cublas", "tilelab") for how in ("apart", "merged"))
        # Llama's gated MLPs run as one tiled_gated_linear a layer: timed against cuBLAS's products and multiply
        assert row["gated"] == (2 if b["model"] == "llama" else 0)
        assert sum(e["count"] for e in b["gated"]) == row["gated"]
        for e in b["gated"]:
            assert e["activation"] == "silu" and e["kernel"] == "composed" and len(e["modules"]) == e["count"]
            assert 0 <= e["rel_err"] <= tol, e["rel_err"]
            assert math.isclose(e["ratio"], e["cublas_fwd_ms"] / e["tilelab_gated_fwd_ms"], rel_tol=1e-9)
            assert all(e[f"{k}_fwd_ms"] > 0 for k in ("cublas", "tilelab_unfused", "tilelab_apart", "tilelab_gated"))
        assert len({(p["M"], p["K"], p["N"], p["activation"], p["weight_layout"], p["bias"]) for p in probs}) \
            == len(probs)
        for what in ("fwd", "train"):
            for side in ("cublas", "tilelab"):
                assert math.isclose(sum(p[f"share_{what}_{side}"] for p in probs), 1.0, rel_tol=1e-9)
                assert math.isclose(b[f"{side}_{what}_gemm_ms_per_step"],
                                    sum(p[f"{side}_{what}_ms"] * p["count"] for p in probs), rel_tol=1e-9)
        for p in probs:
            assert p["kernel"] == "cpu" and p["dtype"] == {"bf16": "bfloat16", "fp32": "float32"}[b["dtype"]]
            assert math.isclose(p["fwd_ratio"], p["cublas_fwd_ms"] / p["tilelab_fwd_ms"], rel_tol=1e-9)
            assert ("tilelab_unfused_fwd_ms" in p) == (p["op"] == "linear+act")
            assert 0 <= p["rel_err"] <= tol, p
            for g in ("dx", "dw"):  # the backward's products alone
                assert p[f"{g}_kernel"] == "cpu" and p[f"cublas_{g}_ms"] > 0, p
                assert 0 <= p[f"{g}_rel_err"] <= tol, p
                assert math.isclose(p[f"{g}_ratio"], p[f"cublas_{g}_ms"] / p[f"tilelab_{g}_ms"], rel_tol=1e-9)
    gpt2 = [p for b in data["breakdown"] if b["model"] == "gpt2" for p in b["problems"]]
    if gpt2:  # GPT-2's Conv1D layers (weight K x N) and its bias-free tied lm_head
        assert {p["weight_layout"] for p in gpt2} == {"KxN (Conv1D)", "NxK (Linear)"}
        assert {p["activation"] for p in gpt2 if p["op"] == "linear+act"} == {"gelu_tanh"}
        head = [p for p in gpt2 if p["modules"] == ["lm_head"]]
        assert head and head[0]["bias"] is False and head[0]["M"] == 2 * 16


def test_stand_ins_and_forward_only(tmp_path):
    data = run(tmp_path, "--device", "cpu", "--fallback", "--dtypes", "fp32", "--modes", "forward")
    check_rows(data["rows"], [f"{k} (stand-in)" for k in model_ab.MODELS], ["fp32"], ["forward"], [False])
    for r in data["rows"]:
        assert r["name"].startswith("self-contained") and "stand-in" in r["note"]
        assert r["fused"] == (0 if r["routing"] == "swap(fuse=False)" else 2)  # Mlp / LlamaMLP, 2 layers
    assert data["breakdown"] == []


def test_profile_counts_every_product(tmp_path):
    """--profile: every routing's products as the model runs them. With fuse=False tilelab runs the same
    problems as cuBLAS, as often (forward: one per linear layer call; training step: those and the
    backward's), each from its own ops; fuse=True's gated MLP is one gated problem."""
    data = run(tmp_path, "--device", "cpu", "--fallback", "--dtypes", "fp32", "--profile")
    assert "profile_timing" in data["header"]
    assert [(e["model"], e["batch"]) for e in data["profile"]] == [
        (f"{k} (stand-in)", model_ab.SMOKE_CONFIGS[k][0][0]) for k in model_ab.MODELS]
    for entry in data["profile"]:
        assert "error" not in entry and entry["timing"] == "cpu", entry.get("error")
        assert [(e["mode"], e["routing"]) for e in entry["entries"]] == [
            (mo, r) for mo in ("forward", "train") for r in model_ab.ROUTINGS]
        key = entry["model"].split()[0]
        m = model_ab.build(key, smoke=True, fallback=True, device="cpu", dtype=torch.float32)
        x, _ = m.inputs(entry["batch"], entry["seq"])
        linear_calls = sum(p["count"] for p in model_ab.gemm_problems(m, x)[0])
        for e in entry["entries"]:
            where = f"{entry['model']} {e['mode']} {e['routing']}"
            calls = {(g["B"], g["M"], g["K"], g["N"], g["gated"]): g["calls_per_step"] for g in e["gemms"]}
            ops = {op for g in e["gemms"] for op in g["ops"]}
            assert ops <= model_ab.GEMM_OPS, where
            assert all(op.startswith("aten::" if e["routing"] == "cublas" else "tilelab::") for op in ops), where
            assert all(g["us_per_call"] >= 0 and g["us_per_step"] == pytest.approx(g["us_per_call"] *
                       g["calls_per_step"]) for g in e["gemms"]), where
            assert 0 < e["gemm_us_per_step"] <= e["all_us_per_step"], where
            if e["routing"] == "cublas":
                base = calls
                if e["mode"] == "forward":
                    assert sum(calls.values()) == linear_calls, where
                else:  # the backward adds dX (but for the input, which needs no gradient) and dW
                    assert sum(calls.values()) > 2 * linear_calls, where
            elif e["routing"] == "swap(fuse=False)":
                assert calls == base, where
        fused = {(g["M"], g["N"]): g for g in entry["entries"][2]["gemms"] if g["gated"]}
        assert bool(fused) == (key == "llama"), entry["model"]
    # the printed table joins the routings by problem
    rows = model_ab.joined_profile(data["profile"][0]["entries"], "forward")
    assert rows and all(r["cublas_calls"] == r["apart_calls"] and r["ratio_apart"] > 0 for r in rows)


def test_gemm_times_counts_each_kernel_once():
    """gemm_times on CUDA events (faked): a product is its outermost GEMM op with the kernels under it (an
    aten::linear over the aten::addmm that launched the kernel; a tiled_linear over its tiled_addmm and an
    activation), and a step's time counts every kernel once, from the kernels' own events."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    def op(name, shapes, kernels, parent=None):
        e = SimpleNamespace(name=name, input_shapes=shapes, cpu_parent=parent, device_type=DeviceType.CPU,
                            kernel_us=sum(kernels), children=[], cpu_time_total=0.0, self_cpu_time_total=0.0)
        if parent is not None:
            parent.children.append(e)
        return e

    def close(e):  # device_time_total as torch computes it: its kernels and its children's
        e.device_time_total = e.kernel_us + sum(close(c) for c in e.children)
        return e.device_time_total

    lin = op("aten::linear", [[2, 16, 64], [192, 64], [192]], [])
    addmm = op("aten::addmm", [[192], [32, 64], [64, 192], [], []], [5.0], lin)
    tl = op("tilelab::tiled_linear", [[2, 16, 64], [192, 64], [192], [], [], []], [])
    inner = op("tilelab::tiled_addmm", [[192], [32, 64], [64, 192], [], []], [3.0], tl)
    gelu = op("aten::gelu_", [[32, 192]], [1.0], tl)
    norm = op("aten::layer_norm", [[2, 16, 64]], [2.0])
    ops = [lin, addmm, tl, inner, gelu, norm]
    for e in ops:
        if e.cpu_parent is None:
            close(e)
    kernels = [SimpleNamespace(name=f"kernel{i}", input_shapes=[], cpu_parent=None, device_type=DeviceType.CUDA,
                               device_time_total=us) for i, us in enumerate([5.0, 3.0, 1.0, 2.0])]
    rows, gemm_us, all_us = model_ab.gemm_times(ops + kernels, steps=1, on_device=True)
    assert [(r["M"], r["K"], r["N"], r["calls_per_step"], r["us_per_call"], r["ops"]) for r in rows] == [
        (32, 64, 192, 2, 4.5, ["aten::linear", "tilelab::tiled_linear"])]
    assert (gemm_us, all_us) == (9.0, 11.0)


def test_gemm_key():
    k = model_ab.gemm_key
    assert k("aten::linear", [[2, 16, 64], [192, 64], [192]]) == (1, 32, 64, 192, False)
    assert k("aten::addmm", [[192], [32, 64], [64, 192], [], []]) == (1, 32, 64, 192, False)
    assert k("tilelab::tiled_addmm", [[192], [32, 64], [64, 192], [], []]) == (1, 32, 64, 192, False)
    assert k("aten::mm", [[512, 32], [32, 64]]) == (1, 512, 32, 64, False)
    assert k("aten::bmm", [[8, 16, 64], [8, 64, 16]]) == (8, 16, 64, 16, False)
    assert k("aten::matmul", [[2, 3, 16, 64], [2, 3, 64, 16]]) == (6, 16, 64, 16, False)
    assert k("aten::matmul", [[2, 16, 64], [64, 10]]) == (1, 32, 64, 10, False)
    assert k("tilelab::tiled_gated_linear", [[2, 16, 64], [176, 64], [176, 64], []]) == (1, 32, 64, 176, True)
    assert k("aten::matmul", [[64], [64, 10]]) is None and k("aten::mm", [[3]]) is None


def test_missing_library_stands_in(monkeypatch):
    for lib in ("transformers", "timm"):
        monkeypatch.setitem(sys.modules, lib, None)  # `import lib` raises ImportError
    for key in model_ab.MODELS:
        m = model_ab.build(key, smoke=True, fallback=False, device="cpu", dtype=torch.float32)
        assert m.row_name == f"{key} (stand-in)" and m.note.startswith(f"{LIBRARY[key]} is not installed")
        x, _ = m.inputs(*model_ab.SMOKE_CONFIGS[key][0])
        assert m.logits(x).shape[0] == x.shape[0]


def test_steps_read_nothing_back():
    """CUDA-graph capture forbids reading device values on the host: the forward and backward
    of every model (what the captured step runs besides AdamW(capturable=True)) read none."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class HostReads(TorchDispatchMode):
        reads = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.reads += func.__name__.startswith(("_local_scalar_dense", "nonzero", "is_nonzero", "equal"))
            return func(*args, **(kwargs or {}))

    for key in model_ab.MODELS:
        m = model_ab.build(key, smoke=True, fallback=key not in AVAILABLE, device="cpu", dtype=torch.float32)
        x, y = m.inputs(*model_ab.SMOKE_CONFIGS[key][0])
        for routing in model_ab.ROUTINGS:
            with model_ab.routed(m.module, routing):
                m.module.train()
                model_ab.loss_of(m.logits(x), y).backward()  # warm-up: lazy initialisation may read
                with HostReads() as h:
                    model_ab.loss_of(m.logits(x), y).backward()
                assert h.reads == 0, f"{key} {routing}: {h.reads} host reads in a training step"


def test_configs_option():
    assert model_ab.parse_configs(["gpt2=8x512,1x128", "vit=64,8"]) == {
        "gpt2": [(8, 512), (1, 128)], "vit": [(64, None), (8, None)]}
    for bad in ("gpt2=8", "vit=64x3", "bert=1x2", "llama=", "llama=ax2"):
        with pytest.raises(SystemExit, match="--configs"):
            model_ab.parse_configs([bad])
    assert model_ab.out_path("some/dir") == os.path.join("some/dir", "models.json")
    assert model_ab.out_path("x/y.json") == "x/y.json"


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [{"model": m, "dtype": d, "mode": "forward", "graphs": g, "routing": r, "batch": 2, "seq": 16,
             "ratio": None if (m, g) == ("vit", True) else 0.9} for m in ("gpt2", "vit") for d in ("bf16", "fp32")
            for g in (False, True) for r in model_ab.ROUTINGS[1:]]
    rows[0]["ratio_rounds"] = [0.7, 0.9, 1.3]  # whiskers from the rounds' ratios...
    rows[1].update(cublas_ms_rounds=[1.0, 2.0], tilelab_ms_rounds=[2.0, 2.0])  # ...or from a file's times
    src = tmp_path / "models.json"
    src.write_text(json.dumps({"header": {"gpu": "test"}, "rows": rows}))
    assert plot_models.main([str(src)]) == 0
    png = tmp_path / "models.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_models.round_ratios(rows[0]) == [0.7, 0.9, 1.3]
    assert plot_models.round_ratios(rows[1]) == [0.5, 1.0] and plot_models.round_ratios(rows[2]) is None
    with pytest.raises(SystemExit, match="not a model_ab.py result"):
        src.write_text("[]")
        plot_models.main([str(src)])


@pytest.mark.gpu
@pytest.mark.skipif(not AVAILABLE, reason="needs transformers or timm")
def test_smoke_cuda_graphs(tmp_path):
    """Eager and CUDA-graph rows on the GPU: every capture (forward, and forward + backward +
    AdamW(capturable=True)) works for every routing; --profile reads the kernels' durations."""
    data = run(tmp_path, "--device", "cuda", "--models", *AVAILABLE, "--breakdown", "--profile")
    check_rows(data["rows"], AVAILABLE, ["bf16", "fp32"], ["forward", "train"], [False, True])
    assert all("error" not in b for b in data["breakdown"])
    # --profile on the GPU: kernel durations, every product found on both sides, as often
    for entry in data["profile"]:
        assert "error" not in entry and entry["timing"] == "device", entry.get("error")
        by = {(e["mode"], e["routing"]): e for e in entry["entries"]}
        for mode in ("forward", "train"):
            c, t = by[mode, "cublas"], by[mode, "swap(fuse=False)"]
            calls = [{(g["B"], g["M"], g["K"], g["N"]): g["calls_per_step"] for g in e["gemms"]} for e in (c, t)]
            assert calls[0] == calls[1], (entry["model"], mode)
            assert all(g["us_per_call"] > 0 for e in (c, t) for g in e["gemms"]), (entry["model"], mode)
            assert 0 < c["gemm_us_per_step"] < c["all_us_per_step"], (entry["model"], mode)


def test_interleave_steps(tmp_path):
    """--interleave steps: the eager steps of every routing alternate on copies of the model; the rows are
    the same as with blocks of steps, and the header says how they were timed."""
    data = run(tmp_path, "--device", "cpu", "--fallback", "--dtypes", "fp32", "--models", "llama",
               "--interleave", "steps")
    check_rows(data["rows"], ["llama (stand-in)"], ["fp32"], ["forward", "train"], [False])
    assert data["header"]["interleave"] == "steps" and "alternated one by one" in data["header"]["timing"]


def test_measure_alternating_leaves_the_model_and_reports_failures(monkeypatch):
    """The tilelab routings run on swapped copies: the original stays unswapped; a routing that raises is
    reported in `failed` and the others are still timed."""
    m = model_ab.build("llama", smoke=True, fallback=True, device="cpu", dtype=torch.float32)
    x, y = m.inputs(*model_ab.SMOKE_CONFIGS["llama"][0])
    snapshot = [q.detach().clone() for q in m.module.parameters()]
    args = model_ab.argparse.Namespace(device="cpu", rep_ms=1.0, min_steps=3)
    failed: dict = {}
    times = model_ab.measure_alternating(m, "train", x, y, snapshot, args, failed)
    assert failed == {} and set(times) == set(model_ab.ROUTINGS) and min(times.values()) > 0
    assert not any(isinstance(mod, model_ab.tilelab_torch.TiledLinear) for mod in m.module.modules())
    assert all(q.grad is None for q in m.module.parameters())

    swap = model_ab.tilelab_torch.swap

    def failing_swap(module, *, fuse=True, **kw):
        if fuse:
            raise RuntimeError("no fused swap here")
        return swap(module, fuse=fuse, **kw)

    monkeypatch.setattr(model_ab.tilelab_torch, "swap", failing_swap)
    failed = {}
    times = model_ab.measure_alternating(m, "forward", x, y, snapshot, args, failed)
    assert set(times) == {"cublas", "swap(fuse=False)"}
    assert list(failed) == ["swap(fuse=True)"] and "no fused swap here" in failed["swap(fuse=True)"]
