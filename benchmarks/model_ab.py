#!/usr/bin/env python3
"""Model A/B: a GPT-2-sized transformer with cuBLAS vs with tilelab, end to end.

The model is transformers' GPT2LMHeadModel built from a GPT2Config with random
weights (nothing is downloaded) when `transformers` is importable, else a
self-contained GPT-2-style block stack (nn.Linear, LayerNorm, GELU). The same
weights run twice on the same tokens:

  cublas   plain PyTorch (torch.mm/addmm/matmul -> cuBLAS; fp32 without TF32)
  tilelab  inside tilelab_torch.use_tiled(): GPT-2's Conv1D (torch.addmm), the
           tied lm_head (F.linear) and, with --attn eager, the attention
           matmuls run on tilelab's kernels; the self-contained model also has
           its nn.Linear swapped by swap_linear. The number of routed calls per
           forward is reported.

For each dtype (bf16, fp32) x batch x sequence x mode (fwd, fwd+bwd): tokens/s
of both (median of timed iterations), their ratio tilelab/cuBLAS (> 1 means
tilelab is faster), the max |logits difference| (absolute and relative to
max |logits|) and the loss difference; then a torch.profiler breakdown (top
ops by self device time) of one fwd+bwd step of both at the largest shape.

Examples:
    python benchmarks/model_ab.py                          # GPU default sweep
    python benchmarks/model_ab.py --batch 4 --seq 128 512 --out out/model_ab
    python benchmarks/model_ab.py --tiny                   # CPU-sized smoke run
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import tilelab_torch  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


# ------------------------------------------------------------------- models
class _Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.reshape(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class MiniGPT(nn.Module):
    """GPT-2-style decoder when transformers is absent; returns (logits, loss)."""

    def __init__(self, vocab, positions, d, layers, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.blocks = nn.ModuleList(_Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids, labels):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1))
        return logits, loss


def build(args, device, dtype):
    torch.manual_seed(0)
    if not args.no_transformers:
        try:
            from transformers import GPT2Config, GPT2LMHeadModel

            cfg = GPT2Config(vocab_size=args.vocab, n_positions=max(args.seq), n_embd=args.d_model,
                             n_layer=args.layers, n_head=args.heads, resid_pdrop=0.0, embd_pdrop=0.0,
                             attn_pdrop=0.0)
            try:
                cfg._attn_implementation = args.attn
            except Exception:  # noqa: BLE001
                pass
            m = GPT2LMHeadModel(cfg).to(device=device, dtype=dtype).eval()

            def run(ids):
                o = m(input_ids=ids, labels=ids)
                return o.logits, o.loss

            return m, run, "transformers.GPT2LMHeadModel"
        except ImportError:
            pass
    m = MiniGPT(args.vocab, max(args.seq), args.d_model, args.layers, args.heads).to(device=device, dtype=dtype)
    return m, (lambda ids: m(ids, ids)), "self-contained MiniGPT"


# ------------------------------------------------------------------ measure
def step(run, model, ids, mode):
    if mode == "fwd":
        with torch.no_grad():
            return run(ids)
    model.zero_grad(set_to_none=True)
    logits, loss = run(ids)
    loss.backward()
    return logits, loss


def profile_top(fn, device, top):
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    fn()
    with profile(activities=acts) as prof:
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
    attr = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    rows = sorted(prof.key_averages(), key=lambda e: getattr(e, attr, 0), reverse=True)
    total = sum(getattr(e, attr, 0) for e in rows) or 1
    return [{"op": e.key[:70], "calls": e.count, "self_ms": getattr(e, attr, 0) / 1e3,
             "pct": 100 * getattr(e, attr, 0) / total} for e in rows[:top]]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], choices=sorted(DTYPES))
    p.add_argument("--batch", nargs="+", type=int, default=[1, 4])
    p.add_argument("--seq", nargs="+", type=int, default=[128, 512])
    p.add_argument("--modes", nargs="+", default=["fwd", "fwdbwd"], choices=["fwd", "fwdbwd"])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--attn", default="eager", choices=["eager", "sdpa"],
                   help="GPT-2 attention: eager routes its matmuls to tilelab too; sdpa keeps torch's kernel")
    p.add_argument("--no-transformers", action="store_true", help="use the self-contained model")
    p.add_argument("--tiny", action="store_true", help="CPU-sized model and sweep (smoke test)")
    p.add_argument("--rep-ms", type=int, default=200, help="timing budget per measurement")
    p.add_argument("--profile-top", type=int, default=8, help="rows of the profiler breakdown (0: none)")
    p.add_argument("--out", help="directory for model_ab.json (model_ab.partial.json holds the rows done so far "
                                 "while it runs, and is removed at the end)")
    args = p.parse_args(argv)
    if args.tiny:
        args.layers, args.d_model, args.heads, args.vocab = 2, 64, 4, 512
        args.batch, args.seq = [2], [32]
    dev = args.device
    torch.set_float32_matmul_precision("highest")  # fp32 rows are IEEE fp32 on both sides

    rows, profiles, arch = [], {}, None
    for dkey in args.dtypes:
        dtype = DTYPES[dkey]
        model, run, arch = build(args, dev, dtype)
        swapped = 0
        # The self-contained model's nn.Linear become TiledLinear (sharing the
        # weights); inside use_tiled the cuBLAS side would be routed as well, so
        # the cuBLAS side runs a twin that keeps nn.Linear.
        if arch.startswith("self"):
            import copy

            base_model = copy.deepcopy(model)
            base_run = lambda ids, m=base_model: m(ids, ids)  # noqa: E731
            swapped = tilelab_torch.swap_linear(model)
        else:
            base_model, base_run = model, run
        for B in args.batch:
            for T in args.seq:
                ids = torch.randint(0, args.vocab, (B, T), device=dev)
                with torch.no_grad():
                    ref_logits, ref_loss = base_run(ids)
                    with tilelab_torch.use_tiled() as mode:
                        til_logits, til_loss = run(ids)
                diff = (til_logits.float() - ref_logits.float()).abs().max().item()
                scale = ref_logits.float().abs().max().item() or 1.0
                for mname in args.modes:
                    t_ref = common.bench(lambda: step(base_run, base_model, ids, mname), dev, rep_ms=args.rep_ms)

                    def til():
                        with tilelab_torch.use_tiled():
                            return step(run, model, ids, mname)

                    t_til = common.bench(til, dev, rep_ms=args.rep_ms)
                    rows.append({
                        "dtype": dkey, "batch": B, "seq": T, "mode": mname,
                        "cublas_ms": t_ref, "tilelab_ms": t_til,
                        "cublas_tok_s": B * T / t_ref * 1e3, "tilelab_tok_s": B * T / t_til * 1e3,
                        "ratio": t_ref / t_til,
                        "routed_per_fwd": mode.routed, "passed_per_fwd": mode.passed,
                        "routed_by": dict(mode.routed_by), "swapped_linear": swapped,
                        "max_logit_diff": diff, "rel_logit_diff": diff / scale,
                        "loss_cublas": float(ref_loss), "loss_tilelab": float(til_loss),
                        "loss_diff": abs(float(ref_loss) - float(til_loss)),
                    })
                    if args.out:  # partial results survive a time limit
                        common.write_json(os.path.join(args.out, "model_ab.partial.json"), rows)
                    print(f"{dkey} B={B} T={T} {mname}: cuBLAS {t_ref:.2f} ms, tilelab {t_til:.2f} ms, "
                          f"ratio {t_ref / t_til:.3f}, max|dlogits| {diff:.3g}", flush=True)
        if args.profile_top > 0:
            B, T = max(args.batch), max(args.seq)
            ids = torch.randint(0, args.vocab, (B, T), device=dev)

            def til_step():
                with tilelab_torch.use_tiled():
                    step(run, model, ids, "fwdbwd")

            profiles[dkey] = {
                "shape": f"B={B} T={T} fwd+bwd",
                "cublas": profile_top(lambda: step(base_run, base_model, ids, "fwdbwd"), dev, args.profile_top),
                "tilelab": profile_top(til_step, dev, args.profile_top),
            }
        del model, base_model
        if dev == "cuda":
            torch.cuda.empty_cache()

    meta = common.metadata(dev, "fp32 highest (no TF32)")
    meta.update({"model": arch, "layers": args.layers, "d_model": args.d_model, "heads": args.heads,
                 "vocab": args.vocab, "attn": args.attn, "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])})
    print(f"\n{arch}: {args.layers} layers, d={args.d_model}, heads={args.heads}, vocab={args.vocab}, "
          f"attn={args.attn} on {meta['device']}")
    for dkey, prof in profiles.items():
        for side in ("cublas", "tilelab"):
            print(f"\ntop ops, {dkey} {prof['shape']}, {side}:")
            common.print_table(prof[side], [("op", "op", ""), ("calls", "calls", "d"),
                                            ("self ms", "self_ms", ".2f"), ("%", "pct", ".1f")])
    print()
    common.print_table(rows, [
        ("dtype", "dtype", ""), ("B", "batch", "d"), ("T", "seq", "d"), ("mode", "mode", ""),
        ("cuBLAS tok/s", "cublas_tok_s", ".0f"), ("tilelab tok/s", "tilelab_tok_s", ".0f"),
        ("ratio", "ratio", ".3f"), ("routed", "routed_per_fwd", "d"),
        ("max|dlogit|", "max_logit_diff", ".3g"), ("rel", "rel_logit_diff", ".2g"), ("|dloss|", "loss_diff", ".3g"),
    ])
    if args.out:
        common.write_json(os.path.join(args.out, "model_ab.json"),
                          {"meta": meta, "rows": rows, "profiles": profiles})
        print(f"\nwrote {os.path.join(args.out, 'model_ab.json')}")
        partial = os.path.join(args.out, "model_ab.partial.json")
        if os.path.exists(partial):  # complete: the partial copy is no longer needed
            os.remove(partial)
    return 0


if __name__ == "__main__":
    sys.exit(main())
