"""tilelab_torch.swap / unswap on real model code: tiny GPT-2 and Llama from
transformers (Conv1D, tied weights, fused GELU/SiLU), timm-style MLPs, what is
left alone and why, the sample check, training, and the restore."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tilelab_torch
from tilelab_torch import SwapReport, TiledConv1D, TiledLinear, swap, swap_linear, unswap
from tilelab_torch.nn import FusedActivation

try:
    import transformers
except ImportError:  # in requirements-dev.txt; the tests without it still run
    transformers = None
needs_transformers = pytest.mark.skipif(transformers is None, reason="needs transformers (requirements-dev.txt)")

DTYPES = [torch.float32, torch.bfloat16]


def gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


def llama():
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=100, bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg)


def layers(fmt, names, n=2):
    return [fmt.format(i=i, name=name) for i in range(n) for name in names]


# What swap reports for each: the swapped modules (in model order) and the fused layers.
MODELS = {
    "gpt2": (gpt2, layers("transformer.h.{i}.{name}", ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"])
             + ["lm_head"], layers("transformer.h.{i}.{name}", ["mlp.c_fc"]), "gelu_tanh"),
    "llama": (llama, layers("model.layers.{i}.{name}", ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                          "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                                          "mlp.down_proj"]) + ["lm_head"],
              layers("model.layers.{i}.{name}", ["mlp.gate_proj"]), "silu"),
}


def make(kind, dtype=torch.float32):
    torch.manual_seed(0)
    model = MODELS[kind][0]()
    with torch.no_grad():  # transformers initialises biases to 0: make them count
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
    return model.to(dtype).eval()


def ids():
    return torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(1))


def rel_err(y, ref):
    return float((y.double() - ref).abs().max() / ref.abs().max())


@needs_transformers
@pytest.mark.parametrize("fuse", [False, True], ids=["plain", "fused"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", list(MODELS))
def test_transformers_swap_matches(kind, dtype, fuse):
    _, swapped, fused, act = MODELS[kind]
    model = make(kind, dtype)
    keys = list(model.state_dict())
    lm_head_weight = model.lm_head.weight
    with torch.no_grad():
        ref64 = copy.deepcopy(model).double()(ids()).logits
        torch_err = rel_err(model(ids()).logits, ref64)
    report = swap(model, fuse=fuse)
    assert report.swapped == swapped
    assert report.fused == ([(name, act) for name in fused] if fuse else [])
    assert report.left == []
    # Llama's gated MLPs: gate_proj and up_proj as one tiled_gated_linear (test_gated.py)
    assert report.gated == (layers("model.layers.{i}.{name}", ["mlp"]) if fuse and kind == "llama" else [])
    assert sum(isinstance(m, (TiledLinear, TiledConv1D)) for m in model.modules()) == len(swapped)
    assert sum(isinstance(m, FusedActivation) for m in model.modules()) == (len(fused) if fuse else 0)
    assert list(model.state_dict()) == keys
    assert model.lm_head.weight is lm_head_weight
    if kind == "gpt2":  # tied weights stay tied
        assert model.lm_head.weight is model.transformer.wte.weight
        assert isinstance(model.transformer.h[0].mlp.c_fc, TiledConv1D)
    with torch.no_grad():
        err = rel_err(model(ids()).logits, ref64)
    # As accurate as torch's own matmuls (the float64 model as the reference).
    assert err <= 2 * torch_err + (1e-6 if dtype == torch.float32 else 1e-3), (err, torch_err)


@needs_transformers
@pytest.mark.parametrize("kind", list(MODELS))
def test_training_step_matches(kind):
    ref, model = make(kind).train(), make(kind).train()
    report = swap(model)
    assert report.fused
    # SGD: the update is linear in the gradient (Adam's sign-like first steps would
    # magnify rounding-level differences in gradients that are ~0)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (ref, model)]
    for step in range(2):
        for m, opt in zip((ref, model), opts):
            opt.zero_grad()
            m(ids(), labels=ids()).loss.backward()
        grads = dict(ref.named_parameters())
        for name, p in model.named_parameters():
            torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-4, atol=1e-6,
                                       msg=lambda m: f"step {step}, {name}: {m}")
        for opt in opts:
            opt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


@needs_transformers
@pytest.mark.parametrize("kind", list(MODELS))
def test_unswap_restores_the_original_objects(kind):
    model = make(kind)
    before = dict(model.named_modules())
    with torch.no_grad():
        y0 = model(ids()).logits
    report = swap(model)
    assert dict(model.named_modules()).keys() == before.keys()
    assert unswap(model) == len(report.swapped) + len(report.fused) + len(report.gated)
    after = dict(model.named_modules())
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    with torch.no_grad():
        assert torch.equal(model(ids()).logits, y0)
    assert unswap(model) == 0
    # swap again after unswap; swapping twice changes nothing the second time
    assert swap(model).swapped == report.swapped
    again = swap(model)
    assert again.swapped == [] and again.fused == [] and again.left == []


@needs_transformers
def test_sample_check():
    model = make("gpt2", torch.bfloat16)
    before = dict(model.named_modules())
    report = swap(model, sample=ids())
    assert len(report.swapped) == 9
    unswap(model)
    # bf16 with the activation rounded once instead of twice: close, not equal
    with pytest.raises(RuntimeError, match=r"restored: output 0 .*max \|difference\| .* > atol \+ rtol"):
        swap(model, sample=(ids(),), rtol=0, atol=0)
    assert all(m is before[k] for k, m in model.named_modules())  # restored


def test_swap_linear_is_deprecated():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with pytest.warns(DeprecationWarning, match="swap"):
        assert swap_linear(model) == 2
    assert model[0].activation is None and isinstance(model[1], nn.ReLU)  # no fusion


# ------------------------------------------------------------- timm-style MLPs
class Mlp(nn.Module):
    """timm's Mlp: fc1 -> act -> drop1 -> norm -> fc2 -> drop2."""

    def __init__(self, act, d=16, h=48, drop=0.0, out_act=False):
        super().__init__()
        self.fc1, self.act, self.drop1 = nn.Linear(d, h), act, nn.Dropout(drop)
        self.norm, self.fc2, self.drop2 = nn.LayerNorm(h), nn.Linear(h, d), nn.Dropout(drop)
        self.out_act = out_act

    def forward(self, x):
        if self.out_act:  # not the pattern: the activation applied elsewhere
            return self.act(self.fc2(self.norm(self.fc1(x))))
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class GELU(QuickGELU):
    """Called GELU, computes QuickGELU: the probe tensor must catch it."""


