"""The dispatcher's rules (csrc/cuda/chooser.cpp) on described GPUs, without one:
tilelab_torch.explain_described runs the same selection code as the ops on CPU
tensors that describe the problem, for a compute capability and SM count. Each
case is a rule of the README's "How the dispatcher chooses"."""
import pytest
import torch

import tilelab_torch
from conftest import TOL, fresh_seed
from tilelab_torch import explain_described

pytestmark = pytest.mark.skipif(not tilelab_torch.built_with_cuda(),
                                reason="a CPU-only build has no CUDA dispatcher")

H200 = dict(sm=90, num_sms=132)
H100 = dict(H200, mem_gbps=3352)  # its DRAM bandwidth in the estimate
A100 = dict(sm=80, num_sms=108)
BF16 = torch.bfloat16


def mm(M, K, N, dtype=BF16, batch=None):
    """Row-major operands of a (batch of) M x K times K x N product (torch.empty: no data)."""
    pre = (batch,) if batch else ()
    return torch.empty(*pre, M, K, dtype=dtype), torch.empty(*pre, K, N, dtype=dtype)


def linear(M, K, N, dtype=BF16):
    """F.linear's operands: x (M, K) and W.t() for W (N, K), both k-contiguous."""
    return torch.empty(M, K, dtype=dtype), torch.empty(N, K, dtype=dtype).t()


def test_explain_takes_the_epilogue():
    """explain_described with tiled_addmm's / tiled_linear's epilogue: the details name the bias (the dimensions
    it varies along) and the activation the rules saw; a bad one is refused as the ops refuse it."""
    x, wt = linear(16, 8192, 8192)
    e = explain_described(x, wt, bias=torch.empty(8192, dtype=BF16), activation="gelu", **H200)
    assert (e.details["bias"], e.details["activation"]) == ("n", "gelu") and "8192 + bias(n) + gelu" in str(e), e
    bare = explain_described(x, wt, **H200)
    assert (bare.details["bias"], bare.details["activation"]) == (None, None) and "bias" not in str(bare), bare
    for shape, varies in (((16, 1), "m"), ((16, 8192), "mn"), ((), "scalar"), ((1, 8192), "n")):
        assert explain_described(x, wt, bias=torch.empty(shape, dtype=BF16), **H200).details["bias"] == varies
    # One row: its bias, however shaped, is one value a column (a size-1 dimension's stride is 0), so the hopper
    # rows' TMA-store epilogue takes it; one column likewise.
    x1, wt1 = linear(1, 8192, 8192)
    for shape in ((8192,), (1, 8192)):
        assert explain_described(x1, wt1, bias=torch.empty(shape, dtype=BF16), **H200).details["bias"] == "n"
    assert explain_described(*linear(16, 64, 1), bias=torch.empty(16, 1, dtype=BF16), **H200).details["bias"] == "m"
    with pytest.raises(RuntimeError, match="does not broadcast"):
        explain_described(x, wt, bias=torch.empty(8191, dtype=BF16), **H200)
    with pytest.raises(RuntimeError, match="bias must have the dtype"):
        explain_described(x, wt, bias=torch.empty(8192), **H200)
    with pytest.raises(RuntimeError, match="unknown activation 'tanh'"):
        explain_described(x, wt, activation="tanh", **H200)
    with pytest.raises(RuntimeError, match="tiled_bmm takes neither"):
        explain_described(*mm(64, 64, 64, batch=2), bias=torch.empty(64, dtype=BF16), **H200)


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N", [(12480, 768, 384), (20000, 1024, 128), (12480, 3072, 384)])
def test_pingpong_for_projection_k(operands, M, K, N):
    """Half precision, K of 8..48 steps of 64, a wave of 128x128 tiles and an N that 128x256
    tiles would cover with more than 25% waste: ping-pong."""
    e = explain_described(*operands(M, K, N), **H200)
    assert e.kernel == "hopper_pingpong_128x128x64", e
    assert "ping-pong" in e.reason and e.details["split_k"] == 1, e


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
def test_pingpong_for_a_mostly_idle_256_wave(operands):
    """ViT-B/16 at batch 8 (1576 tokens), fc1's dX (N = 3072, K = 768, B row-major): 156 tiles of
    128x256 are 1.18 waves on 132 SMs, 312 of 128x128 need 384 columns an SM against 512: ping-pong
    (x @ W.t() there takes 128x160 tiles: the next test)."""
    if operands is mm:
        e = explain_described(*operands(1576, 768, 3072), **H200)
        assert e.kernel == "hopper_pingpong_128x128x64" and "mostly idle" in e.reason, e
        assert "384 columns an SM with 128x128 vs 512" in e.reason, e
    # Equal columns either way (234 tiles of 128x128, 117 of 128x256), one wave of 128x256 over 12 k-steps:
    # ping-pong, by the one-short-wave rule (the next test).
    e = explain_described(*operands(1576, 768, 2304), **H200)
    assert e.kernel == "hopper_pingpong_128x128x64" and "at most one wave" in e.reason, e
    # 3136 tokens into 3072 columns: 600 tiles of 128x128, over 4 waves: ping-pong in either layout (the
    # several-waves rule: test_pingpong_for_waves_of_short_k).
    e = explain_described(*operands(3136, 768, 3072), **H100)
    assert e.kernel == "hopper_pingpong_128x128x64" and "at least 4 waves" in e.reason, e
    # 1576 tokens into 6144 columns over K = 2048 (624 tiles of 128x128): the same rule (H200, W cold: 61.1 us
    # against 67.8 on 128x256 tiles).
    e = explain_described(*operands(1576, 2048, 6144), **H100)
    assert e.kernel == "hopper_pingpong_128x128x64" and "at least 4 waves" in e.reason, e


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N", [(4096, 768, 3072), (12608, 768, 2304), (12608, 768, 3072), (4096, 2048, 5632),
                                   (4096, 2048, 32000), (4096, 2048, 14336), (8192, 1024, 4096)])
def test_pingpong_for_waves_of_short_k(operands, M, K, N):
    """At least 4 waves of 128x128 tiles over 8 to 32 k-steps into more than 2048 columns (GPT-2's c_fc at 4096
    tokens, ViT-B/16's qkv at batch 64, Llama's MLP and vocabulary at 4096 tokens): ping-pong, unsplit."""
    e = explain_described(*operands(M, K, N), **H200)
    assert e.kernel == "hopper_pingpong_128x128x64" and "at least 4 waves" in e.reason, e
    assert e.details["split_k"] == 1, e


@pytest.mark.parametrize("M,K,N,kernel", [
    (4096, 2048, 2048, "hopper_128x256x64"),  # 2048 columns: a tie, 128x256 keeps it
    (4096, 5632, 2048, "hopper_128x256x64"),  # 88 k-steps
    (12608, 3072, 768, "hopper_m192_192x192x64"),  # 768 columns
    (1576, 768, 3072, "hopper_128x160x64"),  # 312 tiles of 128x128: under 4 waves
    (4096, 256, 4096, "hopper_128x256x64"),  # 4 k-steps
])
def test_waves_of_short_k_rule_bounds(M, K, N, kernel):
    """Past the several-waves rule's bounds the other rules keep the product."""
    e = explain_described(*linear(M, K, N), **H200)
    assert "at least 4 waves" not in e.reason and e.kernel == kernel, e
    # C's rows not 16-byte aligned (GPT-2's vocabulary, N = 50257): not the several-waves rule.
    assert "at least 4 waves" not in explain_described(*linear(4096, 768, 50257), **H200).reason


def weight_grad(M, K, N, dtype=BF16):
    """dW = dY^T @ X's operands: dY^T (M, K) a transposed view of dY (K, M), X (K, N) row-major."""
    return torch.empty(K, M, dtype=dtype).t(), torch.empty(K, N, dtype=dtype)


@pytest.mark.parametrize("operands,M,K,N,gpu", [
    (linear, 1576, 768, 2304, H200),  # ViT-B/16's qkv at batch 8: 117 tiles of 128x256
    (weight_grad, 2048, 128, 2048, H200),  # dW of 128 tokens through a 2048 x 2048 weight: 2 k-steps
    (weight_grad, 4096, 64, 1024, H100),  # dW of a 64-row decode batch: 1 k-step
    (mm, 4096, 768, 768, dict(sm=90, num_sms=114)),  # 96 tiles of 128x256 on 114 SMs (the 128x192 rule needs 132)
])
def test_pingpong_for_one_short_wave_of_256(operands, M, K, N, gpu):
    """At most one wave of 128x256 tiles over at most 16 k-steps, and a wave of 128x128: each 128x256 block's
    epilogue has nothing to hide under, ping-pong runs one warpgroup's under the other's MMAs."""
    e = explain_described(*operands(M, K, N), **gpu)
    assert e.kernel == "hopper_pingpong_128x128x64" and "at most one wave of 128x256" in e.reason, e
    assert e.details["split_k"] == 1, e


@pytest.mark.parametrize("operands,M,K,N", [
    (linear, 1576, 1088, 2304),  # 17 k-steps
    (weight_grad, 2048, 128, 5632),  # 352 tiles of 128x256: more than a wave
    (linear, 1024, 768, 1024),  # 64 tiles of 128x128: not a wave
])
def test_one_short_wave_rule_bounds(operands, M, K, N):
    """Past the rule's bounds (a longer K, more than a wave of 128x256, less than a wave of 128x128) other rules
    keep the product."""
    e = explain_described(*operands(M, K, N), **H200)
    assert "at most one wave of 128x256" not in e.reason, e
    # The H200's 128x192 rule comes first where its last wave is fuller (GPT-2's attention projection).
    assert explain_described(*mm(4096, 768, 768), **H200).kernel == "hopper_128x192x64"


@pytest.mark.parametrize("M,K,N,cols", [(1576, 768, 3072, 320), (1024, 768, 2304, 160)])
def test_128x160_for_x_wt(M, K, N, cols):
    """x @ W.t() over a short K where 128x160 tiles need at most 90% of the columns an SM of every
    other 128-row tiling (ViT-B/16's fc1 at batch 8: 260 tiles in 2 rounds, 320 columns against 384)."""
    e = explain_described(*linear(M, K, N), **H100)
    assert e.kernel == "hopper_128x160x64" and f"{cols} columns an SM" in e.reason, e
    # Not into 768 columns (where it lost to 128x192), not for a row-major B (the weight gradients' note).
    assert explain_described(*linear(3136, 768, 768), **H100).kernel != "hopper_128x160x64"
    assert explain_described(*mm(M, K, N), **H100).kernel != "hopper_128x160x64"


