"""The tune cache (tilelab_torch.tune): recording a model's GEMM problems, picking the
fastest kernel by a timer (a fake one on the CPU), the file per GPU and torch version,
and (CUDA) the dispatcher consulting it."""
import json
import warnings

import pytest
import torch
from torch import nn

import tilelab_torch
from tilelab_torch import tuning as tune_mod

needs_cache = pytest.mark.skipif(not tilelab_torch.built_with_cuda(),
                                 reason="the dispatcher's cache is part of the CUDA build")


def MLP():
    """Linear -> GELU -> Linear: swap() fuses the GELU into the first layer."""
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8, bias=False))


@pytest.fixture
def model():
    torch.manual_seed(0)
    m = MLP()
    tilelab_torch.swap(m)
    return m


@pytest.fixture(autouse=True)
def clean_cache():
    tilelab_torch.clear_tuned()
    yield
    tilelab_torch.clear_tuned()


def test_record_forward(model):
    x = torch.randn(5, 7, 16)
    problems = tune_mod.record(model, x)
    keys = [p.key for p in problems]
    # fc1 fused with its GELU (x rows x 16 @ 16 x 32, bias), fc2 without bias.
    assert keys == ["torch.float32 1x35x32x16 a=row b=col bias act=gelu",
                    "torch.float32 1x35x8x32 a=row b=col"], keys
    assert [p.op for p in problems] == ["tiled_linear", "tiled_linear"]
    assert all(p.count == 1 for p in problems)


def test_record_train_adds_backward_products(model):
    x = torch.randn(4, 16, requires_grad=True)
    problems = tune_mod.record(model, x, train=True)
    ops = {p.op for p in problems}
    # With a gradient, tiled_linear with an activation runs its training path (_tiled_linear_pre, recorded
    # as the tiled_linear problem it is), without one tiled_mm; backward adds the products with the
    # output's gradient (column-major operands read in place).
    assert "tiled_linear" in ops and "tiled_mm" in ops
    assert any(p.op == "tiled_linear" and p.activation == "gelu" for p in problems)
    assert len(problems) > 2
    assert any(" a=col" in p.key for p in problems), [p.key for p in problems]


def test_key_names_layouts_bias_activation():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    assert torch.ops.tilelab._tune_key(a, b) == "torch.float32 1x3x5x4 a=row b=row"
    assert torch.ops.tilelab._tune_key(a, b.t().contiguous().t()) == "torch.float32 1x3x5x4 a=row b=col"
    assert torch.ops.tilelab._tune_key(a.t().contiguous().t(), b, torch.randn(5), "silu") == \
        "torch.float32 1x3x5x4 a=col b=row bias act=silu"
    assert torch.ops.tilelab._tune_key(torch.randn(2, 3, 4), torch.randn(2, 4, 5)).startswith("torch.float32 2x3x5x4")
    with pytest.raises(RuntimeError, match="inner dimensions differ"):
        torch.ops.tilelab._tune_key(a, a)


def fake_timer(times):
    """A timer that reads the time of each label from `times` (never runs the kernel)."""
    seen = []

    def timer(fn, label):
        seen.append(label)
        return times[label]

    timer.seen = seen
    return timer


CANDIDATES = ["tiled_16x16x16", "blocked_64x128x8"]


def test_tune_picks_the_fastest_and_stores_it(model, tmp_path):
    path = tmp_path / "tune.json"
    timer = fake_timer({"rules": 2.0, "tiled_16x16x16": 3.0, "blocked_64x128x8": 1.5, "torch": 1.0})
    report = tilelab_torch.tune(model, torch.randn(4, 16), path=str(path), timer=timer,
                                candidates=lambda p, args: CANDIDATES)
    assert len(report.entries) == 2
    for e in report.entries:
        assert (e.kernel, e.ms, e.rule_ms, e.torch_ms) == ("blocked_64x128x8", 1.5, 2.0, 1.0)
    assert timer.seen.count("rules") == 2 and timer.seen.count("torch") == 2
    data = json.loads(path.read_text())
    assert data["torch"] == torch.__version__ and "gpu" in data
    assert set(data["entries"]) == {e.key for e in report.entries}
    assert "blocked_64x128x8 1.5000 ms" in str(report)


def test_rules_pick_kept_when_nothing_beats_it(model, tmp_path):
    timer = fake_timer({"rules": 1.0, "tiled_16x16x16": 3.0, "blocked_64x128x8": 1.5, "torch": 1.0})
    report = tilelab_torch.tune(model, torch.randn(4, 16), path=str(tmp_path / "t.json"), timer=timer,
                                candidates=lambda p, args: CANDIDATES)
    assert all(e.kernel == e.rule_kernel for e in report.entries)