class Model(nn.Module):
    def __init__(self, act, **kw):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.mlp = Mlp(act, **kw)

    def forward(self, x):
        return self.mlp(self.embed(x))


@pytest.mark.parametrize("act,name", [(nn.GELU(), "gelu"), (nn.GELU(approximate="tanh"), "gelu_tanh"),
                                      (nn.SiLU(), "silu"), (nn.ReLU(), "relu")], ids=lambda v: str(v))
def test_timm_like_mlp_fused(act, name):
    torch.manual_seed(0)
    model = Model(act, drop=0.1).train()  # dropout after the activation: fusable, stays where it is
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        ref = model.eval()(x)
    report = swap(model)
    assert report.swapped == ["embed", "mlp.fc1", "mlp.fc2"]
    assert report.fused == [("mlp.fc1", name)] and report.left == []
    assert model.mlp.fc1.activation == name and isinstance(model.mlp.act, FusedActivation)
    assert model.mlp.training is False  # the probes restore each module's mode
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)
    assert f"activation={name!r}" in repr(model.mlp.fc1) and "fused into fc1" in repr(model.mlp.act)
    assert "fused 1 activations" in str(report)


@pytest.mark.parametrize("act,kw,reason", [
    (QuickGELU(), {}, "unknown activation QuickGELU"),
    (GELU(), {}, "activation GELU does not compute 'gelu'"),
    (nn.PReLU(), {}, "unknown activation PReLU"),
    (nn.GELU(), {"out_act": True}, "changes the block's output"),
], ids=["unknown", "impostor", "prelu", "other-forward"])
def test_unknown_activation_left_alone(act, kw, reason):
    torch.manual_seed(0)
    model = Model(act, **kw).eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        ref = model(x)
    report = swap(model)
    assert report.swapped == ["embed", "mlp.fc1", "mlp.fc2"] and report.fused == []
    assert [name for name, _ in report.left] == ["mlp.act"] and reason in report.left[0][1]
    assert model.mlp.act is act and model.mlp.fc1.activation is None
    assert f"left mlp.act: {report.left[0][1]}" in str(report)
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)


