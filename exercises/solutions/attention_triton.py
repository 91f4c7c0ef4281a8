"""Solution (and known-wrong answers) of exercise attention_variants.flash_triton: FlashAttention-2,
forward and backward, in Triton, as a ``torch.autograd.Function`` whose passes launch kernels
written from an empty cell.

The solution's kernels: a forward over tiles of queries (whole key tiles unmasked, the causal
diagonal and the ragged end masked, L saved in base 2), a dQ kernel over tiles of queries that
also stores Δ = rowsum(dO ∘ O), and a dK/dV kernel over tiles of keys that reads it: no atomics,
every pass bit for bit the same in any program order. It is written apart from the course's
(``kernels/attention/triton_fwd.py``, ``triton_bwd.py``), which the speed line compares it with.

Each wrong answer is a mistake a student makes, written as one; ``SAYS`` holds the words its
"not yet" must contain. ``ALTERNATIVES`` are correct answers written differently (dQ by
``tl.atomic_add``, L in base e, other tiles, every key tile masked): each must pass
(``tests/test_flash_triton.py``).
"""

from pathlib import Path

from exercises.solutions.attention_tiles import SOLUTIONS as _TILES

# flash_tiles' answer handed in under this exercise's name: right values, no Triton
TILES_SOLUTION = (_TILES["attention_variants.flash_tiles"]
                  + "\n\nTritonFlashAttention = FlashAttention\n")

# the solution is a cell as a student writes it, in a file of its own so that it reads (and is
# linted) as code; the leading newline keeps the line numbers the mutation record's keys name
_SOLUTION = "\n" + (Path(__file__).parent / "cells" / "flash_triton.py").read_text()


def _edit(*edits: tuple[str, str], source: str = _SOLUTION) -> str:
    """``source`` with each ``old`` replaced by ``new`` (the first time it occurs, or every
    time where ``old`` is given as ``("all", old)``)."""
    for old, new in edits:
        every = isinstance(old, tuple)
        old = old[1] if every else old
        assert old in source, old
        source = source.replace(old, new) if every else source.replace(old, new, 1)
    return source


_MAX_AT_ZERO = _edit(('    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)',
                      "    m = tl.zeros((BLOCK_M,), tl.float32)  # the running max starts at 0"))
_NO_RESCALE = _edit(("acc * alpha[:, None]", "acc"))  # acc never rescaled by alpha
_SCORES_UNMASKED = _edit(('            s = tl.where(visible, s, float("-inf"))\n',
                          "            # (the loads are masked: the padded keys are zeros)\n"
                          "            s = s\n"))
_LOADS_UNMASKED = _edit(
    ("        k = tl.load(k_ptrs, mask=(keys < seq_k)[:, None], other=0.0)",
     "        k = tl.load(k_ptrs)  # the ragged last tile read whole"),
    ("        v = tl.load(v_ptrs, mask=(keys < seq_k)[:, None], other=0.0)",
     "        v = tl.load(v_ptrs)"))
_MASK_WRONG_SIDE = _edit(("                visible = visible & (keys[None, :] <= rows[:, None])",
                          "                visible = visible & (keys[None, :] >= rows[:, None])"))
_L_BASE_E = _edit((
    "    tl.store(L + bh.to(tl.int64) * seq_q + rows, m + tl.math.log2(l), mask=row_ok)",
    "    # L in base e (as the statement allows), and the backward's exp2 reads it as base 2\n"
    "    lse = (m + tl.math.log2(l)) * 0.6931471805599453\n"
    "    tl.store(L + bh.to(tl.int64) * seq_q + rows, lse, mask=row_ok)"))
_NO_DELTA = _edit(("        ds = p * (dp - delta[:, None])", "        ds = p * dp  # no Δ term"),
                  ("        dst = pt * (dpt - delta[None, :])", "        dst = pt * dpt"))
_DQ_UNSCALED = _edit(("             (dq * sm_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])",
                      "             dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])"))
_STRIP = _edit((
    "                D=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,",
    "                # every key in one tile: a (BLOCK_M, Sk) strip of scores per program\n"
    "                D=d, BLOCK_M=block_m, BLOCK_N=max(16, triton.next_power_of_2(sk)), "
    "CAUSAL=causal,"))
_OUT_UNMASKED = _edit(("(acc / l[:, None]).to(O.dtype.element_ty), mask=row_ok[:, None])",
                       "(acc / l[:, None]).to(O.dtype.element_ty))"))
_NO_HEAD_DIM_CHECK = _edit(
    ("        if d not in (16, 32, 64, 128):\n"
     '            raise ValueError(f"q: expected a head dim of 16, 32, 64 or 128, got {d}")\n',
     ""))
