"""PyTorch's own fused attention, ``F.scaled_dot_product_attention``, one backend at a time:
the peers every provider of lesson 09 is measured against.

* ``flash``: FlashAttention-2 (Tri Dao's kernels, ``mma.sync``), the algorithm of ``triton_fwd.py``;
* ``cudnn``: NVIDIA cuDNN's fused attention, which on Hopper uses ``wgmma`` and TMA
  (FlashAttention-3-class);
* ``efficient``: the memory-efficient kernels of xFormers (also fp32).

``torch.nn.attention.sdpa_kernel`` pins one backend; a backend that cannot take a problem raises
instead of falling back, so each is what its name says.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels.attention.problem import variant_reason, visible
from kernels.registry import register

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}
DTYPES = {"flash": (torch.float16, torch.bfloat16), "cudnn": (torch.float16, torch.bfloat16),
          "efficient": (torch.float32, torch.float16, torch.bfloat16)}
MIN_CAPABILITY = {"flash": (8, 0), "cudnn": (8, 0), "efficient": (5, 0)}


# grouped K/V heads (enable_gqa=True): PyTorch's flash and cuDNN checks accept them, the
# memory-efficient backend's refuses them (sdp_utils.cpp, check_batch_size_and_num_heads_dense)
GQA = {"flash": True, "cudnn": True, "efficient": False}
# a sliding window is an explicit boolean mask: the flash backend takes no mask at all; the
# memory-efficient one takes any; cuDNN's is left out until a GPU has checked it
WINDOWS = {"flash": False, "cudnn": False, "efficient": True}


def attention(backend: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              causal: bool = False, window: int | None = None) -> torch.Tensor:
    mask = None if window is None else visible(q.shape[2], k.shape[2], causal, window, q.device)
    with sdpa_kernel(BACKENDS[backend]):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              is_causal=causal and mask is None,
                                              enable_gqa=q.shape[1] != k.shape[1])


def reason(backend: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
           causal: bool = False, window: int | None = None) -> str | None:
    """The limits the backends document, in words (PyTorch would otherwise raise or warn).

    With one backend pinned, a problem it refuses raises ``RuntimeError: No available kernel``
    (PyTorch's ``sdp_utils.cpp`` lists the checks; the ones a course problem can hit are here).
    """
    sq, sk, d = q.shape[2], k.shape[2], q.shape[-1]
    if why := variant_reason(q, k, window, gqa=GQA[backend], windows=WINDOWS[backend]):
        return f"the {backend} backend takes {why}"
    if sq == 0 or sk == 0:
        return (f"empty sequences: every fused SDPA backend refuses Sq = 0 or Sk = 0 "
                f"('No available kernel'); got Sq = {sq}, Sk = {sk}")
    if backend in ("flash", "cudnn") and (d % 8 or d > (256 if backend == "flash" else 128)):
        top = 256 if backend == "flash" else 128
        return f"head dims that are multiples of 8 up to {top}; got D = {d}"
    align = 4 if q.dtype == torch.float32 else 8  # the efficient backend's GEMMs (sm_80+)
    if backend == "efficient" and d % align:
        return (f"head dims that are multiples of {align} in "
                f"{str(q.dtype).removeprefix('torch.')}; got D = {d}")
    if causal and sq != sk and backend == "flash":
        return ("is_causal with Sq != Sk: the flash backend refuses it (PyTorch 2.11: "
                f"'No available kernel'); got Sq = {sq}, Sk = {sk}")
    if backend == "cudnn" and sk == 1:
        # seen with Sk = 1 and with Sq = Sk = 1 on an H200; refused whatever Sq is, to be safe
        return ("one key (Sk = 1): the cuDNN backend refuses it (PyTorch 2.11: 'No available "
                f"kernel'); got Sq = {sq}, Sk = {sk}")
    if any(t.stride(-1) != 1 for t in (q, k, v)):
        return "the head dim must be contiguous (stride 1)"
    if any(t.data_ptr() % 16 for t in (q, k, v)):
        # the fused kernels load 16 bytes at a time and PyTorch passes a view's pointer as it is
        return "q, k and v must start on 16-byte boundaries (a sliced view may not)"
    return None


def make(backend: str):
    def run(q, k, v, causal=False, window=None):
        return attention(backend, q, k, v, causal, window)

    def check(q, k, v, causal=False, window=None):
        return reason(backend, q, k, v, causal, window)

    run.__name__ = f"sdpa_{backend}"
    return run, check


for _name in BACKENDS:
    _run, _check = make(_name)
    register("attention", f"sdpa_{_name}", fn=_run, dtypes=DTYPES[_name], devices=("cuda",),
             needs=("cuda",), min_capability=MIN_CAPABILITY[_name], check=_check,
             meta={"fused": True, "peer": True, "backward": "PyTorch's (same backend)",
                   "gqa": GQA[_name], "window": WINDOWS[_name]},
             description=f"F.scaled_dot_product_attention, {_name} backend only")