def test_sequential_pairs_fused():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Dropout(0.0), nn.Linear(12, 12), nn.Tanh(),
                          nn.Linear(12, 4), nn.SiLU())
    x = torch.randn(7, 6)
    ref = model(x)
    report = swap(model)
    assert report.fused == [("0", "gelu"), ("5", "silu")] and report.left == []
    torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------- what is left alone
class LoRALinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


class Conv1D(nn.Module):
    """Named and shaped like transformers' Conv1D, computes something else."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf, self.weight, self.bias = nf, nn.Parameter(torch.randn(nx, nf)), nn.Parameter(torch.randn(nf))

    def forward(self, x):
        return x @ self.weight - self.bias


def test_left_alone_with_reasons():
    shared = nn.Linear(4, 4)
    model = nn.ModuleDict({
        "lora": LoRALinear(4, 4),
        "complex": nn.Linear(4, 4, dtype=torch.complex64),
        "attn": nn.MultiheadAttention(4, 2),
        "conv": Conv1D(3, 4),
        "a": nn.Sequential(shared),
        "b": nn.Sequential(shared),
    })
    report = swap(model)
    left = dict(report.left)
    assert "overrides nn.Linear.forward" in left["lora"]
    assert "dtype torch.complex64" in left["complex"]
    assert "out_proj" in left["attn.out_proj"]
    assert "does not compute x @ weight + bias" in left["conv"]
    assert report.swapped == ["a.0"]  # one module under two names: one replacement, still shared
    assert model["a"][0] is model["b"][0] and isinstance(model["a"][0], TiledLinear)
    assert model["a"][0].weight is shared.weight
    root = swap(nn.Linear(3, 3))
    assert root.swapped == [] and "root module" in root.left[0][1]
    with pytest.raises(TypeError, match="expected an nn.Module"):
        swap(lambda x: x)


@needs_transformers
def test_tiled_modules():
    with pytest.raises(ValueError, match=r"unknown activation 'tanh'; valid: 'relu', 'gelu'"):
        TiledLinear(4, 3, activation="tanh")
    lin = nn.Linear(5, 3)
    t = TiledLinear.from_linear(lin, activation="relu")
    x = torch.randn(2, 4, 5)
    torch.testing.assert_close(t(x), torch.relu(lin(x)), rtol=1e-5, atol=1e-5)
    assert list(t.state_dict()) == list(lin.state_dict())
    conv = transformers.pytorch_utils.Conv1D(6, 5)
    nn.init.normal_(conv.bias)
    c = TiledConv1D.from_conv1d(conv, activation="gelu_tanh")
    assert c.weight is conv.weight and c.nx == 5 and list(c.state_dict()) == list(conv.state_dict())
    torch.testing.assert_close(c(x), F.gelu(conv(x), approximate="tanh"), rtol=1e-5, atol=1e-5)
    assert tilelab_torch.tiled_linear is not None and isinstance(swap(nn.Sequential()), SwapReport)


# ------------------------------------------------------------------------ timm
def test_timm_vit():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2,
                              num_classes=10).eval()
    x = torch.randn(2, 3, 32, 32)
    keys = list(model.state_dict())
    report = swap(model, sample=x)
    assert report.swapped == layers("blocks.{i}.{name}", ["attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"]) + ["head"]
    assert report.fused == [(f"blocks.{i}.mlp.fc1", "gelu") for i in range(2)] and report.left == []
    assert list(model.state_dict()) == keys


def test_timm_norm_mlp():
    """timm's NormMlp (TinyViT: a norm before fc1) has its activation fused into fc1, the model's output
    unchanged."""
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("tiny_vit_5m_224", pretrained=False, num_classes=10).eval()
    x = torch.randn(1, 3, 224, 224)
    report = swap(model, sample=x)
    n = sum(type(m).__name__ == "NormMlp" for m in model.modules())
    assert n > 0 and len([f for f in report.fused if f[0].endswith("mlp.fc1")]) == n, report.fused
    assert report.left == []


def test_compile_swapped_model():
    """torch.compile(fullgraph=True) traces the swapped modules (fused activations included)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(approximate="tanh"), nn.Linear(64, 16), nn.SiLU())
    ref = copy.deepcopy(model)
    assert swap(model).fused == [("0", "gelu_tanh"), ("2", "silu")]
    f = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.randn(4, 16, requires_grad=True)
    torch.testing.assert_close(f(x), ref(x), rtol=1e-5, atol=1e-5)
    f(x).sum().backward()
    gx = x.grad.clone()
    x.grad = None
    ref(x).sum().backward()
    torch.testing.assert_close(gx, x.grad, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------ merged projections
class BertSelfAttention(nn.Module):
    """Named like transformers' BERT attention (MERGEABLE): query, key and value on one input."""

    def __init__(self, d=16, kv=8, bias=True, dtype=torch.float64):
        super().__init__()
        self.query = nn.Linear(d, d, bias=bias, dtype=dtype)
        self.key, self.value = nn.Linear(d, kv, bias=bias, dtype=dtype), nn.Linear(d, kv, bias=bias, dtype=dtype)

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)
        return q.sum(-1, keepdim=True) * k + v.exp()


