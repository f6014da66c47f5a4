"""Random attention calls (SDPA, MultiheadAttention, multi_head_attention_forward, the
Transformer layers and stacks; every mask kind and layout, train/eval, no_grad fast paths)
in torch and in flowgrad must give the same outputs, attention weights and gradients, and
raise the same exception types: see tests/attention_fuzz.py. What is not copied from torch
(its quirks on empty sequences, and one refusal's type) is its KNOWN and KNOWN_RUNS tables,
each entry with its reason."""
from __future__ import annotations

import attention_fuzz as af
import fuzz_common
import pytest
import torch

import flowgrad as flow


@pytest.mark.parametrize("seed", range(100))
def test_attention_case_matches_torch(seed):
    verdict = af.check(seed)
    assert verdict is None, f"{af.Case(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_attention_cases_match_torch():
    fuzz_common.assert_seeds_agree(af.check, range(100, 3000))


def _raises(m, call):
    try:
        call(m)
    except Exception as e:
        return type(e)
    return None


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_with_is_causal_checks_the_masks_dtype_as_torch(need_weights):
    # nn.MultiheadAttention's forward canonicalizes attn_mask before anything: an integer
    # mask raises AssertionError even where the is_causal hint replaces it (no key padding
    # mask, need_weights=False); flowgrad dropped the mask unchecked and ran
    def call(m):
        mha = m.nn.MultiheadAttention(4, 2)
        x = m.ones(3, 2, 4)
        mask = m.ones(3, 3, dtype=m.int64).triu(1)
        return mha(x, x, x, attn_mask=mask, need_weights=need_weights, is_causal=True)
    want = _raises(torch, call)
    assert want is AssertionError
    assert _raises(flow, call) is want


@pytest.mark.parametrize("with_kpm", [True, False])
def test_mha_need_weights_refuses_a_float_mask_of_another_dtype_as_torch(with_kpm):
    # need_weights=True: torch adds the float32 attn_mask to float64 scores by baddbmm, which
    # refuses mixed dtypes (a key padding mask merged first promotes it, and then it runs);
    # flowgrad promoted silently in both cases
    def call(m):
        mha = m.nn.MultiheadAttention(4, 2, dtype=m.float64)
        x = m.ones(3, 1, 4, dtype=m.float64)
        kpm = m.zeros(1, 3, dtype=m.bool) if with_kpm else None
        return mha(x, x, x, attn_mask=m.zeros(3, 3), key_padding_mask=kpm)
    want = _raises(torch, call)
    assert want is (None if with_kpm else RuntimeError)
    assert _raises(flow, call) is want


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_on_an_empty_query_gives_torchs_empty_output(batch_first, need_weights):
    # no query positions: the output projection's (0, E) result was reshaped with -1, which
    # is ambiguous at 0 elements, and flowgrad raised where torch returns an empty output
    def call(m):
        mha = m.nn.MultiheadAttention(4, 2, batch_first=batch_first, dtype=m.float64)
        q = m.ones((2, 0, 4) if batch_first else (0, 2, 4), dtype=m.float64)
        kv = m.ones((2, 3, 4) if batch_first else (3, 2, 4), dtype=m.float64)
        out, w = mha(q, kv, kv, need_weights=need_weights)
        return tuple(out.shape), None if w is None else tuple(w.shape)
    assert call(flow) == call(torch)


def test_fast_path_refuses_a_wrong_key_padding_mask_with_torchs_type():
    # torch's native encoder-layer kernel (eval, no_grad, batch_first) refuses a key padding
    # mask of the wrong length with RuntimeError; flowgrad raised the F path's AssertionError
    def call(m):
        layer = m.nn.TransformerEncoderLayer(4, 2, dim_feedforward=3, batch_first=True).eval()
        with m.no_grad():
            return layer(m.ones(1, 1, 4), src_key_padding_mask=m.zeros(1, 2, dtype=m.bool))
    want = _raises(torch, call)
    assert want is RuntimeError
    assert _raises(flow, call) is want


@pytest.mark.parametrize("grad", [True, False])
def test_encoder_nested_check_refuses_a_wrong_key_padding_mask_as_torch(grad):
    # TransformerEncoder in eval checks src_key_padding_mask's left alignment before its
    # other fast-path conditions (grad enabled included), and a mask of the wrong length
    # raises RuntimeError there; flowgrad reached the layers' AssertionError
    def call(m):
        layer = m.nn.TransformerEncoderLayer(4, 2, dim_feedforward=3, batch_first=True)
        enc = m.nn.TransformerEncoder(layer, 1).eval()
        with m.set_grad_enabled(grad):
            return enc(m.ones(2, 3, 4), src_key_padding_mask=m.zeros(2, 4, dtype=m.bool))
    want = _raises(torch, call)
    assert want is RuntimeError
    assert _raises(flow, call) is want


def test_float32_stack_closer_to_float64_than_torch_is_not_a_difference():
    # a two-layer encoder over E=2 (LayerNorm of two near-equal values) in float32: torch's
    # result 19 is 2.6e-4 off its own float64 run, flowgrad's 2e-5; the two differed by 2.4e-4,
    # past TOL, and the fuzz reported it (seed 11005673): now judged against torch's float64
    assert af.check(11005673) is None