_CONTIGUOUS_ASSUMED = _edit((
    "    return [s for t in tensors for s in t.stride()[:3]]",
    "    # from the shape, as if every tensor were contiguous\n"
    "    return [s for t in tensors for s in (t.shape[1] * t.shape[2] * t.shape[3],\n"
    "                                         t.shape[2] * t.shape[3], t.shape[3])]"))
_TF32 = _edit(('    return "ieee" if q.dtype == torch.float32 else "tf32"',
               '    return "tf32"  # tl.dot as it comes'))
_EMPTY_NAN = _edit(("        if sk == 0:  # no key: output 0, L = -inf\n"
                    "            out.zero_()\n"
                    '            lse.fill_(float("-inf"))\n'
                    "        elif sq:", "        if sq:"))
_BACKWARD_UNMASKED = _edit((  # (the forward masked the diagonal: "P is 0 there anyway")
    "        if CAUSAL:\n            pt = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)\n", ""))

# dQ summed by the dK/dV kernel's programs into float32 with tl.atomic_add (allowed), and the
# same sum done with a load, an add and a plain store (a race)
_ATOMIC_DQ = _edit(
    ("def dkdv_kernel(Q, K, V, DO, L, DELTA, DK, DV, sqb,",
     "def dkdv_kernel(Q, K, V, DO, L, DELTA, DK, DV, DQ, sqb,"),
    ("        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=PRECISION)\n",
     "        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=PRECISION)\n"
     "        dq_ptrs = DQ + bh.to(tl.int64) * seq_q * D + rows[:, None] * D + dims[None, :]\n"
     "        dq = tl.dot(tl.trans(dst).to(k.dtype), k, input_precision=PRECISION)\n"
     "        tl.atomic_add(dq_ptrs, dq * sm_scale, mask=row_ok[:, None])\n"),
    ("        delta = torch.empty(b, h, sq, device=q.device, dtype=torch.float32)\n",
     "        delta = (do.float() * out.float()).sum(-1)  # Δ = rowsum(dO ∘ O)\n"
     "        dq32 = torch.zeros(b, h, sq, d, device=q.device, dtype=torch.float32)\n"),
    ("        dq_kernel[(triton.cdiv(sq, block_m), b * h)](\n"
     "            q, k, v, out, do, lse, delta, dq, *strides(q, k, v, out, do), h, sq, sk,\n"
     "            scale * LOG2E, scale, **common)\n", ""),
    ("            q, k, v, do, lse, delta, dk, dv, *strides(q, k, v, do), h, sq, sk,",
     "            q, k, v, do, lse, delta, dk, dv, dq32, *strides(q, k, v, do), h, sq, sk,"),
    ("        return dq, dk, dv, None", "        return dq32.to(q.dtype), dk, dv, None"))
_RACE_DQ = _edit(("        tl.atomic_add(dq_ptrs, dq * sm_scale, mask=row_ok[:, None])\n",
                  "        dq_old = tl.load(dq_ptrs, mask=row_ok[:, None], other=0.0)\n"
                  "        tl.store(dq_ptrs, dq_old + dq * sm_scale, mask=row_ok[:, None])\n"),
                 source=_ATOMIC_DQ)
# dK and dV summed over three groups of query tiles, each its own program, with
# tl.atomic_add: right values, and bits that depend on which program adds first
_SPLIT_ATOMIC_DKDV = _edit(
    ("if CAUSAL else 0  # earlier queries see none of them",
     "if CAUSAL else 0\n"
     "    first += tl.program_id(2) * BLOCK_M  # a third of the query tiles, every third"),
    ("    q_step, do_step = BLOCK_M * sqm, BLOCK_M * sdm\n"
     "    for start_m in range(first, seq_q, BLOCK_M):",
     "    q_step, do_step = 3 * BLOCK_M * sqm, 3 * BLOCK_M * sdm\n"
     "    for start_m in range(first, seq_q, 3 * BLOCK_M):"),
    ("        lse_ptrs += BLOCK_M\n        delta_ptrs += BLOCK_M",
     "        lse_ptrs += 3 * BLOCK_M\n        delta_ptrs += 3 * BLOCK_M"),
    ("    tl.store(DK + out, (dk * sm_scale).to(DK.dtype.element_ty), mask=key_ok[:, None])\n"
     "    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=key_ok[:, None])",
     "    tl.atomic_add(DK + out, dk * sm_scale, mask=key_ok[:, None])\n"
     "    tl.atomic_add(DV + out, dv, mask=key_ok[:, None])"),
    ("        dk = torch.empty(b, h, sk, d, device=q.device, dtype=k.dtype)\n"
     "        dv = torch.empty(b, h, sk, d, device=q.device, dtype=v.dtype)",
     "        dk = torch.zeros(b, h, sk, d, device=q.device, dtype=torch.float32)\n"
     "        dv = torch.zeros(b, h, sk, d, device=q.device, dtype=torch.float32)"),
    ("        dkdv_kernel[(triton.cdiv(sk, block_n), b * h)](",
     "        dkdv_kernel[(triton.cdiv(sk, block_n), b * h, 3)]("),
    ("        return dq, dk, dv, None", "        return dq, dk.to(k.dtype), dv.to(v.dtype), None"))