class ProductCount(torch.utils._python_dispatch.TorchDispatchMode):
    """The tiled_linear calls below it, by output width (a tiled_gated_linear call: "N+N")."""

    def __init__(self):
        super().__init__()
        self.widths = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.tilelab.tiled_linear.default:
            self.widths.append(args[1].shape[0])
        elif func is torch.ops.tilelab.tiled_gated_linear.default:
            self.widths.append(f"{args[1].shape[0]}+{args[2].shape[0]}")
        return func(*args, **(kwargs or {}))


def merged_block(bias=True):
    torch.manual_seed(0)
    block = BertSelfAttention(bias=bias)
    ref = copy.deepcopy(block)
    report = swap(block)
    assert report.merged == [("query", "key", "value")] and report.left == []
    return block, ref


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_merged_projections_one_product(bias):
    block, ref = merged_block(bias)
    q, k, v = block.query, block.key, block.value
    assert q.merged is k.merged is v.merged and "merged=query+key+value" in repr(k)
    # one buffer: key's weight starts where query's ends, and so on
    assert k.weight.data_ptr() == q.weight.data_ptr() + q.weight.numel() * 8
    assert v.weight.data_ptr() == k.weight.data_ptr() + k.weight.numel() * 8
    if bias:
        assert v.bias.data_ptr() == k.bias.data_ptr() + 8 * 8
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    with ProductCount() as count:
        y = block(x)
    assert count.widths == [32]  # 16 + 8 + 8 in one call
    torch.testing.assert_close(y, ref(x))
    # another input in between, or the input modified: the call computes every member's output anew
    x2 = x + 1
    with ProductCount() as count, torch.no_grad():
        torch.testing.assert_close(q(x), ref.query(x))
        torch.testing.assert_close(k(x2), ref.key(x2))
        x.mul_(2)
        torch.testing.assert_close(v(x), ref.value(x))
        torch.testing.assert_close(k(x), ref.key(x))  # kept by the call before
    assert count.widths == [32, 32, 32]
    with ProductCount() as count, torch.no_grad():  # out of order, twice
        torch.testing.assert_close(v(x), ref.value(x))
        torch.testing.assert_close(v(x), ref.value(x))
        torch.testing.assert_close(q(x), ref.query(x))
    assert count.widths == [32, 32]
    # a kept output is not handed out in another grad mode
    with ProductCount() as count:
        with torch.no_grad():
            q(x)
        assert k(x.requires_grad_()).grad_fn is not None
    assert count.widths == [32, 32]


