"""The mixed-precision choices of every training and inference loop, in one place."""

import torch

AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
