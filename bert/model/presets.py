"""BERT's and ModernBERT's model sizes by name, and the config.json that a size which is not a name points to.

Kept apart from bert/model/network.py, and free of torch, because stages/common/params.py checks `model.size`
for every stage: the data stages then neither import torch nor rerun when the model code changes.
"""

import json
from pathlib import Path

# All presets keep BERT's head size of 64.
PRESETS = {
    "tiny": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=512),
    "mini": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024),
    "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    "large": dict(num_hidden_layers=24, hidden_size=1024, num_attention_heads=16, intermediate_size=4096),
}

# ModernBERT's (bert/model/modernbert.py), the released shapes; the rest (local window 128, a global
# layer every 3rd, rotary thetas 160,000 / 10,000, 8,192 positions) are ModernBertConfig's defaults.
# The tiny one's window (64 tokens) is shorter than the sample world's 128-token sequences, so
# that its local layers attend to a band, not to the whole sequence.
MODERNBERT_PRESETS = {
    "modernbert-tiny": dict(
        num_hidden_layers=3, hidden_size=128, num_attention_heads=2, intermediate_size=192, local_attention=64
    ),
    "modernbert-base": dict(
        num_hidden_layers=22, hidden_size=768, num_attention_heads=12, intermediate_size=1152
    ),
    "modernbert-large": dict(
        num_hidden_layers=28, hidden_size=1024, num_attention_heads=16, intermediate_size=2624
    ),
}

# Every name `model.size` takes (BERT's first: BERT is the default family).
SIZES = (*PRESETS, *MODERNBERT_PRESETS)


def config_file(size: str | Path) -> Path:
    """The Hugging Face config.json that a size other than a preset name means: the path itself, or
    the config.json inside it when it is a folder (a Hugging Face model directory)."""
    path = Path(size)
    return path / "config.json" if path.is_dir() else path


# max_position_embeddings where config.json leaves it out: BertConfig's and ModernBertConfig's
# defaults (the presets' positions; tests/test_modernbert_pipeline.py checks that they agree).
DEFAULT_POSITIONS = {"bert": 512, "modernbert": 8192}


def family_and_positions(size: str | Path) -> tuple[str, int] | None:
    """The family ("bert" or "modernbert") and max_position_embeddings of `model.size`, read without
    torch for stages/common/params.py's checks; None for a config.json that is not a readable JSON object
    (loading it gives that line)."""
    if size in PRESETS or size in MODERNBERT_PRESETS:
        family = "bert" if size in PRESETS else "modernbert"
        return family, DEFAULT_POSITIONS[family]
    try:
        values = json.loads(config_file(size).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(values, dict):
        return None
    family = "modernbert" if values.get("model_type") == "modernbert" else "bert"
    positions = values.get("max_position_embeddings", DEFAULT_POSITIONS[family])
    return (family, positions) if isinstance(positions, int) else None