def test_merged_projections_gradients():
    block, ref = merged_block()
    x = torch.randn(4, 3, 16, dtype=torch.float64, requires_grad=True)
    block(x).square().sum().backward()
    gx = x.grad.clone()
    x.grad = None
    ref(x).square().sum().backward()
    torch.testing.assert_close(gx, x.grad)
    for (name, p), r in zip(block.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, r.grad, msg=lambda m: f"{name}: {m}")
    # the merged product itself: gradients and second derivatives of every input, as torch computes them
    params = [m.weight for m in (block.query, block.key, block.value)] + [m.bias for m in (block.query, block.key,
                                                                                          block.value)]
    wb = block.query.merged.weights()  # views of params' buffers: they see gradcheck's perturbations
    f = lambda x, *ps: tilelab_torch.nn._MergedProduct.apply(x, wb, None, None, 3, *ps)  # noqa: E731
    xs = torch.randn(5, 16, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(f, (xs, *params))
    torch.autograd.gradgradcheck(f, (xs, *params))
    # only some inputs needing a gradient: the others get none
    for b in (block, ref):
        b.zero_grad(set_to_none=True)
        b.key.weight.requires_grad_(False)
        b(xs.detach()).sum().backward()
    assert block.key.weight.grad is None and block.value.weight.grad is not None
    for (name, p), r in zip(block.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, r.grad, msg=lambda m: f"{name}: {m}")


def test_merged_projections_fall_back():
    block, ref = merged_block()
    x = torch.randn(3, 16, dtype=torch.float64)
    # weights no longer back to back (a copy of the model; .data replaced): each computes its own
    twin = copy.deepcopy(block)
    block.key.weight.data = block.key.weight.data.clone()
    for b in (block, twin):
        with ProductCount() as count, torch.no_grad():
            torch.testing.assert_close(b(x), ref(x))
        assert count.widths in ([16, 8, 8], [32]), count.widths
    with ProductCount() as count, torch.no_grad():
        block(x)
    assert count.widths == [16, 8, 8]
    # under torch.compile (fullgraph traces through: each member alone)
    torch._dynamo.reset()
    block2, ref2 = merged_block()
    f = torch.compile(block2, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(x), ref2(x))


def test_merged_projections_left_and_unswap():
    torch.manual_seed(0)
    block = BertSelfAttention(bias=True, dtype=torch.float32)
    block.value.bias = None
    report = swap(block)
    assert report.merged == [] and [n for n, _ in report.left] == ["query"]
    assert "having a bias" in report.left[0][1]
    block, ref = merged_block()
    buf = block.query.weight.data_ptr()
    params = list(block.parameters())
    assert unswap(block) == 3
    assert list(block.parameters()) == params  # the same Parameter objects, each in a buffer of its own again
    assert block.key.weight.data_ptr() != buf + 16 * 16 * 8 and type(block.key) is nn.Linear
    x = torch.randn(2, 16, dtype=torch.float64)
    torch.testing.assert_close(block(x), ref(x))
    assert "merged 1 groups" in str(swap(block))


# Causal LMs whose attention block is in MERGEABLE: (config, model) class names in transformers.
CAUSAL_LMS = {"llama": "Llama", "mistral": "Mistral", "mixtral": "Mixtral", "qwen2": "Qwen2", "qwen3": "Qwen3",
              "gemma": "Gemma", "gemma2": "Gemma2", "olmo2": "Olmo2", "granite": "Granite"}


@needs_transformers
@pytest.mark.parametrize("kind", [*CAUSAL_LMS, "bert"])
def test_transformers_projections_merged(kind):
    torch.manual_seed(0)
    if kind == "bert":
        cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                      vocab_size=100, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model, prefix, names = transformers.BertModel(cfg), "encoder.layer.{i}.attention.self.", ("query", "key",
                                                                                                  "value")
    else:
        name = CAUSAL_LMS[kind]
        cfg = getattr(transformers, f"{name}Config")(
            num_hidden_layers=2, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=100, bos_token_id=0, eos_token_id=0, pad_token_id=0)
        model = getattr(transformers, f"{name}ForCausalLM")(cfg)
        prefix, names = "model.layers.{i}.self_attn.", ("q_proj", "k_proj", "v_proj")
    model.eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
    out = (lambda m: m(ids()).last_hidden_state) if kind == "bert" else (lambda m: m(ids()).logits)
    with torch.no_grad():
        ref = out(model)
    report = swap(model, sample=ids())
    assert report.merged == [tuple(prefix.format(i=i) + n for n in names) for i in range(2)]
    with ProductCount() as count, torch.no_grad():
        torch.testing.assert_close(out(model), ref, rtol=1e-5, atol=1e-5)
    # the products' widths in call order: one merged q/k/v product a layer (q 64 + k 32 + v 32 wide), and
    # no projection of q, k or v alone (Mixtral's experts and router are not nn.Linear layers: attention only);
    # the gated MLPs' gate and up products as one tiled_gated_linear
    layer = {"bert": [96, 32, 64, 32], "mixtral": [128, 64]}.get(kind, [128, 64, "96+96", 64])
    assert count.widths == 2 * layer + ([32] if kind == "bert" else [100]), count.widths  # BERT's pooler, lm_head


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_merged_projections_on_device(device, dtype):
    """The merged product on the device's kernels (an odd token count, widths that are not tile multiples):
    each projection's output and every gradient as torch computes them with the projections apart."""
    torch.manual_seed(0)
    block = BertSelfAttention(d=200, kv=72, dtype=dtype).to(device)
    ref = copy.deepcopy(block)
    assert swap(block).merged == [("query", "key", "value")]
    names = ("query", "key", "value")
    x = torch.randn(2, 61, 200, device=device, dtype=dtype, requires_grad=True)
    gys = [torch.randn(2, 61, n, device=device, dtype=dtype) for n in (200, 72, 72)]
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    grads = []
    for b in (block, ref):
        with ProductCount() as count:
            ys = [getattr(b, n)(x) for n in names]
        assert count.widths == ([344] if b is block else [])
        sum((y.float() * g.float()).sum() for y, g in zip(ys, gys)).backward()
        grads.append([x.grad] + [p.grad for p in b.parameters()])
        x.grad = None
        if b is block:
            outs = ys
    for y, r in zip(outs, ys):
        torch.testing.assert_close(y, r, **tol)
    for g, r in zip(*grads):
        scale = float(r.abs().max())
        torch.testing.assert_close(g / scale, r / scale, **tol)


def test_merged_projections_adjacent_is_not_one_buffer():
    """Weights in separate buffers side by side in memory (as CUDA's caching allocator places them) are
    copied into one; weights already in one buffer, back to back, are used where they are."""
    torch.manual_seed(0)
    block = BertSelfAttention(d=4, kv=4)
    mem = bytearray(8 * 48)
    separate = [torch.frombuffer(mem, dtype=torch.float64, count=16, offset=128 * i).view(4, 4) for i in range(3)]
    assert separate[1].data_ptr() == separate[0].data_ptr() + 128  # adjacent addresses, three storages
    assert tilelab_torch.nn._back_to_back(separate) is None
    buf = torch.randn(48 + 12, dtype=torch.float64)
    for i, m in enumerate((block.query, block.key, block.value)):
        m.weight.data = buf[16 * i:16 * (i + 1)].view(4, 4)
        m.bias.data = buf[48 + 4 * i:48 + 4 * (i + 1)]
    assert tilelab_torch.nn._back_to_back([block.query.weight, block.key.weight, block.value.weight]) is not None
    ref = copy.deepcopy(block)
    assert swap(block).merged == [("query", "key", "value")]
    assert block.key.weight.data_ptr() == buf.data_ptr() + 16 * 8  # already one buffer: no copy
    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(block(x), ref(x))


def test_merged_projections_weights_modified_between_calls():
    """A kept output is not handed out once any merged parameter changed in place after it was computed."""
    block, ref = merged_block()
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        block.query(x)
        block.value.weight.add_(1.0)
        ref.value.weight.add_(1.0)
        with ProductCount() as count:
            torch.testing.assert_close(block.value(x), ref.value(x))
    assert count.widths == [32]


# More transformers architectures whose blocks swap knows (FUSABLE, MERGEABLE, GATED): config class, model
# class, config, and what swap(fuse=True) does to their two layers (fused activation, merged q/k/v, gated MLP).
_SMALL = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=2, vocab_size=100)
_ROPE = dict(n_embd=64, n_layer=2, n_head=4, vocab_size=100, rotary_dim=8, n_positions=64)
ARCHITECTURES = {
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", _SMALL, "gelu", 0, 0),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", _ROPE, "gelu_tanh", 2, 0),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM", dict(_ROPE, n_ctx=64), "gelu_tanh", 0, 0),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", dict(hidden_size=64, num_layers=2, num_heads=4, vocab_size=100,
                                                          attention_types=[[["global", "local"], 1]],
                                                          max_position_embeddings=64), "gelu_tanh", 2, 0),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=100,
                                                                      n_positions=64), "gelu_tanh", 0, 0),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", dict(_SMALL, num_key_value_heads=2), "gelu_tanh", 2, 0),
    "phi": ("PhiConfig", "PhiForCausalLM", _SMALL, "gelu_tanh", 2, 0),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(hidden_size=64, ffn_dim=128, num_attention_heads=4, num_hidden_layers=2,
                                                 vocab_size=100, word_embed_proj_dim=64), None, 2, 0),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(_SMALL, num_key_value_heads=2), "silu", 2, 2),
    "cohere": ("CohereConfig", "CohereForCausalLM", dict(_SMALL, num_key_value_heads=2), "silu", 2, 2),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", dict(_SMALL, num_key_value_heads=2), "silu", 2, 2),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", dict(_SMALL, pad_token_id=1), "gelu", 2, 0),
    "electra": ("ElectraConfig", "ElectraForMaskedLM", dict(_SMALL, embedding_size=64), "gelu", 2, 0),
    "deberta_v2": ("DebertaV2Config", "DebertaV2ForMaskedLM", _SMALL, "gelu", 0, 0),
    "t5": ("T5Config", "T5ForConditionalGeneration", dict(d_model=64, d_ff=128, num_heads=4, num_layers=2,
                                                          vocab_size=100, d_kv=16), "relu", 0, 0),
    "t5_gated": ("T5Config", "T5ForConditionalGeneration", dict(d_model=64, d_ff=128, num_heads=4, num_layers=2,
                                                                vocab_size=100, d_kv=16,
                                                                feed_forward_proj="gated-gelu"), "gelu_tanh", 0, 0),
    "clip_text": ("CLIPTextConfig", "CLIPTextModel", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                                          num_hidden_layers=2, vocab_size=100, hidden_act="gelu"),
                  "gelu", 2, 0),
    # gated MLPs with one gate-and-up layer (GATED_MERGED): down(up * act(gate)), gate, up = gate_up(x).chunk(2, -1)
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(_SMALL, num_key_value_heads=2, pad_token_id=0), None, 0, 2),
    "glm": ("GlmConfig", "GlmForCausalLM", dict(_SMALL, num_key_value_heads=2, pad_token_id=0), None, 0, 2),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", dict(_SMALL, num_key_value_heads=2, pad_token_id=0), None, 0, 2),
}


