"""Attention, ``softmax(Q Kᵀ · scale) V`` per batch and head: lesson 09 (its Hopper forward in
CUDA, ``hopper/``, is lesson 18, its Hopper backward lesson 19).

Shapes follow ``F.scaled_dot_product_attention``: ``q`` is ``(B, H, Sq, D)``, ``k`` and ``v``
are ``(B, H_kv, Sk, D)``, the output is ``(B, H, Sq, D)`` in the dtype of ``q``, and ``scale`` is
``1/sqrt(D)``. ``causal=True`` masks key ``j`` for query ``i`` when ``j > i`` (top-left aligned,
as SDPA's ``is_causal``). A kernel is called ``kernel(q, k, v)``, ``kernel(q, k, v, causal)`` or
``kernel(q, k, v, causal, window)``.

The variants models use:

* **grouped-query attention** (Llama, Mistral, Qwen): ``H`` a multiple of ``H_kv``, query head
  ``h`` attends with K/V head ``h // (H // H_kv)`` (SDPA's ``enable_gqa=True``); ``H_kv = 1`` is
  multi-query attention;
* **a sliding window** (Mistral, Gemma's local layers): ``window=w`` with ``causal=True`` lets
  query ``i`` see the ``w`` keys ``i - w < j <= i``, aligned top-left as ``causal`` is (query
  ``i`` sits at key position ``i`` whatever ``Sk`` is). A query that sees no key (``Sq > Sk``,
  ``i - w >= Sk - 1``) gets zeros, as it does when there are no keys at all.

Naively it is three kernels and an ``Sq × Sk`` matrix in memory (``4·B·H·S²·D`` FLOPs on
``B·H·S²`` scores written and read back); fused, the scores never leave the chip and the bytes
moved fall to the four ``(B, H, S, D)`` tensors.
"""

# The op first (its arguments, checks, cases and reference: problem.py, re-exported here), then
# the providers, which register against it on import.
# isort: off
from kernels.attention.problem import (  # noqa: F401
    DTYPES, attention_eager, check_kv, validate_args, variant_reason, visible)
from kernels.attention import autograd, hopper, naive, sdpa  # noqa: F401
# isort: on

# sequences of different lengths packed in one batch: a function of its own (varlen.py says why)
from kernels.attention.varlen import varlen_attention  # noqa: E402, F401