@pytest.mark.parametrize("M", [17, 64, 128, 512, 1024, 1025, 4096])
def test_pingpong_into_unaligned_rows(M):
    """Up to 1024 rows of x @ W.t() over a short K into rows that are not 16-byte aligned (GPT-2's lm_head,
    N = 50257): ping-pong, whose warpgroups take turns between MMAs and the stores through shared memory. x @ B,
    a long K and more rows take the row an aligned output (N = 50256) would, except the several-waves ping-pong
    rule's, which wants C's rows aligned (GPT-2's 4096-token lm_head lost on ping-pong with bias or GELU)."""
    for gpu in (H100, H200):
        if M <= 1024:
            e = explain_described(*linear(M, 768, 50257), **gpu)
            assert e.kernel == "hopper_pingpong_128x128x64" and "not 16-byte aligned" in e.reason, e
        for operands, K in ((mm, 768), (linear, 4096)) + (((linear, 768),) if M > 1024 else ()):
            e = explain_described(*operands(M, K, 50257), **gpu)
            aligned = explain_described(*operands(M, K, 50256), **gpu)
            if "at least 4 waves" in aligned.reason:
                assert "at least 4 waves" not in e.reason, e
            else:
                assert e.kernel == aligned.kernel, e
            assert "not 16-byte aligned" not in e.reason, e


def test_192x192_counts_the_rows_it_computes():
    """A 192-row tile over 128 rows computes 64 rows of zeros: at 128 tokens a wave of 128-row tiles
    wins (128x768x50256: 262 tiles of 192x192 in 2 rounds against 2 rounds of 128x192)."""
    assert explain_described(*linear(128, 768, 50256), **H100).kernel != "hopper_m192_192x192x64"


def test_pingpong_for_attention_context():
    """Attention's context product (N = 64, K = 512): ping-pong."""
    assert explain_described(*mm(512, 512, 64, batch=96), **H200).kernel == "hopper_pingpong_128x128x64"


@pytest.mark.parametrize("M,K,N,batch", [(4096, 4096, 4096, None), (4096, 14336, 4096, None),
                                         (4096, 3136, 3072, None),  # 49 steps of K
                                         (4096, 2048, 2048, None),  # into 2048 columns
                                         (512, 64, 512, 96), (2048, 128, 2048, 32)])
def test_cooperative_where_256_fits(M, K, N, batch):
    """Wherever 128x256 tiles fit N and fill half a wave (projections, long K, attention's
    scores) and the several-waves ping-pong rule (8 to 32 k-steps into more than 2048 columns) does
    not take the product: the cooperative 128x256 row."""
    e = explain_described(*mm(M, K, N, batch=batch), **H200)
    assert e.kernel == "hopper_128x256x64", e


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N", [(4096, 3072, 768), (4096, 768, 768)])
def test_128x192_fills_the_last_wave(operands, M, K, N):
    """Where 128x192 tiles need at most 90% of the rounds x columns an SM of both other tilings:
    N = 768 at M = 4096 is 128 tiles (one round of 192 columns) against 192 of 128x128 (two rounds
    of 128) and 96 of 128x256 (one round of 256)."""
    e = explain_described(*operands(M, K, N), **H200)
    assert e.kernel == "hopper_128x192x64", e
    assert "last wave" in e.reason, e
    # fp32 under TF32 has no 192-wide row; 108 SMs (4096 x 768: 2 rounds of 192 too) keeps the others.
    assert explain_described(*mm(M, K, N, torch.float32), **H200).kernel != "hopper_128x192x64"
    assert explain_described(*mm(4096, 3072, 768), sm=90, num_sms=108).kernel != "hopper_128x192x64"


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
def test_192x192_fills_whole_waves(operands):
    """4096 tokens into 5632 columns over K = 4096 (Llama's gate and up projections at K = 2048 take the
    several-waves ping-pong rule): 660 tiles of 192x192 are 5 rounds on 132 SMs, 184320 outputs an SM,
    against 704 of 128x256 in 6 rounds (196608): the three-warpgroup row."""
    e = explain_described(*operands(4096, 4096, 5632), **H200)
    assert e.kernel == "hopper_m192_192x192x64" and "184320 outputs an SM, against 196608" in e.reason, e
    assert "192x192 tiles in 5 round(s)" in e.reason, e


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N,outputs", [(12608, 3072, 2304, 221184), (12608, 3072, 3072, 294912),
                                           (12608, 3072, 768, 73728), (12608, 768, 768, 73728),
                                           (4096, 3072, 2304, 73728), (12608, 768, 384, 36864)])
def test_192x192_at_equal_or_fewer_outputs(operands, M, K, N, outputs):
    """ViT-B/16 at batch 64 (12608 tokens: fc2 and proj, and their dX) and wider outputs over a K of 48
    k-steps: 192x192 tiles need no more outputs an SM than the 128-row tilings (6, 8, 2 and 2 rounds),
    and the rule comes before the 128x192 and ping-pong rules (12608 x 384: one round of 192x192 tiles,
    36864 outputs an SM, against 49152). (Over 8 to 32 k-steps into more than 2048 columns, ViT's qkv and
    fc1, the several-waves ping-pong rule comes first.)"""
    e = explain_described(*operands(M, K, N), **H200)
    assert e.kernel == "hopper_m192_192x192x64" and f"{outputs} outputs an SM" in e.reason, e


def test_192x192_not_where_it_needs_more():
    """Where a wave of 192x192 tiles needs more outputs an SM (4096^3: 484 tiles in 4 rounds,
    147456 against 131072), fewer than a wave of them (4096 x 768: 88 tiles) or fp32, the
    128-row rules keep the product; one tile fewer a column (12480 rows: 130 tiles) too."""
    assert explain_described(*mm(4096, 4096, 4096), **H200).kernel == "hopper_128x256x64"
    assert explain_described(*mm(4096, 3072, 768), **H200).kernel == "hopper_128x192x64"
    assert explain_described(*mm(12480, 768, 384), **H200).kernel == "hopper_pingpong_128x128x64"
    assert explain_described(*mm(4096, 2048, 5632, torch.float32), **H200).kernel != "hopper_m192_192x192x64"
    assert explain_described(*mm(4096, 2048, 5632), **A100).kernel != "hopper_m192_192x192x64"


@pytest.mark.parametrize("M,K,N", [(3072, 12608, 768), (768, 12608, 3072)])
def test_192x192_in_two_slices_for_long_k_weight_gradients(M, K, N):
    """ViT-B/16's MLP weight gradients at batch 64 (3072 x 768 over 12608 tokens): 64 tiles of 192x192
    in 2 slices of K are a wave (128 blocks on 132 SMs) where 128x192 tiles leave a quarter idle; the
    kernel adds the two slices (a second pass would move the whole output twice)."""
    e = explain_described(*weight_grad(M, K, N), **H200)
    assert e.kernel == "hopper_m192_192x192x64" and e.details["split_k"] == 2, e
    assert "in 2 slices of K on 132 SMs" in e.reason and "added in the kernel" in e.reason, e


def test_split_reduce_hook(high):
    """_set_split_reduce forces where the slices are added (the reason and details["split_reduce"] say which),
    and rejects other values; None goes back to the cost: the kernel's way through global memory for the MLP weight
    gradient's 2 slices of 192x192, a decode product's 2 slices of 64x64 and a 128-token product's 4
    (a 64x64 tile's 16 KB of sums hands over at ~0.25 us a slice), the second pass for 2 slices of
    64x128 TF32 tiles holding 16 rows (tiles less than half full). "kernel" takes the second pass where
    the kernel cannot add the slices: more blocks than one wave."""
    dw = weight_grad(3072, 12608, 768)
    decode = linear(64, 14336, 4096)
    assert "added in the kernel in a fixed order" in explain_described(*dw, **H200).reason
    e = explain_described(*decode, **H200)
    assert e.kernel == "hopper_m64_64x64x64" and e.details["split_k"] == 2, e
    assert "added in the kernel in a fixed order" in e.reason, e
    e = explain_described(*linear(128, 3072, 768), **H200)
    assert e.kernel == "hopper_m64_64x64x64" and e.details["split_k"] == 4, e
    assert "added in the kernel in a fixed order" in e.reason and " split-K x4 (kernel) " in str(e), e
    for how, says in (("pass", "reduced by a second pass"), ("kernel", "added in the kernel in a fixed order")):
        torch.ops.tilelab._set_split_reduce(how)
        try:
            for e in (explain_described(*dw, **H200), explain_described(*decode, **H200)):
                assert says in e.reason and e.details["split_reduce"] == how, (how, e)
        finally:
            torch.ops.tilelab._set_split_reduce(None)
    assert explain_described(*linear(4096, 4096, 4096), **H200).details["split_reduce"] is None  # unsplit
    k_heavy = linear(64, 65536, 64)  # one 64x64 tile, 1024 k-steps
    torch.ops.tilelab._set_split_reduce("kernel")
    try:
        # 205 slices of 5 k-steps: more blocks than SMs; 128 of 8: one wave.
        for splits, says in ((205, "reduced by a second pass"), (128, "added in the kernel in a fixed order")):
            torch.ops.tilelab._set_split_k(splits)
            e = explain_described(*k_heavy, variant="hopper_m64_64x64x64", **H200)
            assert e.details["split_k"] == splits and says in e.reason, (splits, e)
    finally:
        torch.ops.tilelab._set_split_reduce(None)
        torch.ops.tilelab._set_split_k(None)
    for rows, says in ((16, "reduced by a second pass"), (128, "added in the kernel in a fixed order")):
        e = explain_described(*linear(rows, 4096, 4096, torch.float32), **H100)  # TF32: the `high` fixture
        assert e.kernel == "hopper_tf32_m64_64x128x32" and e.details["split_k"] == 2, (rows, e)
        assert says in e.reason, (rows, e)
    for how in ("atomics", "cluster"):
        with pytest.raises(RuntimeError, match="must be 'kernel', 'pass' or None"):
            torch.ops.tilelab._set_split_reduce(how)


def test_192x192_in_two_slices_not_elsewhere():
    """Two slices that leave SMs idle (ViT-B's qkv, 2304 x 768: 96 blocks), short slices (GPT-2's MLP
    at 4096 tokens: 32 k-steps each), or tiles that are not whole (3000 x 768) keep the other rules."""
    for M, K, N in [(2304, 12608, 768), (3072, 4096, 768), (768, 4096, 3072), (3000, 12608, 768)]:
        e = explain_described(*weight_grad(M, K, N), **H200)
        assert e.kernel != "hopper_m192_192x192x64", (M, K, N, e)
    assert explain_described(*weight_grad(768, 12608, 768), **H200).kernel == "hopper_128x128x64"