@needs_transformers
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_more_transformers_architectures(arch):
    """swap(fuse=True) on each architecture's tiny model (random weights): the activations it fuses, the q/k/v it
    merges and the gated MLPs it runs as one product, with the logits and every gradient as the untouched model
    computes them (fp32)."""
    cfg_name, model_name, cfg_kw, act, merged, gated = ARCHITECTURES[arch]
    if not hasattr(transformers, cfg_name) or not hasattr(transformers, model_name):
        pytest.skip(f"this transformers ({transformers.__version__}) has no {model_name}")
    torch.manual_seed(0)
    ref = getattr(transformers, model_name)(getattr(transformers, cfg_name)(**cfg_kw)).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
    model = copy.deepcopy(ref)
    tokens = torch.randint(2, 100, (2, 12), generator=torch.Generator().manual_seed(1))
    inputs = dict(input_ids=tokens, **({"decoder_input_ids": tokens[:, :5]} if arch.startswith("t5") else {}))
    out = (lambda m: m(**inputs).last_hidden_state) if arch == "clip_text" else (lambda m: m(**inputs).logits)
    report = swap(model, sample=inputs)
    layers_with_mlp = 4 if arch.startswith("t5") else 2  # T5: the encoder's and the decoder's blocks
    assert [a for _, a in report.fused] == ([act] * layers_with_mlp if act else []), report.fused
    assert len(report.merged) == merged and len(report.gated) == gated
    assert report.left == []
    for m in (ref, model):
        out(m).float().pow(2).mean().backward()
    torch.testing.assert_close(out(model), out(ref), rtol=1e-5, atol=1e-5)
    grads = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        g = grads[name].grad
        if g is None:
            assert p.grad is None, name
            continue
        # an attention key bias has no gradient (softmax ignores a shift of a query's logits): rounding only
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6 * (1 + float(g.abs().max())) + 1e-8,
                                   msg=lambda msg: f"{name}: {msg}")



