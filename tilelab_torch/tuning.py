"""A tune cache, in the manner of PyTorch's TunableOp: measure every kernel on the
GEMM problems a model runs and let the dispatcher use the winners.

    report = tilelab_torch.tune(model, x)          # records, times, stores, applies
    print(report)                                  # per problem: winner vs the rules' pick vs torch
    tilelab_torch.load_tuned()                     # later, in a new process: apply the stored winners

A problem is what the chooser's pick may depend on (torch.ops.tilelab._tune_key:
dtype, batch x M x N x K, operand layouts, bias, activation, TF32 consent). The
winners are stored per GPU name and torch version in a JSON file
(``TILELAB_TUNE_FILE``, default ``$XDG_CACHE_HOME/tilelab/tune.json`` or
``~/.cache/tilelab/tune.json``); a file written on another GPU or torch is
ignored with a warning. The dispatcher consults the cache before its rules when
no ``variant`` is forced, and ``explain()`` then says ``tuned: X measured a ms vs
b ms for the rules' pick (Y)``. Only CUDA problems are tuned (the CPU has one kernel);
tiled_linear's training path (``_tiled_linear_pre``) is recorded as the tiled_linear
problem it chooses for, and tiled_gated_linear's fused kernel, which is no table row,
is not tuned (with a gradient its composed products are).
"""
from __future__ import annotations

import json
import os
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import ops

#: timer(fn, label) -> milliseconds; label is a config name, "rules" (the
#: dispatcher's own pick) or "torch" (torch's op on the same inputs).
Timer = Callable[[Callable[[], object], str], float]


def default_tune_file() -> str:
    """Where the tune cache lives: ``$TILELAB_TUNE_FILE``, else under the user's cache directory."""
    path = os.environ.get("TILELAB_TUNE_FILE")
    if path:
        return path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tilelab", "tune.json")


@dataclass
class Problem:
    """One recorded GEMM: the op, its tensor arguments' metadata and its key."""

    op: str  #: "tiled_mm", "tiled_bmm", "tiled_addmm" or "tiled_linear"
    key: str
    args: tuple  #: (shape, stride, dtype, device) per tensor argument, None for an absent bias
    activation: Optional[str] = None
    count: int = 1


@dataclass
class TuneEntry:
    key: str
    op: str
    kernel: str
    ms: float
    rule_kernel: str
    rule_ms: float
    torch_ms: Optional[float]
    count: int


@dataclass
class TuneReport:
    """What :func:`tune` measured: one entry per problem, and where it was stored."""

    entries: list = field(default_factory=list)
    path: Optional[str] = None
    skipped: list = field(default_factory=list)  #: (key, reason)

    def __str__(self) -> str:
        lines = [f"tilelab tune: {len(self.entries)} problem(s), stored in {self.path}"]
        for e in self.entries:
            t = f", torch {e.torch_ms:.4f} ms" if e.torch_ms is not None else ""
            lines.append(f"  {e.key} ({e.op} x{e.count}): {e.kernel} {e.ms:.4f} ms vs rules' "
                         f"{e.rule_kernel} {e.rule_ms:.4f} ms{t}")
        lines += [f"  skipped {k}: {why}" for k, why in self.skipped]
        return "\n".join(lines)


_OPS = ("tiled_mm", "tiled_bmm", "tiled_addmm", "tiled_linear")


def _meta(t):
    return None if t is None else (tuple(t.shape), tuple(t.stride()), t.dtype, t.device)


def _key(op: str, args: Sequence, activation: Optional[str]) -> str:
    """The C++ key of a call (one definition: torch.ops.tilelab._tune_key)."""
    if op == "tiled_linear":
        x, w, bias = args[0], args[1], args[2]
        return torch.ops.tilelab._tune_key(x.reshape(-1, x.shape[-1]), w.t(), bias, activation)
    if op == "tiled_addmm":
        return torch.ops.tilelab._tune_key(args[1], args[2], args[0])
    return torch.ops.tilelab._tune_key(args[0], args[1])