@pytest.mark.parametrize("M,K,N", [(3072, 4096, 768), (768, 4096, 3072)])
def test_128x160_left_to_tune(M, K, N):
    """Weight gradients of GPT-2's MLP (3072 x 768 over 4096 tokens): 128x160 is faster than 128x192 on
    an H200 and slower on an H100 (ViT-B's, over 12608 tokens), which a rule cannot tell apart (sm 90,
    132 SMs each): no rule picks it, 128x192's fuller last wave does; variant= still runs it."""
    e = explain_described(*weight_grad(M, K, N), **H200)
    assert e.kernel == "hopper_128x192x64" and "last wave" in e.reason, e
    forced = explain_described(*weight_grad(M, K, N), **H200, variant="hopper_128x160x64")
    assert forced.kernel == "hopper_128x160x64", forced
    # 2304 x 768 (ViT-B's qkv weight gradient): 108 tiles of 128x128, one round of 128 columns: ping-pong
    # (test_pingpong_for_weight_gradients_of_a_wave).
    assert explain_described(*weight_grad(2304, 12608, 768), **H200).kernel == "hopper_pingpong_128x128x64"


@pytest.mark.parametrize("M,K,N", [(2304, 12608, 768), (2304, 4096, 768), (2304, 1576, 768), (768, 4096, 2304)])
def test_pingpong_for_weight_gradients_of_a_wave(M, K, N):
    """3/4 to one wave of 128x128 tiles over at least 24 k-steps with an m-contiguous A (the weight gradients of
    ViT-B/16's and GPT-2's qkv, 108 tiles): ping-pong, unsplit."""
    e = explain_described(*weight_grad(M, K, N), **H200)
    assert e.kernel == "hopper_pingpong_128x128x64" and "a weight gradient" in e.reason, e
    assert e.details["split_k"] == 1, e


def test_weight_gradient_pingpong_bounds():
    """x @ W.t() of that size (128 rows into 14336 columns, 112 tiles), 16 k-steps, or fewer than 3/4 of a wave
    of tiles keep the other rules."""
    for e in (explain_described(*linear(128, 4096, 14336), **H200),
              explain_described(*weight_grad(2304, 1024, 768), **H200),
              explain_described(*weight_grad(1536, 4096, 768), **H200)):
        assert "a weight gradient" not in e.reason, e


def test_128x192_not_for_narrow_outputs():
    """Attention's context product (N = 64): every tiling computes 64 columns a tile, none is fuller."""
    assert explain_described(*mm(512, 512, 64, batch=96), **H200).kernel != "hopper_128x192x64"


def test_pingpong_needs_a_wave():
    """8192 x 128 at K = 768: 64 tiles of 128x128 on 132 SMs, 128 of 128x64: the 128x64 row (by estimate)."""
    e = explain_described(*mm(8192, 768, 128), **H200)
    assert e.kernel == "hopper_128x64x64", e
    # The same product with enough SMs' worth of tiles for 60 SMs is ping-pong.
    assert explain_described(*mm(8192, 768, 128), sm=90, num_sms=60).kernel == "hopper_pingpong_128x128x64"


@pytest.mark.parametrize("M,K,N", [(256, 32768, 256), (128, 131072, 128), (64, 65536, 64)])
def test_hopper_split_for_few_tiles_over_long_k(M, K, N):
    """A few tiles over a long K: a narrow hopper row (64x64 or 128x64, by estimated time) with K split over
    the SMs."""
    e = explain_described(*mm(M, K, N), **H200)
    assert e.kernel in ("hopper_m64_64x64x64", "hopper_128x64x64") and e.details["split_k"] > 1, e
    if M < 128:
        assert e.kernel == "hopper_m64_64x64x64", e
    # Two rows: the 64x64 mma.sync row (no TMA copy of a 6-byte-row operand).
    assert explain_described(*mm(2, 100003, 3), **H200).kernel == "tensorcore_64x64x32"


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N,row", [
    (128, 2048, 5632, "hopper_128x64x64"), (128, 5632, 2048, "hopper_m64_64x64x64"),
    (1024, 1024, 1024, "hopper_128x64x64"),
    (128, 2048, 2048, "hopper_m64_64x64x64"), (128, 768, 2304, "hopper_m64_64x64x64"),
    (256, 2048, 2048, "hopper_m64_64x64x64"), (128, 3072, 768, "hopper_m64_64x64x64"),
    (512, 2048, 2048, "hopper_128x64x64"), (256, 768, 3072, "hopper_128x64x64")])
def test_narrow_rows_below_a_wave(operands, M, K, N, row):
    """At most one 128x64 tile per SM and M, N multiples of 64 (128 tokens through a model's projections): the
    least estimated time of 64x64, 64x96 (x @ W.t() only), 128x64 and 128x128 tiles. The expected rows are the
    fastest measured (H200)."""
    if operands is linear and (M, K, N) in ((128, 2048, 5632), (256, 768, 3072)):
        row = "hopper_m64_64x96x64"  # 118 tiles of 20 KB stages against 88 of 24 KB (128x64)
    e = explain_described(*operands(M, K, N), **H200)
    assert e.kernel == row and "least estimated time" in e.reason, e
    narrow = ("hopper_128x64x64", "hopper_m64_64x64x64", "hopper_m64_64x96x64")
    # More tiles than SMs: another row.
    assert explain_described(*operands(16 * M, K, N), **H200).kernel not in narrow
    # fp32 under TF32: no narrow TF32 row.
    assert explain_described(*operands(M, K, N, torch.float32), **H200).kernel not in narrow
    # Ragged output edges (1000^3 measured slower on 128x64): neither. A ragged K is (the lm_head's dX).
    assert explain_described(*operands(M - 24, K, N), **H200).kernel not in narrow
    assert explain_described(*operands(M, K, N - 24), **H200).kernel not in narrow
    assert explain_described(*operands(M, K - 24, N), **H200).kernel == row


def test_split_counts_ranked_by_the_way_slices_are_added():
    """Split counts (and split rows against each other) rank by the way their slices will be added: the kernel's
    hand-over, cheaper than the second pass, takes 128x14336x4096 to 2 slices of 128x64 (not 3 of 128x128 by the
    second pass) and 32x4096x1024 to 4 slices of 64x64 (not 6). Whether to split at all still goes by the second
    pass's estimate: 128x4096x4096 stays on unsplit 64x64 tiles, not 2 slices of 128x64 added in the kernel."""
    e = explain_described(*linear(128, 14336, 4096), **H200)
    assert e.kernel == "hopper_128x64x64" and e.details["split_k"] == 2, e
    assert e.details["split_reduce"] == "kernel", e
    e = explain_described(*linear(32, 4096, 1024), **H200)
    assert e.kernel == "hopper_m64_64x64x64" and e.details["split_k"] == 4, e
    assert e.details["split_reduce"] == "kernel", e
    for M, K, N in ((128, 4096, 4096), (128, 2048, 2048)):
        e = explain_described(*linear(M, K, N), **H200)
        assert e.kernel == "hopper_m64_64x64x64" and e.details.get("split_k", 1) == 1, (M, K, N, e)


def test_gemv_split_slices_fill_one_round():
    """gemv_split's slice count gives every SM two blocks unless that overfills the round by more than a tenth;
    then as many as one round holds (8 x 4096x14336: 112 tiles in 2 slices, not 3; 8192x8192: 64 in 4, not 5),
    while 4096x6144's 48 tiles take 6 slices (288 blocks: a round overfilled by 9%)."""
    f32 = torch.float32
    for M, K, N, s in ((8, 4096, 14336, 2), (8, 8192, 8192, 4), (8, 4096, 6144, 6), (2, 8192, 8192, 4)):
        e = explain_described(*linear(M, K, N, f32), **H200)
        assert e.kernel == "gemv_split_16x128x256" and e.details.get("split_k", 1) == s, (M, K, N, e)
    e = explain_described(*linear(8, 4096, 28672, f32), **H200)  # 224 blocks: 85% of a round, unsplit
    assert e.kernel == "gemv_split_16x128x256" and e.details.get("split_k", 1) == 1, e


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N", [(1576, 3072, 768), (1576, 768, 768), (1576, 2304, 768), (1200, 2048, 768)])
def test_swap_ab_for_a_wave_of_72_row_tiles(operands, M, K, N):
    """Fewer 128x128 tiles than SMs and a wave of 72x128 swap-AB tiles (ViT-B/16 at batch 8: 1576 tokens x 768
    outputs, 132 tiles against 78), A k-contiguous: hopper_swap_72x128x64, in either layout of B."""
    e = explain_described(*operands(M, K, N), **H200)
    assert e.kernel == "hopper_swap_72x128x64" and "swap-AB" in e.reason, e
    assert e.details["split_k"] == 1, e
    # More than a wave of them (2048 rows: 29 x 6 = 174), fewer than 1024 rows, a column-major A, or fp32: another
    # row.
    assert explain_described(*operands(2048, K, N), **H200).kernel != "hopper_swap_72x128x64"
    assert explain_described(*operands(1000, K, N), **H200).kernel != "hopper_swap_72x128x64"
    _, b = operands(M, K, N)
    assert explain_described(torch.empty(K, M, dtype=BF16).t(), b, **H200).kernel != "hopper_swap_72x128x64"
    assert explain_described(*operands(M, K, N, torch.float32), **H200).kernel != "hopper_swap_72x128x64"
    # A full wave of 128x128 tiles (3 x 768 columns): the wave rules.
    assert explain_described(*operands(M, K, 3 * N), **H200).kernel != "hopper_swap_72x128x64"


@pytest.mark.parametrize("M,K,N", [(1800, 1024, 768), (800, 4096, 1536)])
def test_128x96_between_narrow_rows_and_a_wave(M, K, N):
    """More 128x64 tiles than SMs, fewer 128x128 ones, more 72x128 swap-AB tiles than SMs, a wave of 128x96, x @
    W.t(): hopper_128x96x64. A row-major B (dy @ W) or an N of ragged 96-wide tiles keeps 128x128."""
    e = explain_described(*linear(M, K, N), **H200)
    assert e.kernel == "hopper_128x96x64" and "128x96" in e.reason, e
    assert explain_described(*mm(M, K, N), **H200).kernel == "hopper_128x128x64"
    assert explain_described(*linear(M, K, N + 64), **H200).kernel == "hopper_128x128x64"
    # A full wave of 128x128 tiles: the rules for waves.
    assert explain_described(*linear(3 * M, K, N), **H200).kernel != "hopper_128x96x64"


@pytest.mark.parametrize("dtype", [torch.float32, BF16, torch.float16])
@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N", [(2, 3, 100003), (16, 8, 65536), (1, 4, 262144)])
def test_naive_for_few_rows_over_a_tiny_k(operands, M, K, N, dtype):
    """At most 16 rows and K <= 8 (the skinny suite's 2x3x100003): one thread per output, the naive row (H200:
    gemv_16x8 and gemv_mma were 4-14x slower, a warp per column on 3 to 8 elements of K)."""
    e = explain_described(*operands(M, K, N, dtype), **H200)
    assert e.kernel == "naive_16x16" and "K <= 8" in e.reason, e
    # More rows, or a longer K: the other rules.
    assert explain_described(*operands(64, K, N, dtype), **H200).kernel != "naive_16x16"
    assert explain_described(*operands(M, 16, N, dtype), **H200).kernel != "naive_16x16"
    # fp64 keeps the textbook tiled rows.
    assert explain_described(*operands(M, K, N, torch.float64), **H200).kernel.startswith("tiled_")


