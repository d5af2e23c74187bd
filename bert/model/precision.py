"""The mixed-precision choices of every training and inference loop, in one place."""

import torch

AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """fp16 scales the loss so small gradients do not underflow its narrow range; fp32 and bf16
    need no scaling (the scaler is then disabled: its calls pass through)."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def allow_tf32(device: torch.device, precision: str) -> None:
    """fp32 on an Ampere or newer GPU: matmuls and convolutions on TF32 tensor cores (fp32 range,
    ~10-bit mantissa), as is usual for training."""
    if device.type == "cuda" and precision == "fp32" and torch.cuda.get_device_capability(device)[0] >= 8:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