_L_NATURAL = _edit(
    ("    tl.store(L + bh.to(tl.int64) * seq_q + rows, m + tl.math.log2(l), mask=row_ok)",
     "    # L in base e (ln 2 = 0.693...); the backward turns it to base 2 for exp2\n"
     "    lse = (m + tl.math.log2(l)) * 0.6931471805599453\n"
     "    tl.store(L + bh.to(tl.int64) * seq_q + rows, lse, mask=row_ok)"),
    ("    lse = tl.load(L + bh.to(tl.int64) * seq_q + rows, mask=row_ok, other=0.0)",
     "    lse = tl.load(L + bh.to(tl.int64) * seq_q + rows, mask=row_ok, other=0.0)\n"
     "    lse = lse / 0.6931471805599453"),
    ("        lse = tl.load(lse_ptrs, mask=row_ok, other=0.0)",
     "        lse = tl.load(lse_ptrs, mask=row_ok, other=0.0) / 0.6931471805599453"))
_OTHER_TILES = _edit(("    return 64, 64, 4", "    return 32, 64, 4"))
_ALL_MASKED = _edit(("        masked = start_n >= full", "        masked = True  # every tile"))

ID = "attention_variants.flash_triton"
SOLUTIONS = {ID: _SOLUTION}
WRONG = {ID: {
    "the running max started at 0": _MAX_AT_ZERO,
    "the accumulator not rescaled": _NO_RESCALE,
    "the padded keys of the last tile scored 0, not -inf": _SCORES_UNMASKED,
    "the last key tile loaded without a mask": _LOADS_UNMASKED,
    "the causal mask on the wrong side": _MASK_WRONG_SIDE,
    "L saved in base e, read as base 2": _L_BASE_E,
    "dS without the Δ = rowsum(dO ∘ O) term": _NO_DELTA,
    "dQ not scaled": _DQ_UNSCALED,
    "dQ summed with a load, an add and a plain store (a race)": _RACE_DQ,
    "a tile as wide as every key": _STRIP,
    "the output's last tile stored without a mask": _OUT_UNMASKED,
    "no ValueError for a head dim of 40": _NO_HEAD_DIM_CHECK,
    "strides taken from the shape": _CONTIGUOUS_ASSUMED,
    "float32 multiplied in tf32": _TF32,
    "a row with no key gives NaN": _EMPTY_NAN,
    "the causal mask forgotten in the dK/dV kernel": _BACKWARD_UNMASKED,
    "plain PyTorch (flash_tiles' answer)": TILES_SOLUTION,
    "dK and dV summed with tl.atomic_add": _SPLIT_ATOMIC_DKDV,
}}

SAYS = {ID: {
    "the running max started at 0": "started at 0",
    "the accumulator not rescaled": "rescaled by alpha",
    "the padded keys of the last tile scored 0, not -inf": "padded keys",
    "the last key tile loaded without a mask": "a read outside the tensor",
    "the causal mask on the wrong side": "j <= i",
    "L saved in base e, read as base 2": "one base from an L of the other",
    "dS without the Δ = rowsum(dO ∘ O) term": "rowsum(dO ∘ O)",
    "dQ not scaled": "dQ is missing the softmax scale",
    "dQ summed with a load, an add and a plain store (a race)": "a race",
    "a tile as wide as every key": "as wide as every key",
    "the output's last tile stored without a mask": "a write outside the tensor",
    "no ValueError for a head dim of 40": "not a ValueError",
    "strides taken from the shape": "strides",
    "float32 multiplied in tf32": "tf32",
    "a row with no key gives NaN": "sees no key",
    "the causal mask forgotten in the dK/dV kernel": "masked exactly as the forward masks",
    "plain PyTorch (flash_tiles' answer)": "launched no Triton kernel",
    "dK and dV summed with tl.atomic_add": "changed between two runs",
}}

# Mechanical mutants (exercises.mutants) that behave exactly like the solution here, with why
_GPU_TILES = ("the GPU's tiles: in the interpreter q is a CPU tensor and this branch never runs "
              "(a GPU run of the harness decides it)")
_UNUSED_ROWS = ("the lanes this other= fills are padded rows (or keys) whose every result stays "
                "in rows that are never stored: NaN there changes nothing stored")
