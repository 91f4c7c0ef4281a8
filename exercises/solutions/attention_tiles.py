"""Solution (and known-wrong answers) of exercise attention_variants.flash_tiles: FlashAttention-2,
forward and backward, in PyTorch tiles, as a ``torch.autograd.Function``.

Each wrong answer is a mistake a student makes, written as one; its comment says what is wrong.
Every one must get "not yet" from the check (a pure-PyTorch check: the same verdict on a CPU and
on a GPU), and its verdict must name the mistake (``SAYS``). ``ALTERNATIVES`` are correct answers
written differently (exp2, the key tiles outside the query tiles, the keys walked backwards, the
log-sum-exp in base 2): each must pass (``tests/test_flash_tiles.py``).
"""

_TILES = '''
import math

import torch

BLOCK_Q = 64  # query rows per tile
BLOCK_K = 64  # keys per tile


def key_tiles(i1, sk, causal):
    """The starts of the key tiles queries < i1 need: causal, query i sees key j <= i."""
    return range(0, min(sk, i1) if causal else sk, BLOCK_K)


def scores(q, k, i0, j0, scale, causal):
    """The tile S = q kᵀ · scale, -inf where a query does not see a key."""
    s = q @ k.mT * scale
    if causal:
        rows = torch.arange(i0, i0 + s.shape[-2], device=s.device)[:, None]
        keys = torch.arange(j0, j0 + s.shape[-1], device=s.device)[None, :]
        s = s.masked_fill(keys > rows, float("-inf"))
    return s


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        sq, sk, scale = q.shape[2], k.shape[2], 1.0 / math.sqrt(q.shape[3])
        qf, kf, vf = q.float(), k.float(), v.float()
        out = torch.empty(qf.shape, device=q.device)
        lse = torch.empty(qf.shape[:3], device=q.device)
        for i0 in range(0, sq, BLOCK_Q):
            qi = qf[:, :, i0:i0 + BLOCK_Q]
            m = torch.full(qi.shape[:3], float("-inf"), device=q.device)
            l = torch.zeros(qi.shape[:3], device=q.device)
            acc = torch.zeros(qi.shape, device=q.device)
            for j0 in key_tiles(i0 + qi.shape[2], sk, causal):
                s = scores(qi, kf[:, :, j0:j0 + BLOCK_K], i0, j0, scale, causal)
                m_new = torch.maximum(m, s.amax(-1))
                m_sub = torch.where(m_new == float("-inf"), 0.0, m_new)  # nothing seen yet
                alpha = torch.exp(m - m_sub)
                p = torch.exp(s - m_sub[..., None])
                l = alpha * l + p.sum(-1)
                acc = alpha[..., None] * acc + p @ vf[:, :, j0:j0 + BLOCK_K]
                m = m_new
            out[:, :, i0:i0 + BLOCK_Q] = acc / torch.where(l == 0, 1.0, l)[..., None]  # no key: 0
            lse[:, :, i0:i0 + BLOCK_Q] = m + torch.log(l)
        out = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, out, lse = ctx.saved_tensors
        sq, sk, scale = q.shape[2], k.shape[2], 1.0 / math.sqrt(q.shape[3])
        qf, kf, vf, dof = q.float(), k.float(), v.float(), do.float()
        delta = (dof * out.float()).sum(-1)  # D_i = rowsum(dO ∘ O)
        dq, dk, dv = torch.zeros_like(qf), torch.zeros_like(kf), torch.zeros_like(vf)
        for i0 in range(0, sq, BLOCK_Q):
            qi, doi = qf[:, :, i0:i0 + BLOCK_Q], dof[:, :, i0:i0 + BLOCK_Q]
            for j0 in key_tiles(i0 + qi.shape[2], sk, ctx.causal):
                kj, vj = kf[:, :, j0:j0 + BLOCK_K], vf[:, :, j0:j0 + BLOCK_K]
                s = scores(qi, kj, i0, j0, scale, ctx.causal)
                p = torch.exp(s - lse[:, :, i0:i0 + BLOCK_Q, None])
                dv[:, :, j0:j0 + BLOCK_K] += p.mT @ doi
                dp = doi @ vj.mT
                ds = p * (dp - delta[:, :, i0:i0 + BLOCK_Q, None])
                dq[:, :, i0:i0 + BLOCK_Q] += ds @ kj * scale
                dk[:, :, j0:j0 + BLOCK_K] += ds.mT @ qi * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None
'''