def test_file_merges_and_is_per_gpu(model, tmp_path):
    path = tmp_path / "tune.json"
    here = tune_mod._device_id()
    path.write_text(json.dumps({**here, "entries": {"old key": {
        "op": "tiled_mm", "kernel": "tiled_8x8x8", "ms": 1, "rule_kernel": "x", "rule_ms": 2, "torch_ms": None}}}))
    timer = fake_timer({"rules": 2.0, "tiled_16x16x16": 1.0, "blocked_64x128x8": 3.0, "torch": 1.0})
    tilelab_torch.tune(model, torch.randn(2, 16), path=str(path), timer=timer, candidates=lambda p, a: CANDIDATES)
    assert "old key" in json.loads(path.read_text())["entries"]  # merged, not replaced
    # Another GPU's file is ignored with a warning.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"gpu": "Some Other GPU", "torch": here["torch"], "entries": {}}))
    with pytest.warns(UserWarning, match="written for Some Other GPU"):
        assert tilelab_torch.load_tuned(str(other)) == 0
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with pytest.warns(UserWarning, match="ignoring the tune file"):
        assert tilelab_torch.load_tuned(str(bad)) == 0
    assert tilelab_torch.load_tuned(str(tmp_path / "missing.json")) == 0


@needs_cache
def test_load_applies_entries(model, tmp_path):
    path = tmp_path / "tune.json"
    timer = fake_timer({"rules": 2.0, "tiled_16x16x16": 1.0, "blocked_64x128x8": 3.0, "torch": 1.0})
    tilelab_torch.tune(model, torch.randn(2, 16), path=str(path), timer=timer, candidates=lambda p, a: CANDIDATES)
    assert torch.ops.tilelab._tune_size() == 2
    tilelab_torch.clear_tuned()
    assert torch.ops.tilelab._tune_size() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tilelab_torch.load_tuned(str(path)) == 2
    assert torch.ops.tilelab._tune_size() == 2
    with pytest.raises(RuntimeError, match="no config named 'nope'"):
        torch.ops.tilelab._tune_set("k", "nope", 1.0, "x", 2.0)


def test_default_file(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELAB_TUNE_FILE", str(tmp_path / "x.json"))
    assert tune_mod.default_tune_file() == str(tmp_path / "x.json")
    monkeypatch.delenv("TILELAB_TUNE_FILE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tune_mod.default_tune_file() == str(tmp_path / "tilelab" / "tune.json")


def test_cpu_problems_are_skipped_without_candidates(model, tmp_path):
    report = tilelab_torch.tune(model, torch.randn(2, 16), path=str(tmp_path / "t.json"))
    assert report.entries == [] and len(report.skipped) == 2
    assert "CPU kernel" in report.skipped[0][1]


@pytest.mark.gpu
def test_dispatcher_consults_the_cache(tmp_path):
    """On CUDA: a tuned entry overrides the rules for its problem only, explain() says so,
    and the result stays correct."""
    a = torch.randn(300, 200, device="cuda")
    b = torch.randn(200, 100, device="cuda")
    rules = tilelab_torch.explain(a, b).kernel
    forced = "tiled_16x16x16" if rules != "tiled_16x16x16" else "tiled_8x8x8"
    torch.ops.tilelab._tune_set(torch.ops.tilelab._tune_key(a, b), forced, 0.5, rules, 1.0)
    e = tilelab_torch.explain(a, b)
    assert e.kernel == forced and e.reason.startswith("tuned: ") and rules in e.reason, e
    assert tilelab_torch.explain(a[:299], b).kernel == rules  # another problem: the rules
    torch.testing.assert_close(tilelab_torch.tiled_mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    # A forced variant wins over the cache.
    assert tilelab_torch.explain(a, b, variant="tiled_8x8x8").kernel == "tiled_8x8x8"
    tilelab_torch.clear_tuned()
    assert tilelab_torch.explain(a, b).kernel == rules


@pytest.mark.gpu
def test_tune_on_cuda(tmp_path):
    """The real timer on a real problem: the stored winner runs and is at least as fast
    as measured for the rules' pick."""
    m = MLP().cuda()
    tilelab_torch.swap(m)
    report = tilelab_torch.tune(m, torch.randn(64, 16, device="cuda"), path=str(tmp_path / "t.json"))
    assert len(report.entries) == 2
    for e in report.entries:
        assert e.ms <= e.rule_ms and e.torch_ms is not None
    x = torch.randn(64, 16, device="cuda")
    ref = torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(x, m[0].weight, m[0].bias)),
                                     m[2].weight)
    torch.testing.assert_close(m(x), ref, rtol=1e-4, atol=1e-4)
