"""What this machine's CPU computes natively, for the choices that depend on it: the dense
encoder's dtype (``netcast.retrievers.dense.encoder_dtype``) and the dtype a LoRA training
holds its frozen base in (``netcast.models.training.train_dtype``)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def native_bf16() -> bool:
    """Whether torch computes bfloat16 matrix products natively here (oneDNN's check: AVX-512
    or AMX); without it torch emulates them, about 100x slower than float32 on an AVX2-only
    CPU (``benchmarks/train_dtype.py``). False on a torch build without oneDNN."""
    import torch

    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return bool(check and check())
    except Exception:  # a torch build without oneDNN
        return False