def _tiles(*edits: tuple[str, str]) -> str:
    source = _TILES
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    return source


_BACKWARD_AT = "    @staticmethod\n    def backward(ctx, do):\n"
_FORWARD_AT = "    @staticmethod\n    def forward(ctx, q, k, v, causal=False):\n"


def _with_backward(body: str) -> str:
    """The solution with its backward replaced by ``body`` (the method's whole text)."""
    return _TILES[:_TILES.index(_BACKWARD_AT)] + body


def _with_forward(body: str) -> str:
    """The solution with its forward replaced by ``body`` (the method's whole text)."""
    return (_TILES[:_TILES.index(_FORWARD_AT)] + body + "\n"
            + _TILES[_TILES.index(_BACKWARD_AT):])


_MAX_AT_ZERO = _tiles((
    '            m = torch.full(qi.shape[:3], float("-inf"), device=q.device)',
    "            m = torch.zeros(qi.shape[:3], device=q.device)  # the running max starts at 0"))
_NO_RESCALE = _tiles((
    "                acc = alpha[..., None] * acc + p @ vf[:, :, j0:j0 + BLOCK_K]",
    "                acc = acc + p @ vf[:, :, j0:j0 + BLOCK_K]  # acc never rescaled by alpha"))
_L_IS_MAX = _tiles(("            lse[:, :, i0:i0 + BLOCK_Q] = m + torch.log(l)",
                    "            lse[:, :, i0:i0 + BLOCK_Q] = m  # the max, not the log-sum-exp"))
_NO_SCALE_BACKWARD = _tiles((
    "                s = scores(qi, kj, i0, j0, scale, ctx.causal)",
    "                s = scores(qi, kj, i0, j0, 1.0, ctx.causal)  # S without the 1/sqrt(D)"))
_DELTA_FROM_P = _tiles((
    "                ds = p * (dp - delta[:, :, i0:i0 + BLOCK_Q, None])",
    "                # D from this tile's P ∘ dP: right only when one tile holds every key\n"
    "                ds = p * (dp - (p * dp).sum(-1, keepdim=True))"))
_DIAGONAL_HIDDEN = _tiles((
    "        s = s.masked_fill(keys > rows, float(\"-inf\"))",
    "        s = s.masked_fill(keys >= rows, float(\"-inf\"))  # hides j = i"))
_BOTTOM_RIGHT = _tiles(
    ("def scores(q, k, i0, j0, scale, causal):",
     "def scores(q, k, i0, j0, scale, causal, shift=0):"),
    ("        rows = torch.arange(i0, i0 + s.shape[-2], device=s.device)[:, None]",
     "        # aligned bottom right: query i sees key j <= i + Sk - Sq\n"
     "        rows = torch.arange(i0, i0 + s.shape[-2], device=s.device)[:, None] + shift"),
    ("    return range(0, min(sk, i1) if causal else sk, BLOCK_K)",
     "    return range(0, sk, BLOCK_K)"),
    ("                s = scores(qi, kf[:, :, j0:j0 + BLOCK_K], i0, j0, scale, causal)",
     "                s = scores(qi, kf[:, :, j0:j0 + BLOCK_K], i0, j0, scale, causal, sk - sq)"),
    ("                s = scores(qi, kj, i0, j0, scale, ctx.causal)",
     "                s = scores(qi, kj, i0, j0, scale, ctx.causal, sk - sq)"))
_RAGGED_DROPPED = _tiles((
    "    return range(0, min(sk, i1) if causal else sk, BLOCK_K)",
    "    # whole tiles only: the last, ragged tile of keys is never read\n"
    "    return range(0, (min(sk, i1) if causal else sk) - BLOCK_K + 1, BLOCK_K)"))
_FULL_BACKWARD = _with_backward('''    @staticmethod
    def backward(ctx, do):
        # the whole (Sq, Sk) score matrix at once: simple, and S × S memory again
        q, k, v, out, lse = ctx.saved_tensors
        scale = 1.0 / math.sqrt(q.shape[3])
        qf, kf, vf, dof = q.float(), k.float(), v.float(), do.float()
        s = scores(qf, kf, 0, 0, scale, ctx.causal)
        p = torch.exp(s - lse[..., None])
        dv = p.mT @ dof
        dp = dof @ vf.mT
        ds = p * (dp - (dof * out.float()).sum(-1, keepdim=True))
        dq = ds @ kf * scale
        dk = ds.mT @ qf * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None
''')
_FULL_FORWARD = _with_forward('''    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        # the scores of every query and key at once, then a softmax: eager attention
        scale = 1.0 / math.sqrt(q.shape[3])
        s = scores(q.float(), k.float(), 0, 0, scale, causal)
        lse = torch.logsumexp(s, -1)
        out = (torch.exp(s - lse[..., None]) @ v.float()).to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out''')