_PADDED_KEY = ("the key at Sk (or past it) was loaded as a zero row (masked load, other=0.0): "
               "its dS times its k adds 0 to dQ")
_LOOP_TYPE = ("the first step turns the float16 start into float32 (−∞ and 0 are exact in "
              "float16), which the interpreter allows; compiled Triton refuses a loop variable "
              "whose type changes, so a GPU run of the harness rejects it")
_PROMOTED = ("float16 times float32 is computed in float32 (the product promotes; a float16 "
             "value is exact in float32): the same Δ")
_ONE = "mask dropped: line {n}: mask={ok}[:, None], other=0.0)  ->  mask={ok}[:, None])"
EQUIVALENT = {ID: {
    "bound: line 14: if q.is_cuda and q.shape[-1] <= 64:  ->  if q.is_cuda and q.shape[-1] < 64:":
        _GPU_TILES,
    "constant: line 14: if q.is_cuda and q.shape[-1] <= 64:  ->  "
    "if q.is_cuda and q.shape[-2] <= 64:": _GPU_TILES,
    "constant: line 14: if q.is_cuda and q.shape[-1] <= 64:  ->  "
    "if q.is_cuda and q.shape[-1] <= 65:": _GPU_TILES,
    "constant: line 15: return 128, 64, 8  ->  return 129, 64, 8": _GPU_TILES,
    "constant: line 15: return 128, 64, 8  ->  return 128, 65, 8": _GPU_TILES,
    "constant: line 15: return 128, 64, 8  ->  return 128, 64, 9": _GPU_TILES,
    "constant: line 16: return 64, 64, 4  ->  return 64, 64, 5":
        "num_warps: the interpreter runs each program as one, whatever it says",
    **{_ONE.format(n=n, ok="row_ok"): _UNUSED_ROWS for n in (39, 91, 93, 95)},
    **{_ONE.format(n=n, ok="key_ok"): _UNUSED_ROWS for n in (139, 141)},
    "mask dropped: line 98: lse = tl.load(L + bh.to(tl.int64) * seq_q + rows, mask=row_ok, "
    "other=0.0)  ->  lse = tl.load(L + bh.to(tl.int64) * seq_q + rows, mask=row_ok)":
        _UNUSED_ROWS,
    "term dropped: line 49: full = (tl.minimum(start_m, seq_k) if CAUSAL else seq_k) // BLOCK_N "
    "* BLOCK_N  ->  full = (tl.minimum(start_m, seq_k) if CAUSAL else seq_k) // BLOCK_N":
        "a smaller bound of the unmasked tiles: more tiles take the masked path, which is "
        "right for any tile (slower on a GPU, the same values)",
    "term dropped: line 144: first = start_n // BLOCK_M * BLOCK_M if CAUSAL else 0  ->  "
    "first = start_n // BLOCK_M if CAUSAL else 0":
        "an earlier first query tile: the tiles before the diagonal are masked to P = 0 and "
        "add nothing",
    "bound: line 109: visible = keys[None, :] < seq_k  ->  visible = keys[None, :] <= seq_k":
        _PADDED_KEY,
    "operand dropped: line 111: visible = visible & (keys[None, :] <= rows[:, None])  ->  "
    "visible =(keys[None, :] <= rows[:, None])": _PADDED_KEY,
    "mask dropped: line 54: k = tl.load(k_ptrs, mask=(keys < seq_k)[:, None], other=0.0)  ->  "
    "k = tl.load(k_ptrs, mask=(keys < seq_k)[:, None])":
        "the padded keys' NaN scores are replaced by −∞ (tl.where) before anything reads them",
    **{f"narrowed: line {n}: {name} = tl.{fill}((BLOCK_M{shape}){init}, tl.float32)  ->  "
       f"{name} = tl.{fill}((BLOCK_M{shape}){init}, tl.float16)": _LOOP_TYPE
       for n, name, fill, shape, init in ((42, "m", "full", ",", ', float("-inf")'),
                                          (43, "l", "zeros", ",", ""),
                                          (44, "acc", "zeros", ", D", ""))},
    "narrowed: line 96: delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)  ->  "
    "delta = tl.sum(do * o.to(tl.float32), 1)": _PROMOTED,
    "narrowed: line 96: delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)  ->  "
    "delta = tl.sum(do.to(tl.float32) * o, 1)": _PROMOTED,
}}

# Correct answers written differently: each must pass
ALTERNATIVES = {ID: {
    "dQ by tl.atomic_add from the dK/dV kernel": _ATOMIC_DQ,
    "L saved in base e": _L_NATURAL,
    "tiles of 32 queries and 64 keys": _OTHER_TILES,
    "every key tile masked": _ALL_MASKED,
}}