class _Recorder(TorchDispatchMode):
    """Records every call of a tilelab op below autograd (backward products included)."""

    def __init__(self):
        super().__init__()
        self.problems: dict[str, Problem] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        call_args = args
        name = func.name()
        if name.startswith("tilelab::"):
            op = name.split("::")[1].split(".")[0]
            if op == "_tiled_linear_pre":  # tiled_linear's training path (an activation, a gradient): the
                op = "tiled_linear"        # same problem and key; tuned as the tiled_linear call
            if op in _OPS and kwargs.get("variant") is None:
                act = kwargs.get("activation")
                if op == "tiled_linear":  # bias may be left out (its default, None) or passed by name
                    args = (args[0], args[1], args[2] if len(args) > 2 else kwargs.get("bias"))
                key = _key(op, args, act)
                if key in self.problems:
                    self.problems[key].count += 1
                else:
                    self.problems[key] = Problem(op, key, tuple(_meta(a) if isinstance(a, torch.Tensor) or a is None
                                                                else a for a in args), act)
        return func(*call_args, **kwargs)


def record(fn: Callable, *inputs, train: bool = False) -> list:
    """The tilelab GEMM problems ``fn(*inputs)`` runs (a module or a function), once each,
    with how often. ``train``: also the backward's products (the output's sum is
    differentiated); else the call runs under ``torch.no_grad()``."""
    rec = _Recorder()
    with rec:
        if train:
            out = fn(*inputs)
            outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)]
            torch.autograd.backward([o.float().sum() for o in outs if o.requires_grad])
        else:
            with torch.no_grad():
                fn(*inputs)
    return list(rec.problems.values())


def _inputs(p: Problem) -> list:
    """Fresh random tensors with the recorded shapes, strides, dtypes and devices."""
    out = []
    for m in p.args:
        if isinstance(m, tuple) and len(m) == 4 and isinstance(m[2], torch.dtype):
            shape, stride, dtype, device = m
            # One random storage viewed with the recorded strides (a stride-0,
            # broadcast operand included).
            size = 1 + sum((n - 1) * st for n, st in zip(shape, stride) if n > 0) if all(shape) else 0
            out.append(torch.randn(size, dtype=dtype, device=device).as_strided(shape, stride))
        else:
            out.append(m)
    return out


def _product(p: Problem, args) -> tuple:
    """The (a, b) of the product a @ b the call runs: what explain() takes."""
    if p.op == "tiled_linear":
        return args[0].reshape(-1, args[0].shape[-1]), args[1].t()
    return (args[1], args[2]) if p.op == "tiled_addmm" else (args[0], args[1])


def _epilogue(p: Problem, args) -> dict:
    """explain()'s bias= and activation= for the call: the epilogue the dispatcher decides with."""
    if p.op == "tiled_linear":
        return {"bias": args[2], "activation": p.activation}
    return {"bias": args[0]} if p.op == "tiled_addmm" else {}


def _torch_equivalent(p: Problem, args) -> Callable[[], object]:
    if p.op == "tiled_linear":
        act = ops.TORCH_ACTIVATIONS[p.activation]
        return lambda: act(torch.nn.functional.linear(args[0], args[1], args[2]))
    if p.op == "tiled_addmm":
        return lambda: torch.addmm(args[0], args[1], args[2])
    if p.op == "tiled_bmm":
        return lambda: torch.bmm(args[0], args[1])
    return lambda: torch.mm(args[0], args[1])


def _cuda_timer(fn: Callable[[], object], label: str, rep_ms: float = 50.0) -> float:
    try:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=10, rep=rep_ms, return_mode="median"))
    except ImportError:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        return statistics.median(times)


def _candidates(p: Problem, args) -> list:
    """The table's rows that can run this problem here (the dispatcher's own answer)."""
    a, b = _product(p, args)
    names = []
    for k in ops.kernels("cuda"):
        if a.dtype not in k.dtypes:
            continue
        try:
            ops.explain(a, b, variant=k.name, **_epilogue(p, args))
        except RuntimeError:
            continue
        names.append(k.name)
    return names


def _device_id() -> dict:
    return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "torch": torch.__version__}


