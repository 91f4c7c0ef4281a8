"""Wrong answers to exercise attention_variants.flash_tiles, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

from exercises.solutions.blind import edited

ID = "attention_variants.flash_tiles"
# The first answer whole; each other one is it with its own mistake in place of the first's
# (edited: each old text occurs once in the first answer).
FIRST = 'backward loops over full key tiles only (range(0, Sk - BLOCK_K + 1)), dropping the last ragged key tile'
BASE = r'''
# ✏️ Exercise attention_variants.flash_tiles: edit this cell, run it, then run the check below
import math

import torch

BLOCK_Q = 64  # query rows per tile
BLOCK_K = 64  # keys per tile


class FlashAttention(torch.autograd.Function):
    """softmax(q kᵀ / √D) v in tiles: q (B, H, Sq, D), k and v (B, H, Sk, D); causal: query i
    sees key j when j <= i. Called as FlashAttention.apply(q, k, v, causal)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        """out (B, H, Sq, D) in q's dtype, computed in float32, tile by tile with the online
        softmax (never a (Sq, Sk) tensor); ctx.save_for_backward(q, k, v, out, L), L (B, H, Sq)
        the log-sum-exp of each query's scaled scores."""
        B, H, Sq, D = q.shape
        Sk = k.shape[2]
        scale = 1.0 / math.sqrt(D)
        out = torch.empty(B, H, Sq, D, dtype=q.dtype, device=q.device)
        L = torch.empty(B, H, Sq, dtype=torch.float32, device=q.device)
        for qs in range(0, Sq, BLOCK_Q):
            qe = min(qs + BLOCK_Q, Sq)
            qi = q[:, :, qs:qe].float()
            m = torch.full((B, H, qe - qs), -math.inf, dtype=torch.float32, device=q.device)
            l = torch.zeros(B, H, qe - qs, dtype=torch.float32, device=q.device)
            acc = torch.zeros(B, H, qe - qs, D, dtype=torch.float32, device=q.device)
            k_end = min(Sk, qe) if causal else Sk
            for ks in range(0, k_end, BLOCK_K):
                ke = min(ks + BLOCK_K, Sk)
                kj = k[:, :, ks:ke].float()
                vj = v[:, :, ks:ke].float()
                s = (qi @ kj.transpose(-1, -2)) * scale
                if causal:
                    rows = torch.arange(qs, qe, device=q.device)[:, None]
                    cols = torch.arange(ks, ke, device=q.device)[None, :]
                    s = s.masked_fill(cols > rows, -math.inf)
                m_new = torch.maximum(m, s.amax(-1))
                m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                alpha = torch.exp(m - m_safe)
                p = torch.exp(s - m_safe[..., None])
                l = l * alpha + p.sum(-1)
                acc = acc * alpha[..., None] + p @ vj
                m = m_new
            l_safe = torch.where(l == 0, torch.ones_like(l), l)
            out[:, :, qs:qe] = (acc / l_safe[..., None]).to(q.dtype)
            L[:, :, qs:qe] = m + torch.log(l)
        ctx.causal = causal
        ctx.save_for_backward(q, k, v, out, L)
        return out

    @staticmethod
    def backward(ctx, do):
        """(dq, dk, dv, None), tile by tile from what the forward saved: P = exp(S − L)."""
        q, k, v, out, L = ctx.saved_tensors
        causal = ctx.causal
        B, H, Sq, D = q.shape
        Sk = k.shape[2]
        scale = 1.0 / math.sqrt(D)
        Drow = (do.float() * out.float()).sum(-1)
        dq = torch.zeros(B, H, Sq, D, dtype=torch.float32, device=q.device)
        dk = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=k.device)
        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)
        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):
            ke = ks + BLOCK_K
            kj = k[:, :, ks:ke].float()
            vj = v[:, :, ks:ke].float()
            q_start = (ks // BLOCK_Q) * BLOCK_Q if causal else 0
            for qs in range(q_start, Sq, BLOCK_Q):
                qe = min(qs + BLOCK_Q, Sq)
                qi = q[:, :, qs:qe].float()
                doi = do[:, :, qs:qe].float()
                s = (qi @ kj.transpose(-1, -2)) * scale
                if causal:
                    rows = torch.arange(qs, qe, device=q.device)[:, None]
                    cols = torch.arange(ks, ke, device=q.device)[None, :]
                    s = s.masked_fill(cols > rows, -math.inf)
                p = torch.exp(s - L[:, :, qs:qe, None])
                dv[:, :, ks:ke] += p.transpose(-1, -2) @ doi
                dp = doi @ vj.transpose(-1, -2)
                ds = p * (dp - Drow[:, :, qs:qe, None])
                dq[:, :, qs:qe] += (ds @ kj) * scale
                dk[:, :, ks:ke] += (ds.transpose(-1, -2) @ qi) * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None
'''

BLIND: dict[str, str] = {FIRST: BASE}
BLIND['causal mask built from tile-local indices (arange(qe - qs) vs arange(ke - ks)) instead of global positions'] = edited(BASE, [
    ('                s = (qi @ kj.transpose(-1, -2)) * scale\n                if causal:\n                    rows = torch.arange(qs, qe, device=q.device)[:, None]\n                    cols = torch.arange(ks, ke, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, -math.inf)\n                m_new = torch.maximum(m, s.amax(-1))\n',
     '                s = (qi @ kj.transpose(-1, -2)) * scale\n                if causal:\n                    rows = torch.arange(qe - qs, device=q.device)[:, None]\n                    cols = torch.arange(ke - ks, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, -math.inf)\n                m_new = torch.maximum(m, s.amax(-1))\n'),
    ('        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):\n            ke = ks + BLOCK_K\n            kj = k[:, :, ks:ke].float()\n',
     '        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk, BLOCK_K):\n            ke = min(ks + BLOCK_K, Sk)\n            kj = k[:, :, ks:ke].float()\n'),
    ('                s = (qi @ kj.transpose(-1, -2)) * scale\n                if causal:\n                    rows = torch.arange(qs, qe, device=q.device)[:, None]\n                    cols = torch.arange(ks, ke, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, -math.inf)\n                p = torch.exp(s - L[:, :, qs:qe, None])\n',
     '                s = (qi @ kj.transpose(-1, -2)) * scale\n                if causal:\n                    rows = torch.arange(qe - qs, device=q.device)[:, None]\n                    cols = torch.arange(ke - ks, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, -math.inf)\n                p = torch.exp(s - L[:, :, qs:qe, None])\n'),
])
BLIND['no guard for l == 0: out = acc / l gives NaN for rows that see no key (Sk = 0)'] = edited(BASE, [
    ('                m = m_new\n            l_safe = torch.where(l == 0, torch.ones_like(l), l)\n            out[:, :, qs:qe] = (acc / l_safe[..., None]).to(q.dtype)\n            L[:, :, qs:qe] = m + torch.log(l)\n',
     '                m = m_new\n            out[:, :, qs:qe] = (acc / l[..., None]).to(q.dtype)\n            L[:, :, qs:qe] = m + torch.log(l)\n'),
    ('        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):\n            ke = ks + BLOCK_K\n            kj = k[:, :, ks:ke].float()\n',
     '        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk, BLOCK_K):\n            ke = min(ks + BLOCK_K, Sk)\n            kj = k[:, :, ks:ke].float()\n'),
])
BLIND['running max m started at 0 instead of -inf, so l underflows when every score is very negative'] = edited(BASE, [
    ('            qi = q[:, :, qs:qe].float()\n            m = torch.full((B, H, qe - qs), -math.inf, dtype=torch.float32, device=q.device)\n            l = torch.zeros(B, H, qe - qs, dtype=torch.float32, device=q.device)\n',
     '            qi = q[:, :, qs:qe].float()\n            m = torch.zeros(B, H, qe - qs, dtype=torch.float32, device=q.device)\n            l = torch.zeros(B, H, qe - qs, dtype=torch.float32, device=q.device)\n'),
    ('        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):\n            ke = ks + BLOCK_K\n            kj = k[:, :, ks:ke].float()\n',
     '        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk, BLOCK_K):\n            ke = min(ks + BLOCK_K, Sk)\n            kj = k[:, :, ks:ke].float()\n'),
])
BLIND['L saved in the input dtype (bf16/fp16) instead of float32'] = edited(BASE, [
    ('        out = torch.empty(B, H, Sq, D, dtype=q.dtype, device=q.device)\n        L = torch.empty(B, H, Sq, dtype=torch.float32, device=q.device)\n        for qs in range(0, Sq, BLOCK_Q):\n',
     '        out = torch.empty(B, H, Sq, D, dtype=q.dtype, device=q.device)\n        L = torch.empty(B, H, Sq, dtype=q.dtype, device=q.device)\n        for qs in range(0, Sq, BLOCK_Q):\n'),
    ('        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):\n            ke = ks + BLOCK_K\n            kj = k[:, :, ks:ke].float()\n',
     '        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk, BLOCK_K):\n            ke = min(ks + BLOCK_K, Sk)\n            kj = k[:, :, ks:ke].float()\n'),
])
BLIND["out left in float32, never cast back to q's dtype"] = edited(BASE, [
    ('        scale = 1.0 / math.sqrt(D)\n        out = torch.empty(B, H, Sq, D, dtype=q.dtype, device=q.device)\n        L = torch.empty(B, H, Sq, dtype=torch.float32, device=q.device)\n',
     '        scale = 1.0 / math.sqrt(D)\n        out = torch.empty(B, H, Sq, D, dtype=torch.float32, device=q.device)\n        L = torch.empty(B, H, Sq, dtype=torch.float32, device=q.device)\n'),
    ('            l_safe = torch.where(l == 0, torch.ones_like(l), l)\n            out[:, :, qs:qe] = (acc / l_safe[..., None]).to(q.dtype)\n            L[:, :, qs:qe] = m + torch.log(l)\n',
     '            l_safe = torch.where(l == 0, torch.ones_like(l), l)\n            out[:, :, qs:qe] = acc / l_safe[..., None]\n            L[:, :, qs:qe] = m + torch.log(l)\n'),
    ('        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):\n            ke = ks + BLOCK_K\n            kj = k[:, :, ks:ke].float()\n',
     '        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk, BLOCK_K):\n            ke = min(ks + BLOCK_K, Sk)\n            kj = k[:, :, ks:ke].float()\n'),
])
BLIND['dk and dv allocated with zeros_like(q), i.e. with Sq rows instead of Sk'] = edited(BASE, [
    ('        Drow = (do.float() * out.float()).sum(-1)\n        dq = torch.zeros(B, H, Sq, D, dtype=torch.float32, device=q.device)\n        dk = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=k.device)\n        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):\n            ke = ks + BLOCK_K\n            kj = k[:, :, ks:ke].float()\n',
     '        Drow = (do.float() * out.float()).sum(-1)\n        dq = torch.zeros_like(q, dtype=torch.float32)\n        dk = torch.zeros_like(q, dtype=torch.float32)\n        dv = torch.zeros_like(q, dtype=torch.float32)\n        for ks in range(0, Sk, BLOCK_K):\n            ke = min(ks + BLOCK_K, Sk)\n            kj = k[:, :, ks:ke].float()\n'),
])
BLIND['dO flattened with .view(-1, D) to compute D = rowsum(dO * O), breaks on non-contiguous dO'] = edited(BASE, [
    ('        scale = 1.0 / math.sqrt(D)\n        Drow = (do.float() * out.float()).sum(-1)\n        dq = torch.zeros(B, H, Sq, D, dtype=torch.float32, device=q.device)\n',
     '        scale = 1.0 / math.sqrt(D)\n        Drow = (do.view(-1, D).float() * out.view(-1, D).float()).sum(-1).view(B, H, Sq)\n        dq = torch.zeros(B, H, Sq, D, dtype=torch.float32, device=q.device)\n'),
    ('        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk - BLOCK_K + 1, BLOCK_K):\n            ke = ks + BLOCK_K\n            kj = k[:, :, ks:ke].float()\n',
     '        dv = torch.zeros(B, H, Sk, D, dtype=torch.float32, device=v.device)\n        for ks in range(0, Sk, BLOCK_K):\n            ke = min(ks + BLOCK_K, Sk)\n            kj = k[:, :, ks:ke].float()\n'),
])