class OpNames(torch.utils._python_dispatch.TorchDispatchMode):
    """The names of the ops dispatched below it (below autograd: what the kernels run)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.name())
        return func(*args, **(kwargs or {}))


class Phi3StyleMLP(nn.Module):
    """transformers' Phi3MLP, by its class name: one gate-and-up layer, its halves gated."""

    def __init__(self, d=16, ff=24, act=None, bias=False):
        super().__init__()
        self.gate_up_proj, self.down_proj = nn.Linear(d, 2 * ff, bias=bias), nn.Linear(ff, d, bias=False)
        self.activation_fn = act if act is not None else nn.SiLU()

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(up * self.activation_fn(gate))


Phi3StyleMLP.__name__ = "Phi3MLP"


def test_merged_gate_and_up_as_one_gated_product():
    """Without a gradient to record, the two halves of gate_up_proj's weight run as one tiled_gated_linear;
    with one, the block's own ops: its output, gradients and unswap as the untouched block's."""
    torch.manual_seed(0)
    model = nn.Sequential(Phi3StyleMLP())
    ref = copy.deepcopy(model)
    report = swap(model)
    assert report.gated == ["0"] and report.fused == [] and report.left == []
    block = model[0]
    assert isinstance(block, tilelab_torch.nn.TiledMergedGatedMLP) and block.activation == "silu"
    assert list(model.state_dict()) == list(ref.state_dict())
    x = torch.randn(3, 5, 16)
    with ProductCount() as count, torch.no_grad():
        torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-6)
    assert count.widths == ["24+24", 16]  # one gated product on the halves, then down_proj
    xg = x.clone().requires_grad_()
    with OpNames() as ops:
        y = model(xg)
    # recording a gradient: the block's own products (gate_up_proj's 48 columns, then down_proj), no gated one
    assert [n for n in ops.names if n.startswith("tilelab::")] == ["tilelab::tiled_mm"] * 2, ops.names
    y.square().sum().backward()
    ref(x.clone().requires_grad_()).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    assert unswap(model) == 3 and type(model[0]).__name__ == "Phi3MLP"  # the block and its two linear layers
    assert isinstance(model[0].gate_up_proj, nn.Linear) and not isinstance(model[0].gate_up_proj, TiledLinear)