_KEY_STRIP = _tiles((
    "    return range(0, min(sk, i1) if causal else sk, BLOCK_K)",
    "    return range(0, 1)  # one step: every key of the row at once"),
    ("kf[:, :, j0:j0 + BLOCK_K]", "kf"), ("vf[:, :, j0:j0 + BLOCK_K]", "vf"),
    ("dv[:, :, j0:j0 + BLOCK_K] +=", "dv +="), ("dk[:, :, j0:j0 + BLOCK_K] +=", "dk +="))
_DK_NO_SCALE = _tiles(("                dk[:, :, j0:j0 + BLOCK_K] += ds.mT @ qi * scale",
                       "                dk[:, :, j0:j0 + BLOCK_K] += ds.mT @ qi  # no scale"))
_EMPTY_NAN = _tiles((
    "            out[:, :, i0:i0 + BLOCK_Q] = acc / torch.where(l == 0, 1.0, l)[..., None]  # no "
    "key: 0", "            out[:, :, i0:i0 + BLOCK_Q] = acc / l[..., None]  # 0 / 0 for no key"))
_BATCH_HEAD = _with_forward('''    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        # one (batch, head) at a time, written into a flattened (B·H, Sq, D) output
        b, h, sq, d = q.shape
        sk, scale = k.shape[2], 1.0 / math.sqrt(d)
        out = torch.zeros(b * h, sq, d, device=q.device)
        lse = torch.zeros(b * h, sq, device=q.device)
        for bi in range(b):
            for hi in range(h):
                bh = bi * b + hi  # the flat index: should be bi * h + hi
                for i0 in range(0, sq, BLOCK_Q):
                    qi = q[bi, hi, i0:i0 + BLOCK_Q].float()
                    m = torch.full(qi.shape[:1], float("-inf"), device=q.device)
                    l = torch.zeros(qi.shape[:1], device=q.device)
                    acc = torch.zeros(qi.shape, device=q.device)
                    for j0 in key_tiles(i0 + qi.shape[0], sk, causal):
                        kj = k[bi, hi, j0:j0 + BLOCK_K].float()
                        s = scores(qi, kj, i0, j0, scale, causal)
                        m_new = torch.maximum(m, s.amax(-1))
                        m_sub = torch.where(m_new == float("-inf"), 0.0, m_new)
                        alpha = torch.exp(m - m_sub)
                        p = torch.exp(s - m_sub[:, None])
                        l = alpha * l + p.sum(-1)
                        acc = alpha[:, None] * acc + p @ v[bi, hi, j0:j0 + BLOCK_K].float()
                        m = m_new
                    out[bh, i0:i0 + BLOCK_Q] = acc / torch.where(l == 0, 1.0, l)[:, None]
                    lse[bh, i0:i0 + BLOCK_Q] = m + torch.log(l)
        out = out.view(b, h, sq, d).to(q.dtype)
        lse = lse.view(b, h, sq)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out''')
_L_HALF = _tiles(("        ctx.save_for_backward(q, k, v, out, lse)",
                  "        ctx.save_for_backward(q, k, v, out, lse.to(q.dtype))  # L in 16 bits"))
_HALF_SCORES = _tiles((
    "        qf, kf, vf = q.float(), k.float(), v.float()\n        out = torch.empty",
    "        qf, kf, vf = q, k, v.float()  # the scores computed in the input's dtype\n"
    "        out = torch.empty"))
_DO_VIEW = _tiles((
    "        delta = (dof * out.float()).sum(-1)  # D_i = rowsum(dO ∘ O)",
    "        # every row of dO and O, one after the other: .view assumes dO is contiguous\n"
    "        rows = (dof.view(-1, q.shape[3]) * out.float().view(-1, q.shape[3])).sum(-1)\n"
    "        delta = rows.view(q.shape[:3])"))