def test_weight_gradient_keeps_split_128x128():
    """768 x 768 weight gradients over many tokens: 128x128 tiles in 3 slices of K beat 128x64 unsplit (H200:
    0.031 ms vs 0.052 at K = 12608), which the estimate sees (the narrow rows cannot split in one wave)."""
    e = explain_described(*weight_grad(768, 12608, 768), **H200)
    assert e.kernel == "hopper_128x128x64" and e.details["split_k"] == 3, e


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
@pytest.mark.parametrize("M,K,N", [(32, 4096, 4096), (64, 4096, 14336), (64, 14336, 4096), (48, 4096, 4000)])
def test_m64_for_17_to_64_rows(operands, M, K, N):
    """Decoding 17 to 64 rows: 64x64 tiles, one tile high, up to two waves of them; beyond that (an lm_head) or
    at 16 rows and fewer (gemv_mma, the tile rows; x @ B: test_decode_with_a_row_major_b), another rule."""
    e = explain_described(*operands(M, K, N), **H200)
    assert e.kernel == "hopper_m64_64x64x64" and "17 to 64 rows" in e.reason, e
    assert explain_described(*operands(M, K, 50304), **H200).kernel != "hopper_m64_64x64x64"
    assert "17 to 64 rows" not in explain_described(*operands(16, K, N), **H200).reason
    assert explain_described(*operands(M, K, N), **A100).kernel != "hopper_m64_64x64x64"


def test_fp16_follows_bf16():
    assert explain_described(*mm(12480, 768, 384, torch.float16), **H200).kernel == "hopper_pingpong_128x128x64"
    assert explain_described(*mm(12608, 768, 384, torch.float16), **H200).kernel == "hopper_m192_192x192x64"
    assert explain_described(*mm(4096, 3072, 768, torch.float16), **H200).kernel == "hopper_128x192x64"


def test_hopper_only_on_sm90():
    """Compute capability 8.0: mma.sync rows, and a forced hopper row says why it cannot run."""
    assert explain_described(*mm(4096, 4096, 4096), **A100).kernel == "tensorcore_128x256x64"
    assert explain_described(*mm(4096, 768, 2304), **A100).kernel.startswith("tensorcore_")
    with pytest.raises(RuntimeError, match="compute capability 9.0"):
        explain_described(*mm(64, 64, 64), variant="hopper_pingpong_128x128x64", **A100)


def test_decode_goes_to_gemv():
    """x @ W.t() with up to 16 rows: half precision on gemv_mma while both operands' rows are 16-byte
    aligned, IEEE fp32 on gemv_split (test_fp32_few_rows for its limits); more rows, another layout or a
    misaligned view go to the tile kernels."""
    for M in (1, 5, 16):
        assert explain_described(*linear(M, 4096, 4096), **H200).kernel.startswith("gemv_mma_")
        assert explain_described(*linear(M, 4096, 4096, torch.float16), **H200).kernel.startswith("gemv_mma_")
    assert explain_described(*linear(16, 4096, 4096, torch.float32), **H200).kernel == "gemv_split_16x128x256"
    assert explain_described(*linear(17, 4096, 4096), **H200).kernel.startswith("hopper_")
    assert explain_described(*mm(4, 4096, 4096), **H200).kernel == "gemv_mma_rowb_16x32x64"  # W (K, N)
    x = torch.empty(4, 4097, dtype=BF16)[:, 1:]  # rows start 2 bytes past 16-byte boundaries
    assert explain_described(x, torch.empty(4096, 4096, dtype=BF16).t(), **H200).kernel.startswith("hopper_")
    # gemv_mma's ring is sized for sm_90's 227 KB of shared memory a block: compute capability 8.0 has 163 KB.
    assert explain_described(*linear(4, 4096, 4096), **A100).kernel.startswith("tensorcore_")
    with pytest.raises(RuntimeError, match="compute capability 9.0"):
        explain_described(*linear(4, 4096, 4096), variant="gemv_mma", **A100)


@pytest.mark.parametrize("dtype", [BF16, torch.float16], ids=str)
def test_decode_where_gemv_mma_idles_sms(dtype):
    """Up to 16 rows of x @ W.t() whose 16 x 32 gemv_mma tiles, more than the SMs, split into equal shares of
    whole tiles that leave a tenth of the SMs idle: 128x128 wgmma tiles where a wave of them covers 5/6 to all
    of the SMs (4096 -> 14336: 448 gemv_mma tiles on 112 SMs, 112 wgmma tiles); and wherever gemv_mma's tiles are
    more than the SMs (two or more a block, idle SMs or not), 64x64 ones where they are no more than the SMs
    (4096 -> 6144, 2048 -> 5632, 8192 -> 8192), else 64x96 ones (4096 -> 11008); gemv_mma everywhere else (one
    tile a block, or no 64-row tiling in one wave: 8192 -> 28672)."""
    for M in (1, 8, 16):
        e = explain_described(*linear(M, 4096, 14336, dtype), **H200)
        assert e.kernel == "hopper_128x128x64" and "a tenth of the SMs idle" in e.reason, (M, e)
        for K, N in ((4096, 6144), (2048, 5632), (8192, 8192)):
            e = explain_described(*linear(M, K, N, dtype), **H200)
            assert e.kernel == "hopper_m64_64x64x64" and "more than the SMs" in e.reason, (M, K, N, e)
        e = explain_described(*linear(M, 4096, 11008, dtype), **H200)
        assert e.kernel == "hopper_m64_64x96x64" and "more than the SMs" in e.reason, (M, e)
        for K, N in ((4096, 4096), (14336, 4096), (8192, 28672), (768, 1000)):
            assert explain_described(*linear(M, K, N, dtype), **H200).kernel == "gemv_mma_16x32x64", (M, K, N)
    # Without the wgmma rows (compute capability 8.0) nothing here changes: the tile rules, as before.
    assert explain_described(*linear(4, 4096, 14336, dtype), **A100).kernel.startswith("tensorcore_")


@pytest.mark.parametrize("dtype", [BF16, torch.float16], ids=str)
def test_decode_over_many_columns(dtype):
    """Up to 16 rows of x @ W.t() into a language model's vocabulary (1.5 waves of 128x128 tiles or more, K up
    to 4096): ping-pong 128x128 tiles unsplit, where gemv_mma's blocks would each run many tiles. Longer K, a
    batch, and fewer columns keep the rules before."""
    for M in (1, 8, 16):
        for K, N in ((768, 50257), (768, 32000), (2048, 32000), (4096, 50257), (4096, 25344)):
            e = explain_described(*linear(M, K, N, dtype), **H200)
            assert e.kernel == "hopper_pingpong_128x128x64" and "1.5 waves" in e.reason, (M, K, N, e)
            assert e.details.get("split_k", 1) == 1, (M, K, N, e)
        assert explain_described(*linear(M, 4096, 25216, dtype), **H200).kernel == "gemv_mma_16x32x64"
        assert explain_described(*linear(M, 8192, 32000, dtype), **H200).kernel == "gemv_mma_16x32x64"
    x = torch.empty(2, 4, 768, dtype=dtype)
    w = torch.empty(50257, 768, dtype=dtype)
    assert explain_described(x, w.t().expand(2, -1, -1), **H200).kernel != "hopper_pingpong_128x128x64"
    assert explain_described(*linear(1, 768, 50257, dtype), **A100).kernel != "hopper_pingpong_128x128x64"


@pytest.mark.parametrize("dtype", [BF16, torch.float16], ids=str)
def test_decode_with_a_row_major_b(dtype):
    """x @ B with B (K, N) row-major (transformers' Conv1D) and up to 16 rows in half precision:
    gemv_mma_rowb where its 32-column tiles are one wave of 3/4 to all of the SMs over K <= 8192, else the 64x64
    wgmma row split over K where N >= 768 (GPT-2's Conv1D projections into 768 columns, the ViT head's
    dY @ W, a longer K; below 2048 columns where K <= 2048 or the estimate splits K) unless its tiles would run
    a second round less than half full (ping-pong 128x128 then), else the rules for the tile rows."""
    for M, K, N in ((1, 4096, 4096), (16, 4096, 4096), (3, 6144, 4096), (1, 4096, 3200)):
        e = explain_described(*mm(M, K, N, dtype), **H200)
        assert e.kernel == "gemv_mma_rowb_16x32x64" and "one wave of 32-column tiles" in e.reason, (M, K, N, e)
    for M, K in ((1, 14336), (16, 28672)):
        e = explain_described(*mm(M, K, 4096, dtype), **H200)
        assert e.kernel == "hopper_m64_64x64x64" and e.details["split_k"] > 1, (M, K, e)
    for M, K, N in ((1, 8192, 8192), (16, 4096, 14336), (1, 768, 2304), (1, 4096, 3000), (1, 3072, 768),
                    (8, 1000, 768), (16, 2048, 1024), (4, 768, 1536), (3, 14336, 4096)):
        e = explain_described(*mm(M, K, N, dtype), **H200)
        assert e.kernel == "hopper_m64_64x64x64" and "N >= 768" in e.reason, (M, K, N, e)
    assert explain_described(*mm(1, 3072, 768, dtype), **H200).details["split_k"] > 1  # 12 tiles of 48 k-steps
    # K = 2304 into 768 columns: the 64x64 wgmma row goes only where its estimate splits K, which (its
    # block paced by the whole 64-row tile) it does on 132 SMs.
    e = explain_described(*mm(8, 2304, 768, dtype), **H200)
    assert e.kernel == "hopper_m64_64x64x64" and e.details["split_k"] > 1, e
    assert explain_described(*mm(1, 768, 760, dtype), **H200).kernel.startswith("tensorcore_")  # N < 768
    # 64x64 tiles that would run a second round less than half full (4096x11008's 172, 4096x9216's 144), with
    # 128x128 tiles one wave: ping-pong 128x128. 4096x14336's 224 (more than half) keep 64x64, as does x @ W.t().
    for M, K, N in ((1, 4096, 11008), (16, 2048, 11008), (8, 4096, 9216), (4, 8192, 12288)):
        e = explain_described(*mm(M, K, N, dtype), **H200)
        assert e.kernel == "hopper_pingpong_128x128x64" and "second round less than half full" in e.reason, e
    assert explain_described(*mm(16, 4096, 14336, dtype), **H200).kernel == "hopper_m64_64x64x64"
    assert "second round" not in explain_described(*linear(16, 4096, 11008, dtype), **H200).reason
    assert explain_described(*mm(17, 4096, 4096, dtype), **H200).kernel.startswith("hopper_")
    assert explain_described(*mm(4, 4096, 4096, dtype), **A100).kernel.startswith("tensorcore_")  # 163 KB