def _read(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as e:
        warnings.warn(f"tilelab: ignoring the tune file {path}: {e}")
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        warnings.warn(f"tilelab: ignoring the tune file {path}: not a tilelab tune file")
        return {}
    return data


def _apply(entries: dict) -> int:
    if not hasattr(torch.ops.tilelab, "_tune_set"):
        return 0  # a CPU-only build: nothing consults a cache
    n = 0
    for key, e in entries.items():
        if any(k.name == e["kernel"] for k in ops.kernels("cuda")):
            torch.ops.tilelab._tune_set(key, e["kernel"], float(e["ms"]), e["rule_kernel"], float(e["rule_ms"]))
            n += 1
    return n


def load_tuned(path: Optional[str] = None) -> int:
    """Apply a tune file's winners to the dispatcher; returns how many entries took.

    A file written on another GPU or torch version is ignored with a warning
    (its timings say nothing about this one)."""
    path = path or default_tune_file()
    data = _read(path)
    if not data:
        return 0
    here = _device_id()
    if data.get("gpu") != here["gpu"] or data.get("torch") != here["torch"]:
        warnings.warn(f"tilelab: ignoring the tune file {path}: written for {data.get('gpu')} with torch "
                      f"{data.get('torch')}, this is {here['gpu']} with torch {here['torch']}")
        return 0
    return _apply(data["entries"])


def clear_tuned() -> None:
    """Forget every tuned entry in this process (the file is left alone)."""
    if hasattr(torch.ops.tilelab, "_tune_clear"):
        torch.ops.tilelab._tune_clear()


def tune(fn: Callable, *example_inputs, train: bool = False, path: Optional[str] = None,
         timer: Optional[Timer] = None, candidates: Optional[Callable[[Problem, list], list]] = None,
         save: bool = True) -> TuneReport:
    """Record the GEMM problems ``fn(*example_inputs)`` runs, time every kernel that can
    run each (and the dispatcher's rules-based pick, and torch's op), keep the fastest,
    apply the winners to this process's dispatcher and store them (``save``) in the
    tune file (merged with the entries already there for this GPU and torch).

    Args:
        fn: a module or a function whose GEMMs run through tilelab (e.g. after :func:`swap`).
        train: also record the backward's products.
        path: the tune file (default :func:`default_tune_file`).
        timer: ``timer(fn, label) -> ms`` (default: ``triton.testing.do_bench`` median, or
            CUDA events). Tests pass a fake one.
        candidates: ``candidates(problem, args) -> [config names]`` (default: every row the
            dispatcher says can run the problem here).
    """
    path = path or default_tune_file()
    timer = timer or _cuda_timer
    candidates = candidates or _candidates
    clear_tuned()  # the rules' pick is measured without earlier winners
    report = TuneReport(path=path)
    opfns = {name: getattr(torch.ops.tilelab, name).default for name in _OPS}
    for p in record(fn, *example_inputs, train=train):
        args = _inputs(p)
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        if device.type != "cuda" and candidates is _candidates:
            report.skipped.append((p.key, f"{device.type} tensors run the one CPU kernel"))
            continue
        kw = {"activation": p.activation} if p.op == "tiled_linear" else {}
        call = lambda v: (lambda: opfns[p.op](*args, variant=v, **kw))  # noqa: E731
        rule_kernel = ops.explain(*_product(p, args), **_epilogue(p, args)).kernel
        rule_ms = timer(call(None), "rules")
        best, best_ms = rule_kernel, rule_ms
        for name in candidates(p, args):
            ms = timer(call(name), name)
            if ms < best_ms:
                best, best_ms = name, ms
        torch_ms = timer(_torch_equivalent(p, args), "torch")
        report.entries.append(TuneEntry(p.key, p.op, best, best_ms, rule_kernel, rule_ms, torch_ms, p.count))
    new = {e.key: {"op": e.op, "kernel": e.kernel, "ms": e.ms, "rule_kernel": e.rule_kernel, "rule_ms": e.rule_ms,
                   "torch_ms": e.torch_ms} for e in report.entries}
    if save and new:
        here = _device_id()
        data = _read(path)
        old = data.get("entries", {}) if data.get("gpu") == here["gpu"] and data.get("torch") == here["torch"] else {}
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({**here, "entries": {**old, **new}}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    _apply(new)
    return report