_STATISTICS_AGAIN = _tiles((
    "                p = torch.exp(s - lse[:, :, i0:i0 + BLOCK_Q, None])",
    "                # the row's statistics again, from every key, instead of the saved L\n"
    "                m = torch.full(s.shape[:3], float(\"-inf\"), device=s.device)\n"
    "                l = torch.zeros(s.shape[:3], device=s.device)\n"
    "                for j in key_tiles(i0 + qi.shape[2], sk, ctx.causal):\n"
    "                    t = scores(qi, kf[:, :, j:j + BLOCK_K], i0, j, scale, ctx.causal)\n"
    "                    m_new = torch.maximum(m, t.amax(-1))\n"
    "                    l = l * torch.exp(m - m_new) + torch.exp(t - m_new[..., None]).sum(-1)\n"
    "                    m = m_new\n"
    "                p = torch.exp(s - (m + torch.log(l))[..., None])"))
_NO_MASK_BACKWARD = _tiles((
    "                s = scores(qi, kj, i0, j0, scale, ctx.causal)",
    "                s = scores(qi, kj, i0, j0, scale, False)  # the causal mask forgotten"))

SOLUTIONS = {"attention_variants.flash_tiles": _TILES}
WRONG = {"attention_variants.flash_tiles": {
    "the running max started at 0": _MAX_AT_ZERO,
    "the accumulator not rescaled": _NO_RESCALE,
    "L saved as the running max only": _L_IS_MAX,
    "the softmax scale forgotten in the backward": _NO_SCALE_BACKWARD,
    "D_i from the tile's P ∘ dP, not rowsum(dO ∘ O)": _DELTA_FROM_P,
    "causal off by one (the diagonal hidden)": _DIAGONAL_HIDDEN,
    "causal aligned at the bottom right": _BOTTOM_RIGHT,
    "the last ragged key tile dropped": _RAGGED_DROPPED,
    "the full S × S in the backward": _FULL_BACKWARD,
    "the full S × S in the forward": _FULL_FORWARD,
    "a strip of every key per query tile": _KEY_STRIP,
    "dK missing the scale": _DK_NO_SCALE,
    "a row with no key gives NaN": _EMPTY_NAN,
    "batch and head mixed in the flat index": _BATCH_HEAD,
    "L kept in the input's 16 bits": _L_HALF,
    "the scores in the input's dtype": _HALF_SCORES,
    "dO assumed contiguous": _DO_VIEW,
    "the backward recomputes the row statistics": _STATISTICS_AGAIN,
    "the causal mask forgotten in the backward": _NO_MASK_BACKWARD,
}}

# What each wrong answer's "not yet" must say (tests/test_exercises.py holds every verdict to
# it): the mistake named, not only a wrong value
SAYS = {"attention_variants.flash_tiles": {
    "the running max started at 0": "started at 0",
    "the accumulator not rescaled": "rescaled by alpha",
    "L saved as the running max only": "each row's maximum",
    "the softmax scale forgotten in the backward": "without the softmax scale",
    "D_i from the tile's P ∘ dP, not rowsum(dO ∘ O)": "rowsum(dO ∘ O)",
    "causal off by one (the diagonal hidden)": "keys j < i",
    "causal aligned at the bottom right": "bottom right",
    "the last ragged key tile dropped": "the last, ragged tile of keys",
    "the full S × S in the backward": "during the backward",
    "the full S × S in the forward": "during the forward",
    "a strip of every key per query tile": "as many elements as the whole",
    "dK missing the scale": "dK is missing the softmax scale",
    "a row with no key gives NaN": "sees no key",
    "batch and head mixed in the flat index": "holds the attention of batch",
    "L kept in the input's 16 bits": "keep L in float32",
    "the scores in the input's dtype": "in float32",
    "dO assumed contiguous": "not contiguous",
    "the backward recomputes the row statistics": "a row maximum",
    "the causal mask forgotten in the backward": "without the causal mask",
}}