@pytest.mark.parametrize("M,K,N,splits", [(32, 4096, 4096, 8), (32, 4096, 14336, 2), (25, 14336, 4096, 8),
                                           (48, 4096, 4096, 4), (48, 4096, 14336, 1)])
def test_fp32_decode_on_32_row_tiles(M, K, N, splits):
    """IEEE fp32, 25 to 48 rows of x @ W.t() (17 to 48 of x @ B, B row-major) over K and N >= 4096, one
    matrix: blocked_m32_32x128x16, K split so that an SM runs up to two blocks (floor(2 x SMs / tiles)
    slices). Not under TF32, not for a batch, not for fewer rows of x @ W.t(), a shorter K or N, or more rows."""
    f32 = torch.float32
    for operands in (linear, mm):
        e = explain_described(*operands(M, K, N, f32), **H200)
        assert e.kernel == "blocked_m32_32x128x16" and e.details["split_k"] == splits, e
        assert "two blocks an SM" in e.reason and (splits == 1 or "at most 2 an SM" in e.reason), e
    assert explain_described(*mm(17, K, N, f32), **H200).kernel == "blocked_m32_32x128x16"
    assert explain_described(*linear(24, K, N, f32), **H200).kernel.startswith("gemv_split")
    assert explain_described(*linear(M, 2048, N, f32), **H200).kernel != "blocked_m32_32x128x16"
    assert explain_described(*linear(M, K, 2048, f32), **H200).kernel != "blocked_m32_32x128x16"
    assert explain_described(*linear(49, K, N, f32), **H200).kernel != "blocked_m32_32x128x16"
    assert explain_described(*mm(M, K, N, f32, batch=2), **H200).kernel != "blocked_m32_32x128x16"
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        assert explain_described(*linear(M, K, N, f32), **H200).kernel != "blocked_m32_32x128x16"
    finally:
        torch.set_float32_matmul_precision(previous)


def test_fp32_few_rows():
    """fp32 with few rows: one row of x @ W.t() on gemv, 2 to 32 on gemv_split (from 8 where N >= 2K)
    where its blocks fill the SMs (17 to 32 on blocks of 32 rows where a slice of K is long), split over K
    with a reason (under TF32: test_fp32_few_rows_under_tf32). A misaligned view stays on gemv (which reads it
    in place). x @ B with B row-major: gemv_split_rowb up to 8 rows (under TF32 too) where its blocks give every
    SM one."""
    f32 = torch.float32
    assert explain_described(*linear(1, 4096, 14336, f32), **H200).kernel == "gemv_16x8"
    for M in (2, 7, 16):
        e = explain_described(*linear(M, 14336, 4096, f32), **H200)
        assert e.kernel == "gemv_split_16x128x256", e
        assert e.details["split_k"] > 1 and "blocks, 2 an SM" in e.reason, e
    # N >= 2K: many columns keep a warp per column busy below 8 rows
    assert explain_described(*linear(4, 4096, 14336, f32), **H200).kernel == "gemv_16x8"
    assert explain_described(*linear(8, 4096, 14336, f32), **H200).kernel == "gemv_split_16x128x256"
    # x's rows 4 bytes past 16-byte boundaries: against a large aligned W the launchers copy x into aligned rows,
    # so the rules are those of aligned rows; a smaller W stays on gemv, which reads x in place.
    x = torch.empty(4, 4097, dtype=f32)[:, 1:]
    assert explain_described(x, torch.empty(4096, 4096, dtype=f32).t(), **H200).kernel == "gemv_split_16x128x256"
    x = torch.empty(16, 4097, dtype=f32)[:, 1:]
    assert explain_described(x, torch.empty(14336, 4096, dtype=f32).t(), **H200).kernel == "gemv_split_16x128x256"
    x = torch.empty(4, 1025, dtype=f32)[:, 1:]
    assert explain_described(x, torch.empty(1024, 1024, dtype=f32).t(), **H200).kernel == "gemv_16x8"
    # 17 to 32 rows: blocks of 32 rows where they make a round of >= 90% of the SMs on slices of K of at least
    # 2048 (14336 x 4096: 4 slices of 3584, 128 blocks), else two blocks of 16 rows
    # (From 25 rows the 32-row blocked tiles take these: the next test.)
    for M in (17, 24):
        e = explain_described(*linear(M, 14336, 4096, f32), **H200)
        assert e.kernel == "gemv_split_m32_32x128x256" and e.details["split_k"] == 4, e
        assert "slices of K of at least 2048" in e.reason and "128 blocks, 1 an SM" in e.reason, e
    for M, K, N in ((17, 4096, 4096), (32, 2048, 5632)):  # slices of 1024; 112 blocks
        e = explain_described(*linear(M, K, N, f32), **H200)
        assert e.kernel == "gemv_split_16x128x256" and e.details["split_k"] > 1, (M, K, N, e)
    # 224 blocks, 85% of a round of two an SM: 2 slices would overfill it by 70%, so they stay whole
    e = explain_described(*linear(24, 4096, 14336, f32), **H200)
    assert e.kernel == "gemv_split_16x128x256" and e.details.get("split_k", 1) == 1, e
    assert explain_described(*linear(33, 4096, 4096, f32), **H200).kernel.startswith("blocked_")
    # Too few column tiles x slices of K for two gemv_split blocks an SM: a warp per column up to 8 rows (16
    # where K <= 1024), the tile rows above; 2048 x 5632 still fills (44 tiles x 8 slices).
    for M, K, N in ((2, 3072, 768), (8, 4096, 1024), (8, 768, 3072), (16, 768, 3072), (16, 1024, 4096)):
        e = explain_described(*linear(M, K, N, f32), **H200)
        assert e.kernel == "gemv_16x8" and "too few columns and K" in e.reason, (M, K, N, e)
    for M, K, N in ((16, 3072, 768), (16, 4096, 1024), (17, 768, 3072), (32, 1024, 4096)):
        assert explain_described(*linear(M, K, N, f32), **H200).kernel.startswith("blocked_"), (M, K, N)
    for M in (8, 16, 32):
        assert explain_described(*linear(M, 2048, 5632, f32), **H200).kernel == "gemv_split_16x128x256"
    for M in (1, 8):
        assert explain_described(*mm(M, 8192, 8192, f32), **H200).kernel == "gemv_split_rowb_16x1024x64"
    assert explain_described(*mm(9, 8192, 8192, f32), **H200).kernel != "gemv_split_rowb_16x1024x64"
    # x @ B with fewer gemv_split_rowb blocks (column tiles x slices of K) than SMs: one row stays, more go to
    # the tile rows; 4096 x 4096 (4 tiles x 64 slices) stays.
    for M, K, N in ((4, 768, 3072), (8, 1000, 768), (8, 4096, 1024)):
        assert explain_described(*mm(M, K, N, f32), **H200).kernel.startswith("blocked_"), (M, K, N)
    assert explain_described(*mm(1, 768, 3072, f32), **H200).kernel == "gemv_split_rowb_16x1024x64"
    assert explain_described(*mm(4, 4096, 4096, f32), **H200).kernel == "gemv_split_rowb_16x1024x64"
    assert explain_described(*mm(4, 8192, 8192), **H200).kernel.startswith("hopper_")  # bf16: the tiles


def test_fp32_one_row_into_many_columns():
    """One row of x @ W.t() over K <= 1024 into enough columns for a gemv_split block an SM (a language model's
    head), and up to 7 rows where N >= 2K (fewer than gemv_split's split rule takes): gemv_split unsplit, not a
    warp per column; longer K and fewer columns stay on gemv. gemv_split's blocks that fill 90% of a round (two
    an SM) are not split: 16 rows into 32000 columns, 250 blocks."""
    f32 = torch.float32
    for M in (1, 2, 4, 7):
        for K, N in ((768, 50257), (768, 32000), (1024, 16896)):
            e = explain_described(*linear(M, K, N, f32), **H200)
            assert e.kernel == "gemv_split_16x128x256" and "fewer rows than gemv_split's split rule" in e.reason, (
                M, K, N, e)
            assert e.details.get("split_k", 1) == (1 if N >= 30464 else 2), (M, K, N, e)
    for M in (1, 2, 4):
        for K, N in ((2048, 32000), (1025, 50257), (768, 16768), (768, 3072)):
            assert explain_described(*linear(M, K, N, f32), **H200).kernel == "gemv_16x8", (M, K, N)
    for K in (768, 4096):
        e = explain_described(*linear(16, K, 32000, f32), **H200)
        assert e.kernel == "gemv_split_16x128x256" and e.details.get("split_k", 1) == 1, (K, e)
    # 128 blocks, half a round: split, into 2 slices (3 would overfill the round by 45%)
    e = explain_described(*linear(16, 4096, 16384, f32), **H200)
    assert e.kernel == "gemv_split_16x128x256" and e.details["split_k"] == 2, e


def test_fp32_long_k_into_few_columns():
    """A long K into few columns (fewer gemv blocks of 8 columns than SMs, or K >= 8192 and >= 2N) of up to 8
    rows of x @ W.t(): K split over gemv_split blocks, every SM one at least, in gemv_split's own count, not
    gemv's warp a column walking all of K; where gemv_split's blocks would not cover the SMs (short K), or N >= K,
    gemv stays. Under TF32 the rule only takes what gemv would (8 rows stay on the tensor-core rows)."""
    f32 = torch.float32
    for M in (1, 2, 4, 8):
        for K, N, slices in ((65536, 64, 256), (131072, 128, 256), (32768, 256, 128)):
            e = explain_described(*linear(M, K, N, f32), **H200)
            assert e.kernel == "gemv_split_16x128x256" and e.details["split_k"] == slices, (M, K, N, e)
            # From 2 rows, 512 blocks of 131072x128 already make gemv_split's two an SM (its split rule).
            assert ("few rows of x @ W.t() over a long K" in e.reason) == (M == 1 or K != 131072), (M, K, N, e)
    for K, N in ((4096, 1024), (3072, 768), (768, 768), (4096, 4096), (8192, 8192), (4096, 14336)):
        assert explain_described(*linear(1, K, N, f32), **H200).kernel == "gemv_16x8", (K, N)
    # K of 8192 or more and at least 2N: its warps walk K alone (Llama-3-8B's mlp_down at one row).
    e = explain_described(*linear(1, 14336, 4096, f32), **H200)
    assert e.kernel == "gemv_split_16x128x256" and e.details["split_k"] == 8, e


