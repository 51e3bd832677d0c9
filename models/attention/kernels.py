"""Single-device block kernels of the ring: attention of a query block over a key/value
block that also returns (and in backward consumes) the log-sum-exp.

Tensors are [batch, heads, seq, head_dim]; key/value may have fewer heads (GQA);
the log-sum-exp is float32 [batch, heads, seq]. PyTorch's own flash kernels serve
both devices (`parallel.ring_kernel: torch`, the default); on CUDA, flash-attn's
(`parallel.ring_kernel: flash_attn`, installed with the `gpu` extra and imported
only then) is the alternative. The ring code around them is identical.
"""
from __future__ import annotations

import inspect
from typing import Protocol

import torch


class BlockKernel(Protocol):
    def forward(self, q, k, v, causal: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]: ...

    def backward(self, dout, q, k, v, out, lse, causal: bool, scale: float
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...


class CPUFlashKernel:
    """PyTorch's flash attention for CPU (fp32 / bf16)."""

    def forward(self, q, k, v, causal, scale):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)

    def backward(self, dout, q, k, v, out, lse, causal, scale):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dout.contiguous(), q, k, v, out, lse.contiguous(), 0.0, causal, scale=scale)


class CUDAFlashKernel:
    """PyTorch's flash attention for CUDA (FlashAttention-2 inside PyTorch; fp16 / bf16, GQA)."""

    def __init__(self):
        if not hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_backward"):
            raise RuntimeError(
                f"PyTorch {torch.__version__} has no CUDA flash attention op "
                "(aten::_scaled_dot_product_flash_attention); install a CUDA build of PyTorch >= 2.2, "
                "or `pip install flash-attn` and set parallel.ring_kernel=flash_attn")

    def forward(self, q, k, v, causal, scale):
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"the ring on CUDA runs in bf16 / fp16 (flash attention), found {q.dtype}; "
                             "set model.dtype=bf16 (fp32 ring attention runs on CPU)")
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)[:2]
        return out, lse[..., :q.shape[2]]

    def backward(self, dout, q, k, v, out, lse, causal, scale):
        # cum_seq_* undefined selects the dense (not varlen) kernel; the philox state is read only
        # with dropout, which the ring never uses
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            dout.contiguous(), q, k, v, out, lse.contiguous(), None, None, q.shape[2], k.shape[2],
            0.0, causal, None, None, scale=scale)


def _supported(fn, **kwargs) -> dict:
    names = inspect.signature(fn).parameters
    return {k: v for k, v in kwargs.items() if k in names}


class FlashAttnKernel:
    """flash-attn 2.x internals, as ring-flash-attn calls them (layout [batch, seq, heads, dim])."""

    def __init__(self):
        from flash_attn.flash_attn_interface import _flash_attn_backward, _flash_attn_forward

        self._fwd, self._bwd = _flash_attn_forward, _flash_attn_backward

    def forward(self, q, k, v, causal, scale):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        kwargs = _supported(self._fwd, dropout_p=0.0, softmax_scale=scale, causal=causal,
                            window_size=(-1, -1), window_size_left=-1, window_size_right=-1,
                            softcap=0.0, alibi_slopes=None, return_softmax=False)
        out, lse = self._fwd(q, k, v, **kwargs)[:2]
        return out.transpose(1, 2), lse

    def backward(self, dout, q, k, v, out, lse, causal, scale):
        dout, q, k, v, out = (t.transpose(1, 2) for t in (dout, q, k, v, out))
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        kwargs = _supported(self._bwd, dropout_p=0.0, softmax_scale=scale, causal=causal,
                            window_size=(-1, -1), window_size_left=-1, window_size_right=-1,
                            softcap=0.0, alibi_slopes=None, deterministic=False, rng_state=None)
        self._bwd(dout.contiguous(), q, k, v, out, lse, dq, dk, dv, **kwargs)
        return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)


KERNELS = ("torch", "flash_attn")


def check_kernel_name(name: str) -> str:
    if name not in KERNELS:
        raise ValueError(f"parallel.ring_kernel={name!r}: expected one of {', '.join(KERNELS)}")
    return name


def kernel_for(device: torch.device, name: str = "torch") -> BlockKernel:
    """The block kernel `parallel.ring_kernel` names, for the device the tensors are on."""
    check_kernel_name(name)
    if device.type != "cuda":
        if name == "flash_attn":
            raise ValueError(f"parallel.ring_kernel=flash_attn needs CUDA tensors, found {device.type}")
        return CPUFlashKernel()
    return FlashAttnKernel() if name == "flash_attn" else CUDAFlashKernel()