# Mechanical mutants (exercises.mutants) that behave exactly like the solution
EQUIVALENT = {"attention_variants.flash_tiles": {
    "constant: line 6: BLOCK_Q = 64  ->  BLOCK_Q = 65":
        "a tile of 65 queries is as correct and as tiled as one of 64: the statement names the "
        "tile sizes, and no value or tensor size the check reads depends on them",
    "constant: line 7: BLOCK_K = 64  ->  BLOCK_K = 65":
        "a tile of 65 keys is as correct and as tiled as one of 64: the statement names the "
        "tile sizes, and no value or tensor size the check reads depends on them",
    "constant: line 37: for j0 in key_tiles(i0 + qi.shape[2], sk, causal):  ->  "
    "for j0 in key_tiles(i0 + qi.shape[3], sk, causal):":
        "the causal bound only picks which tiles start before it; i0 + D (D >= 1) selects the "
        "diagonal tile as i0 + rows does, and any tile past it is fully masked and adds nothing",
    "constant: line 62: for j0 in key_tiles(i0 + qi.shape[2], sk, ctx.causal):  ->  "
    "for j0 in key_tiles(i0 + qi.shape[3], sk, ctx.causal):":
        "the causal bound only picks which tiles start before it; i0 + D (D >= 1) selects the "
        "diagonal tile as i0 + rows does, and any tile past it has P = 0 and adds nothing",
}}

# Correct answers written differently: each must pass
_EXP2 = _tiles(
    ("                alpha = torch.exp(m - m_sub)\n"
     "                p = torch.exp(s - m_sub[..., None])",
     "                alpha = torch.exp2((m - m_sub) * LOG2E)\n"
     "                p = torch.exp2((s - m_sub[..., None]) * LOG2E)"),
    ("BLOCK_K = 64  # keys per tile\n",
     "BLOCK_K = 64  # keys per tile\nLOG2E = 1.4426950408889634  # e^x = 2^(x log2 e)\n"))
_LSE2 = _tiles(
    ("            lse[:, :, i0:i0 + BLOCK_Q] = m + torch.log(l)",
     "            lse[:, :, i0:i0 + BLOCK_Q] = (m + torch.log(l)) * LOG2E  # base 2"),
    ("                p = torch.exp(s - lse[:, :, i0:i0 + BLOCK_Q, None])",
     "                p = torch.exp2(s * LOG2E - lse[:, :, i0:i0 + BLOCK_Q, None])"),
    ("BLOCK_K = 64  # keys per tile\n",
     "BLOCK_K = 64  # keys per tile\nLOG2E = 1.4426950408889634  # log2(e)\n"))
_KEYS_BACKWARDS = _tiles((
    "    return range(0, min(sk, i1) if causal else sk, BLOCK_K)",
    "    return reversed(range(0, min(sk, i1) if causal else sk, BLOCK_K))  # last tile first"))
_KEYS_OUTSIDE = _with_forward('''    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        # the key tiles outside, the query tiles inside: running statistics for every query
        sq, sk, scale = q.shape[2], k.shape[2], 1.0 / math.sqrt(q.shape[3])
        qf, kf, vf = q.float(), k.float(), v.float()
        m = torch.full(qf.shape[:3], float("-inf"), device=q.device)
        l = torch.zeros(qf.shape[:3], device=q.device)
        acc = torch.zeros(qf.shape, device=q.device)
        for j0 in range(0, sk, BLOCK_K):
            for i0 in range(0, sq, BLOCK_Q):
                s = scores(qf[:, :, i0:i0 + BLOCK_Q], kf[:, :, j0:j0 + BLOCK_K], i0, j0, scale,
                           causal)
                mi = m[:, :, i0:i0 + BLOCK_Q]
                m_new = torch.maximum(mi, s.amax(-1))
                m_sub = torch.where(m_new == float("-inf"), 0.0, m_new)
                alpha = torch.exp(mi - m_sub)
                p = torch.exp(s - m_sub[..., None])
                l[:, :, i0:i0 + BLOCK_Q] = alpha * l[:, :, i0:i0 + BLOCK_Q] + p.sum(-1)
                acc[:, :, i0:i0 + BLOCK_Q] = (alpha[..., None] * acc[:, :, i0:i0 + BLOCK_Q]
                                              + p @ vf[:, :, j0:j0 + BLOCK_K])
                m[:, :, i0:i0 + BLOCK_Q] = m_new
        out = (acc / torch.where(l == 0, 1.0, l)[..., None]).to(q.dtype)
        lse = m + torch.log(l)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out''')

ALTERNATIVES = {"attention_variants.flash_tiles": {
    "exp2 with log2(e)": _EXP2,
    "L in base 2 (as the course's Triton kernel keeps it)": _LSE2,
    "the key tiles walked last to first": _KEYS_BACKWARDS,
    "the key tiles outside the query tiles": _KEYS_OUTSIDE,
}}