def test_fp32_long_k_into_few_columns_under_tf32(high):
    """test_fp32_long_k_into_few_columns under TF32: up to 4 rows (what gemv would take) go to gemv_split, 8 rows
    keep the tensor-core rows."""
    f32 = torch.float32
    for M in (1, 2, 4):
        assert explain_described(*linear(M, 65536, 64, f32), **H200).kernel == "gemv_split_16x128x256", M
    assert explain_described(*linear(8, 65536, 64, f32), **H200).kernel != "gemv_split_16x128x256"


def test_fp32_short_k_weight_gradients_on_k16():
    """fp32 with K <= 128 and M >= 64 where blocked_64x128x8's tiles are no more than the SMs or three to four an
    SM (K >= 16 there): blocked_k16_64x64x16; whole rounds of three (216, 288 tiles), larger outputs, K below 16 at
    three to four an SM, outputs less than a tile high and batches keep the estimate's pick."""
    f32 = torch.float32
    for M, K, N in ((2048, 128, 2048), (768, 128, 768), (768, 2, 768), (4096, 16, 1024), (1000, 64, 768)):
        e = explain_described(*weight_grad(M, K, N, f32), **H200)
        assert e.kernel == "blocked_k16_64x64x16" and "K <= 128 and M >= 64" in e.reason, (M, K, N, e)
        assert e.details.get("split_k", 1) == 1, (M, K, N, e)
    for M, K, N in ((2304, 128, 768), (3072, 128, 768), (4096, 128, 4096), (1024, 8, 4096), (2048, 256, 2048)):
        assert "K <= 128 and M >= 64" not in explain_described(*weight_grad(M, K, N, f32), **H200).reason, (M, K, N)
    # dY @ W of 16 rows into 65536 columns over K = 64 (512 tiles, but less than a tile high).
    dy, w = torch.empty(16, 64, dtype=f32), torch.empty(64, 65536, dtype=f32)
    assert explain_described(dy, w, **H200).kernel == "blocked_64x128x8"
    # A batch (not measured) keeps the estimate.
    assert "K <= 128 and M >= 64" not in explain_described(*mm(768, 128, 768, f32, batch=2), **H200).reason


def test_fp32_few_rows_under_tf32(high):
    """test_fp32_few_rows' limits under TF32: on sm_90, 2 to 64 rows of x @ W.t() into 2048 columns or more
    of a weight of 2^23 elements or more take the 64x128 TF32 wgmma tiles (a 50257-column head too, whose 393
    tiles the tile rule's cap refuses), and one row over K <= 1024 (a language model's head); other single rows,
    smaller weights and GPUs without wgmma keep the IEEE rows up to 4 rows (N >= 2K: 2 on gemv)."""
    f32 = torch.float32
    for M in (2, 4, 16, 64):
        for K, N in ((4096, 4096), (4096, 14336), (14336, 4096), (768, 50257), (8192, 8192)):
            e = explain_described(*linear(M, K, N, f32), **H200)
            assert e.kernel == "hopper_tf32_m64_64x128x32" and "K x N >= 2^23" in e.reason, (M, K, N, e)
    assert explain_described(*linear(1, 4096, 4096, f32), **H200).kernel == "gemv_16x8"
    for K, N in ((768, 50257), (1024, 32000)):
        e = explain_described(*linear(1, K, N, f32), **H200)
        assert e.kernel == "hopper_tf32_m64_64x128x32" and "(1 where K <= 1024)" in e.reason, (K, N, e)
    assert explain_described(*linear(1, 14336, 4096, f32), **H200).kernel == "gemv_split_16x128x256"
    assert explain_described(*linear(1, 768, 50257, f32), **A100).kernel == "gemv_split_16x128x256"
    assert explain_described(*linear(2, 1024, 4096, f32), **H200).kernel == "gemv_16x8"  # a small weight
    for M in (3, 4):
        assert explain_described(*linear(M, 3072, 768, f32), **H200).kernel == "gemv_16x8"  # too few blocks
    # Without wgmma (compute capability 8.0) the IEEE rows keep those rows.
    assert explain_described(*linear(2, 4096, 4096, f32), **A100).kernel == "gemv_split_16x128x256"
    assert explain_described(*linear(2, 4096, 14336, f32), **A100).kernel == "gemv_16x8"
    assert explain_described(*linear(4, 4096, 4096, f32), **A100).kernel == "gemv_split_16x128x256"
    assert explain_described(*linear(5, 4096, 4096, f32), **H200).kernel.startswith("hopper_tf32_")
    assert explain_described(*mm(8, 4096, 4096, f32), **H200).kernel == "gemv_split_rowb_16x1024x64"
    assert explain_described(*mm(9, 4096, 4096, f32), **H200).kernel != "gemv_split_rowb_16x1024x64"
    assert explain_described(*mm(4, 768, 3072, f32), **H200).kernel.startswith("tensorcore_tf32_")


def test_tiny_products_take_one_launch():
    """Up to 2^16 multiply-adds a matrix with K <= 256 and rows not 16-byte aligned: the gemv row,
    which reads them in place (the tile rows would copy them first); aligned rows and fp64 keep
    the tile rules."""
    for dtype in (BF16, torch.float16, torch.float32):
        for M, K, N in ((1, 1, 1), (5, 5, 5), (63, 15, 63), (3, 255, 1)):
            assert explain_described(*mm(M, K, N, dtype), **H200).kernel == "gemv_16x8", (dtype, M, K, N)
        assert explain_described(*mm(5, 5, 5, dtype, batch=1000), **H200).kernel == "gemv_16x8"
        assert explain_described(*linear(5, 5, 5, dtype), **H200).kernel == "gemv_16x8"
        assert explain_described(*mm(16, 16, 16, dtype), **H200).kernel != "gemv_16x8"  # aligned rows
        assert explain_described(*mm(5, 257, 5, dtype), **H200).kernel != "gemv_16x8"  # K > 256
    assert explain_described(*mm(70, 15, 70), **H200).kernel != "gemv_16x8"  # 73500 multiply-adds
    assert explain_described(*mm(5, 5, 5, torch.float64), **H200).kernel == "tiled_16x16x16"


def test_split_k_for_k_heavy():
    """A 64 x 64 output over K = 65536 leaves SMs idle: K in slices, reduced in a fixed order."""
    e = explain_described(*mm(64, 65536, 64, torch.float32), **H200)
    assert e.details["split_k"] > 1 and "split-K" in e.reason, e
    # One SM: no idle SMs to fill, only the second block of the pair it holds (a lone 4-warp block issues
    # its FMAs more slowly than two: chooser.cpp's kLoneBlockShare).
    assert explain_described(*mm(64, 65536, 64, torch.float32), sm=90, num_sms=1).details["split_k"] == 2


def test_split_k_bounded_by_the_devices_bandwidth(high):
    """Half precision: the estimate's bound is the device's DRAM bandwidth (mem_gbps; an H100's 3352 GB/s
    against the H200's 4800 a described GPU gets), so where reading the operands once already takes
    longer than a block's slice, the H100 gets fewer slices. The 4-byte (TF32) rows keep the H200's bound."""
    for operands, M, K, N, fewer in [(linear, 24, 14336, 4096, 1), (mm, 64, 65536, 64, 69),
                                     (linear, 64, 14336, 4096, 1)]:
        h200 = explain_described(*operands(M, K, N), **H200).details["split_k"]
        h100 = explain_described(*operands(M, K, N), **H100)
        assert h100.details["split_k"] == fewer < h200 and h100.details["mem_gbps"] == 3352, (M, K, N, h200, h100)
    for M, K, N in [(16, 14336, 4096), (64, 65536, 64)]:
        assert (explain_described(*linear(M, K, N, torch.float32), **H100).details["split_k"] ==
                explain_described(*linear(M, K, N, torch.float32), **H200).details["split_k"] > 1)
    with pytest.raises(RuntimeError, match="mem_gbps"):
        explain_described(*mm(64, 64, 64), mem_gbps=-1.0, **H200)


def test_half_split_k_paced_by_whole_tiles():
    """Decode batches of half x @ W.t() on the 64x64 wgmma row: a block is paced by its whole 64-row tile
    and the bandwidth bound counts a block's fixed cost, so 17 to 64 rows of 4096 -> 4096 stay unsplit
    and K = 14336 or 28672 into 4096 take two slices (H200, W cold: 64x4096x4096 12.9 us unsplit vs 14.4 in
    2 slices, 24x14336x4096 34.0 in 2 vs 38.4 unsplit)."""
    for M, K, N, splits in [(24, 4096, 4096, 1), (48, 4096, 4096, 1), (64, 4096, 4096, 1),
                            (24, 14336, 4096, 2), (32, 14336, 4096, 2), (24, 28672, 4096, 2)]:
        for dtype in (torch.bfloat16, torch.float16):
            e = explain_described(*linear(M, K, N, dtype), **H200)
            assert (e.kernel, e.details["split_k"]) == ("hopper_m64_64x64x64", splits), (M, K, N, e)


def test_tf32_mma_sync_splits_at_its_pace(high):
    """A TF32 mma.sync block streams ~20 B/ns, so its products with fewer tiles than SMs split K where a
    block at the wgmma rows' pace would not: x @ B with 16 rows, 128x768x768, the ViT head."""
    for operands, M, K, N, row, splits in [(mm, 16, 4096, 4096, "tensorcore_tf32_64x64x16", 4),
                                           (mm, 128, 768, 768, "tensorcore_tf32_64x64x16", 5),
                                           (linear, 8, 768, 1000, "tensorcore_tf32_64x64x16", 8)]:
        e = explain_described(*operands(M, K, N, torch.float32), **H200)
        assert (e.kernel, e.details["split_k"]) == (row, splits), (M, K, N, e)