@pytest.mark.parametrize("case", ["bias", "odd", "activation"])
def test_merged_gate_and_up_left_with_a_reason(case):
    """A gate-and-up layer with a bias, an odd width (no two halves) or an activation the kernels lack stays
    as it was, with the reason in `left`."""
    block = {"bias": lambda: Phi3StyleMLP(bias=True), "odd": lambda: Phi3StyleMLP(ff=24),
             "activation": lambda: Phi3StyleMLP(act=nn.Tanh())}[case]()
    if case == "odd":
        block.gate_up_proj = nn.Linear(16, 47, bias=False)
    report = swap(nn.Sequential(block))
    assert report.gated == []
    why = dict(report.left)["0"]
    assert {"bias": "has a bias", "odd": "odd number of outputs", "activation": "unknown activation Tanh"}[case] in why


@pytest.mark.gpu
def test_merged_gate_and_up_on_gpu():
    """On the GPU (bf16): the halves of gate_up_proj's weight (the second a row view at an offset) run as one
    tiled_gated_linear, the fused kernel where the device has it (an H100/H200 and an sm_90a build), with the
    untouched block's output within bf16, at a row count past the swap's probe (400 rows: 128-row tiles)."""
    torch.manual_seed(0)
    model = nn.Sequential(Phi3StyleMLP(d=256, ff=512)).to("cuda", torch.bfloat16)
    ref = copy.deepcopy(model)
    assert swap(model).gated == ["0"]
    w = model[0].gate_up_proj.weight
    x = torch.randn(4, 100, 256, device="cuda", dtype=torch.bfloat16)
    probe = torch.empty(128, 64, device="cuda", dtype=torch.bfloat16)
    fused_here = tilelab_torch.explain_gated(probe, probe, probe).kernel != "composed"
    assert (tilelab_torch.explain_gated(x, w[:512], w[512:]).kernel != "composed") == fused_here
    with torch.no_grad():
        y, want = model(x), ref(x)
    torch.testing.assert_close(y.float(), want.float(), rtol=3e-2, atol=3e-2)