def test_tf32_mma_sync_blocks_share_an_sm(high):
    """Up to 4 of the 64x64 TF32 mma.sync blocks run on an SM at once, so where the output has at least an
    eighth of a wave of tiles K is split into more blocks than SMs; with fewer tiles (K-heavy 64x65536x64, the
    ViT head) each SM keeps one."""
    for operands, M, K, N in [(mm, 16, 4096, 4096), (mm, 128, 3072, 768), (mm, 128, 768, 3072)]:
        e = explain_described(*operands(M, K, N, torch.float32), **H200)
        tiles = -(-M // 64) * -(-N // 64)
        assert e.kernel == "tensorcore_tf32_64x64x16" and 132 < tiles * e.details["split_k"] <= 4 * 132, e
        assert "up to 4 blocks an SM" in e.reason, e
    for operands, M, K, N in [(mm, 64, 65536, 64), (linear, 8, 768, 1000)]:
        e = explain_described(*operands(M, K, N, torch.float32), **H200)
        tiles = -(-M // 64) * -(-N // 64)
        assert e.kernel == "tensorcore_tf32_64x64x16" and tiles * e.details["split_k"] <= 132, (M, K, N, e)


@pytest.mark.parametrize("M,row", [(9, "tensorcore_tf32_64x64x16"), (32, "tensorcore_tf32_64x64x16"),
                                   (33, "tensorcore_tf32_128x128x16")])
def test_tf32_few_rows_on_64_row_tiles(high, M, row):
    """TF32 x @ B (B row-major: the wgmma rows would copy it transposed) with at most 32 rows: 64x64 tiles,
    whatever the count of 128x128 ones."""
    e = explain_described(*mm(M, 4096, 14336, torch.float32), **H200)
    assert e.kernel == row, e
    if M <= 32:
        assert "at most 32 rows" in e.reason, e


@pytest.mark.parametrize("operands,M,K,N,row,split", [
    (linear, 64, 14336, 4096, "blocked_64x128x8", True),  # fewer 64x128 tiles than SMs: K in slices
    (mm, 16, 4096, 4096, "blocked_64x128x8", True),
    (mm, 256, 32768, 256, "blocked_64x128x8", True),
    (mm, 64, 65536, 64, "blocked_k16_64x64x16", True),  # N = 64: a 64x128 tile would be half padding
    (linear, 128, 14336, 4096, "blocked_wide_128x256x8", True),
    (mm, 1000, 1000, 1000, "blocked_64x128x8", False),  # one wave of 64x128 beats 128x256 plus a reduction
    (mm, 4096, 4096, 4096, "blocked_wide_128x256x8", False)])
def test_fp32_blocked_by_estimated_time_with_splits(operands, M, K, N, row, split):
    """IEEE fp32 on the blocked row of least estimated time, each at its best split count."""
    e = explain_described(*operands(M, K, N, torch.float32), **H200)
    assert e.kernel == row and (e.details["split_k"] > 1) == split and "estimated time" in e.reason, e


@pytest.mark.parametrize("operands,M,K,N,row,splits", [
    # 384 tiles of 64x128, 3 an SM: one round, unsplit (H200, W cold: 410.5 us against 429.9 in 2 slices)
    (linear, 4096, 3072, 768, "blocked_64x128x8", 1),
    (mm, 4096, 768, 768, "blocked_64x128x8", 1),  # H200: 107.2 us against 127.1 in 2 slices
    (weight_grad, 768, 128, 3072, "blocked_64x128x8", 1),
    (weight_grad, 2304, 12608, 768, "blocked_64x128x8", 3),  # 216 tiles: 5 blocks an SM; H200 903.6 us vs 952.4 in 4
    (weight_grad, 3072, 12608, 768, "blocked_64x128x8", 5),  # 288 tiles: 11 an SM; H200 1194.1 us vs 1263.5 in 3
    (mm, 1000, 1000, 1000, "blocked_64x128x8", 1)])  # 128 tiles: one an SM, no second round
def test_fp32_blocks_an_sm_holds(operands, M, K, N, row, splits):
    """blocked_64x128x8: an SM holds three blocks, which share its pace, so a split count is ranked by the most
    blocks an SM gets (est_ns)."""
    e = explain_described(*operands(M, K, N, torch.float32), **H100)
    assert (e.kernel, e.details["split_k"]) == (row, splits), e


@pytest.mark.parametrize("operands,M,K,N,row,splits", [
    # two tiles high: a lone block streams its weight panel (kLoneStreamShare), two an SM go faster
    (linear, 128, 2048, 2048, "blocked_64x128x8", 8),  # H200, W cold: 34.94 us against 38.80 in 4 slices
    (mm, 128, 2048, 2048, "blocked_64x128x8", 8),  # dY @ W: 31.94 against 34.57
    (linear, 128, 768, 3072, "blocked_64x128x8", 5),  # 23.69 against 28.44 on 64x64 unsplit
    (mm, 1024, 1024, 1024, "blocked_64x128x8", 1)])  # 16 tiles high: panels from L2, one block an SM
def test_fp32_lone_blocks_streaming_weights(operands, M, K, N, row, splits):
    """A lone blocked_64x128x8 block (no more blocks than SMs) runs slower where the output is at most two tiles
    high, so est_ns ranks two blocks an SM (twice the slices) ahead there and not on taller outputs."""
    e = explain_described(*operands(M, K, N, torch.float32), **H200)
    assert (e.kernel, e.details["split_k"]) == (row, splits), e


@pytest.mark.parametrize("operands", [mm, linear], ids=["mm", "linear"])
def test_fp32_128x256_stores_unaligned_rows_slowly(operands):
    """blocked_wide_128x256x8 runs one block an SM, with nothing to run under its epilogue, whose stores into
    rows of C that are not 16-byte aligned go one element at a time (est_ns's unaligned_store_ns): GPT-2's
    lm_head at 4096 tokens (N = 50257) takes 64x128 tiles, three an SM (H200, W cold: 6676 us against 7041
    on 128x256); the same product into aligned rows (N = 50256) keeps 128x256."""
    e = explain_described(*operands(4096, 768, 50257, torch.float32), **H200)
    assert (e.kernel, e.details["split_k"]) == ("blocked_64x128x8", 1), e
    e = explain_described(*operands(4096, 768, 50256, torch.float32), **H200)
    assert (e.kernel, e.details["split_k"]) == ("blocked_wide_128x256x8", 1), e


@pytest.mark.parametrize("operands,M,K,N,splits", [
    (linear, 64, 14336, 4096, 8),  # 32 tiles: 4 slices would leave each block alone on its SM, 8 pair them
    (mm, 16, 4096, 4096, 8),  # x @ B: the few-row x @ W.t() rules do not take it
    (mm, 256, 32768, 256, 33)])
def test_fp32_lone_blocks_paired_by_slices(operands, M, K, N, splits):
    """A 4-warp blocked block alone on its SM issues its FMAs more slowly than two together
    (chooser.cpp's kLoneBlockShare): with fewer 64x128 tiles than SMs, K is split into enough slices for
    two blocks an SM."""
    e = explain_described(*operands(M, K, N, torch.float32), **H200)
    assert (e.kernel, e.details["split_k"]) == ("blocked_64x128x8", splits), e
    tiles = -(-M // 64) * -(-N // 128)
    assert 132 < tiles * splits <= 2 * 132 + tiles, e


@pytest.mark.parametrize("M,K,N", [(3072, 12608, 1024), (3072, 12608, 640)])
def test_splits_over_several_rounds(high, M, K, N):
    """A weight gradient whose tiles leave a wave's SMs idle: K in more slices than one wave of blocks holds,
    the rounds filling the SMs evenly (TF32 128x256, dY^T copied transposed for wgmma: 96 tiles in 4 slices,
    72 in 5)."""
    e = explain_described(*weight_grad(M, K, N, torch.float32), **H100)
    tiles = -(-M // 128) * -(-N // 256)
    assert e.kernel == "hopper_tf32_128x256x32" and tiles * e.details["split_k"] > 132, e
    assert "split-K" in e.reason and "estimated" in e.reason, e


@pytest.mark.parametrize("M,K,N", [(3072, 12608, 768), (768, 12608, 3072), (3072, 4096, 768), (768, 4096, 3072)])
def test_tf32_192x192_in_two_slices_for_weight_gradients(high, M, K, N):
    """TF32 weight gradients whose 192x192 tiles in 2 slices make a wave: the TF32 192x192 row, the kernel
    adding the slices, from K = 4096 (half the half-precision rule's K: TF32 MMAs take twice as long)."""
    e = explain_described(*weight_grad(M, K, N, torch.float32), **H100)
    assert e.kernel == "hopper_tf32_m192_192x192x32" and e.details["split_k"] == 2, e
    assert "2 slices of K" in e.reason and "added in the kernel" in e.reason, e
    e = explain_described(*weight_grad(M, 2048, N, torch.float32), **H100)  # K too short: 128-row tiles
    assert e.kernel != "hopper_tf32_m192_192x192x32", e


def test_tf32_wgmma_worth_a_transposed_copy(high):
    """TF32 wgmma reads only k-contiguous operands; the others are copied transposed. The copy pays up to
    elements copied x 250 <= M*N*K (a copied B from 250 rows) where K is under 8 times M and N; K-heavy
    products and fewer rows keep the mma.sync rows."""
    f32 = torch.float32
    for problem in (weight_grad(2304, 4096, 768, f32), weight_grad(768, 4096, 768, f32),
                    weight_grad(3072, 4096, 768, f32), mm(256, 4096, 4096, f32), mm(768, 768, 3072, f32),
                    mm(512, 64, 512, f32, batch=96), mm(512, 512, 64, f32, batch=96)):
        e = explain_described(*problem, **H100)
        assert e.kernel.startswith("hopper_tf32_"), (problem[0].shape, problem[1].shape, e)
    for problem in (mm(128, 4096, 4096, f32), mm(256, 32768, 256, f32), weight_grad(1024, 16384, 1024, f32)):
        e = explain_described(*problem, **H100)
        assert e.kernel.startswith("tensorcore_tf32_"), (problem[0].shape, problem[1].shape, e)
    # A B whose rows are not 16-byte aligned (N = 50257) is copied by the mma.sync rows as well: its transposed
    # copy costs the wgmma rows nothing extra (GPT-2's head at 128 tokens, x @ B with B row-major).
    e = explain_described(*mm(128, 768, 50257, f32), **H200)
    assert e.kernel.startswith("hopper_tf32_"), e
    assert explain_described(*mm(128, 768, 50256, f32), **H200).kernel.startswith("tensorcore_tf32_")


@pytest.mark.parametrize("M,K,N", [(256, 32768, 256), (128, 131072, 128), (64, 65536, 64)])
def test_tf32_k_heavy(high, M, K, N):
    """TF32 over a long K: x @ W.t() on TF32 wgmma split over K (nothing to copy); a row-major B on
    the 128x128 mma.sync row from 128 rows and columns (wgmma would copy B transposed), else 64x64."""
    e = explain_described(*linear(M, K, N, torch.float32), **H200)
    assert e.kernel == "hopper_tf32_128x128x32" and e.details["split_k"] > 1, e
    e = explain_described(*mm(M, K, N, torch.float32), **H200)
    assert e.kernel == ("tensorcore_tf32_128x128x16" if M >= 128 else "tensorcore_tf32_64x64x16"), e
    assert e.details["split_k"] > 1, e


@pytest.mark.parametrize("M", [3, 5, 16, 64])
def test_tf32_decode_batches_on_64_row_tiles(high, M):
    """TF32 x @ W.t() with 2 to 64 rows over N >= 2048: the 64-row TF32 wgmma row. More rows, a narrow N
    (K-heavy) or a row-major B (its transposed copy: mma.sync) go elsewhere."""
    f32 = torch.float32
    for K, N in ((4096, 14336), (14336, 4096)):
        e = explain_described(*linear(M, K, N, f32), **H200)
        assert e.kernel == "hopper_tf32_m64_64x128x32" and "64x128 TF32 wgmma tiles" in e.reason, (M, K, N, e)
    assert explain_described(*linear(65, 4096, 4096, f32), **H200).kernel == "hopper_tf32_128x128x32"
    # 97 to 128 rows in at most one 64-row tile an SM (two tiles high): the 64-row tiles again.
    for K, N in ((4096, 4096), (14336, 4096), (768, 3072)):
        e = explain_described(*linear(128, K, N, f32), **H200)
        assert e.kernel == "hopper_tf32_m64_64x128x32" and "97 to 128 rows" in e.reason, (K, N, e)
    assert explain_described(*linear(128, 4096, 14336, f32), **H200).kernel == "hopper_tf32_128x128x32"  # 224 tiles
    assert explain_described(*linear(64, 65536, 64, f32), **H200).kernel == "hopper_tf32_128x128x32"  # N < 2048
    assert not explain_described(*mm(M, 4096, 4096, f32), **H200).kernel.startswith("hopper_")


@pytest.mark.parametrize("M,K,N", [(4096, 768, 2304), (12608, 3072, 768), (12608, 768, 2304), (12608, 768, 3072)])
def test_tf32_192_row_where_its_waves_are_fuller(high, M, K, N):
    """TF32 on 192x192 tiles where a wave of them needs no more outputs an SM than 128x128 or 128x256 tiles
    (4096 x 2304: 264 tiles in 2 rounds against 288 of 128x256 in 3), in both layouts (mm copies B transposed)."""
    for problem in (linear(M, K, N, torch.float32), mm(M, K, N, torch.float32)):
        e = explain_described(*problem, **H100)
        assert e.kernel == "hopper_tf32_m192_192x192x32" and "192x192 tiles" in e.reason, (M, K, N, e)


@pytest.mark.parametrize("M,K,N", [(4096, 4096, 4096), (4096, 768, 3072), (4096, 3072, 768), (8192, 4096, 1024),
                                   (4096, 14336, 4096)])
def test_tf32_192_row_not_where_it_needs_more(high, M, K, N):
    """More outputs an SM on 192x192 tiles (4096^3: 4 rounds of 36864 against 4 of 32768), or fewer tiles than
    SMs: the 128-row TF32 tilings keep the product."""
    e = explain_described(*linear(M, K, N, torch.float32), **H100)
    assert e.kernel in ("hopper_tf32_128x256x32", "hopper_tf32_128x128x32"), (M, K, N, e)


def test_fp32_ieee_blocked_and_tf32_by_consent(high):
    """fp32 on TF32 tensor cores only under precision 'high' (the fixture); IEEE fp32 on the blocked rows."""
    assert explain_described(*mm(4096, 4096, 4096, torch.float32), **H200).kernel == "hopper_tf32_128x256x32"
    torch.set_float32_matmul_precision("highest")
    e = explain_described(*mm(4096, 4096, 4096, torch.float32), **H200)
    assert e.kernel.startswith("blocked_"), e


def test_fp64_textbook():
    assert explain_described(*mm(4096, 4096, 4096, torch.float64), **H200).kernel == "tiled_32x32x32"
    assert explain_described(*mm(333, 555, 777, torch.float64), **H200).kernel == "tiled_16x16x16"


def test_details_and_errors():
    e = explain_described(*mm(4096, 768, 2304), **H200)
    assert e.details["device"] == "described" and e.details["num_sms"] == 132 and e.details["sm"] == 90
    assert (e.details["M"], e.details["N"], e.details["K"]) == (4096, 2304, 768)
    with pytest.raises(RuntimeError, match="sm is major"):
        explain_described(*mm(8, 8, 8), sm=0, num_sms=132)
    with pytest.raises(RuntimeError, match="unknown variant"):
        explain_described(*mm(8, 8, 8), variant="nope", **H200)
    with pytest.raises(RuntimeError, match="expected 2-D"):
        explain_described(torch.empty(8), torch.empty(8, 8), **H200)


@pytest.mark.gpu
def test_described_matches_the_device():
    """On a GPU, describing it (with the DRAM bandwidth explain() reports for it) gives explain()'s choice."""
    props = torch.cuda.get_device_properties(0)
    here = dict(sm=props.major * 10 + props.minor, num_sms=props.multi_processor_count)
    for M, K, N in [(4096, 768, 2304), (4096, 4096, 4096), (64, 65536, 64), (1000, 1000, 1000)]:
        a, b = mm(M, K, N)
        e = tilelab_torch.explain(a.cuda(), b.cuda())
        assert e.details["mem_gbps"] > 500, e  # from the memory clock and bus width
        d = explain_described(a, b, mem_gbps=e.details["mem_gbps"], **here)
        assert (d.kernel, d.details["split_k"]) == (e.kernel, e.details["split_k"]), (d, e)


def _misaligned(*shape, dtype=BF16):
    """A row-major tensor whose base is one element past a 16-byte boundary (rows not 16-byte aligned)."""
    n = 1
    for s in shape:
        n *= s
    return torch.empty(n + 1, dtype=dtype)[1:].view(*shape)


@pytest.fixture
def fresh_choices():
    """The cache of picks emptied before and after the test (and on again after it)."""
    torch.ops.tilelab._set_choice_cache(True)
    yield
    torch.ops.tilelab._set_choice_cache(True)


def test_cached_picks_match_fresh_ones(fresh_choices):
    """The cache of picks (chooser.cpp, ChoiceKey) returns what the rules would: problems that differ only in
    what the key must hold (operand alignment, layouts, TF32 consent, the batch, the described GPU) asked in
    turn, each twice (the second from the cache), against the same problems with the cache off."""
    def problems():
        for dtype in (BF16, torch.float32):
            for M, K, N in [(16, 16, 16), (5, 5, 5), (128, 3072, 768), (24, 14336, 4096), (64, 65536, 64),
                            (4096, 768, 3072), (1576, 768, 768)]:
                yield mm(M, K, N, dtype)
                yield linear(M, K, N, dtype)
                yield weight_grad(M, K, N, dtype)
                yield _misaligned(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype)
                yield mm(M, K, N, dtype, batch=3)
    gpus = (H200, H100, A100, dict(sm=90, num_sms=114))

    def picks():
        out = []
        for precision in ("highest", "high"):
            torch.set_float32_matmul_precision(precision)
            for a, b in problems():
                for gpu in gpus:
                    for _ in range(2):
                        e = explain_described(a, b, **gpu)
                        out.append((e.kernel, e.details["split_k"], e.reason))
        return out

    previous = torch.get_float32_matmul_precision()
    try:
        torch.ops.tilelab._set_choice_cache(False)
        fresh = picks()
        assert torch.ops.tilelab._set_choice_cache(True) == 0  # off: nothing was kept
        cached = picks()
        assert torch.ops.tilelab._set_choice_cache(True) > 0  # on: the picks were kept (and are dropped now)
    finally:
        torch.set_float32_matmul_precision(previous)
    assert len(cached) == len(fresh)
    for i, (c, f) in enumerate(zip(cached, fresh)):
        assert c == f, (i, c, f)
    # The key tells these apart: alignment picks the tiny rule's gemv row, TF32 consent the TF32 rows.
    aligned = explain_described(*mm(16, 16, 16), **H200).kernel
    assert explain_described(_misaligned(16, 16), torch.empty(16, 16, dtype=BF16), **H200).kernel == "gemv_16x8"
    assert aligned != "gemv_16x8" and explain_described(*mm(16, 16, 16), **H200).kernel == aligned


def test_cached_picks_stand_aside_for_forced_splits(fresh_choices):
    """_set_split_k and _set_split_reduce apply to a problem whose pick is cached, and the cached pick comes back
    after them."""
    a, b = weight_grad(3072, 12608, 768)
    first = explain_described(a, b, **H200)
    assert first.details["split_k"] == 2 and "added in the kernel" in first.reason, first
    torch.ops.tilelab._set_split_k(3)
    try:
        assert explain_described(a, b, **H200).details["split_k"] == 3
    finally:
        torch.ops.tilelab._set_split_k(None)
    torch.ops.tilelab._set_split_reduce("pass")
    try:
        assert "reduced by a second pass" in explain_described(a, b, **H200).reason
    finally:
        torch.ops.tilelab._set_split_reduce(None)
    again = explain_described(a, b, **H200)
    assert (again.kernel, again.details["split_k"], again.reason) == (first.kernel, 2, first.reason)


@pytest.mark.gpu
def test_cached_pick_follows_the_bias_layout(fresh_choices):
    """One weight-gradient shape asked with a bias broadcast along rows (the TMA-store epilogue: the kernel adds
    its 2 slices on 132 SMs), a bias per element and one per row of C (a second pass adds the slices: no TMA
    store), then none: each call launches what its own pick says and matches float64, whichever came first."""
    seed = fresh_seed()
    M, K, N = 3072, 12608, 768
    a = torch.randn(K, M, device="cuda", dtype=BF16).t()
    b = torch.randn(K, N, device="cuda", dtype=BF16)
    ref = a.double() @ b.double()
    scale = (a.double().abs() @ b.double().abs()).norm()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    in_kernel = "added in the kernel" in tilelab_torch.explain(a, b).reason
    assert in_kernel or sms != 132, tilelab_torch.explain(a, b)
    biases = [torch.randn(N, device="cuda", dtype=BF16), torch.randn(M, N, device="cuda", dtype=BF16),
              torch.randn(M, 1, device="cuda", dtype=BF16), None]
    for _ in range(2):
        for bias in biases:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                got = (torch.ops.tilelab.tiled_mm(a, b) if bias is None else
                       torch.ops.tilelab.tiled_addmm(bias, a, b))
                torch.cuda.synchronize()
            passes = [ev.name for ev in prof.events() if "split_reduce_kernel" in ev.name]
            row_bias = bias is None or bias.dim() == 1
            assert bool(passes) != (in_kernel and row_bias), (None if bias is None else bias.shape, passes)
            want = ref if bias is None else ref + bias.double()
            err = float((got.double() - want).norm() / scale)
            assert err <= TOL[BF16], f"bias {None if bias is None else tuple(bias.shape)}: {err:.3g}, seed={seed}"


def test_choice_cache_is_bounded(fresh_choices):
    """At most 4096 problems are kept: the 4097th starts the cache over."""
    a = torch.empty(8, 64, dtype=BF16)
    for n in range(8, 8 + 4096):
        explain_described(a, torch.empty(64, n, dtype=BF16), **H200)
    assert torch.ops.tilelab._set_choice_cache(True) == 4096
    for n in range(8, 8 + 4097):
        explain_described(a, torch.empty(64, n, dtype=BF16), **H200)
    assert torch.ops.tilelab._set_choice_cache(True) == 1
