"""Small pretraining shards in NVIDIA's HDF5 layout, written with h5py directly, and a tiny model."""

from pathlib import Path

import h5py
import numpy as np
import torch
from safetensors.torch import load_file

from bert.model.config import BertConfig
from bert.model.network import BertForPreTraining
from bert.pretraining.masking import mask_batch

VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + [f"w{i}" for i in range(40)]
    + [f"##p{i}" for i in range(19)]
)
PAD, CLS, SEP, MASK = 0, 2, 3, 4


def write_vocab(path: Path) -> Path:
    path.write_text("\n".join(VOCAB) + "\n")
    return path


def write_shard(
    path: Path,
    rows: int,
    seq_len: int,
    max_pred: int,
    seed: int,
    dynamic: bool = False,
    min_length: int | None = None,
    drawn_masks: bool = False,
    next_sentence: bool = True,
) -> Path:
    """Rows of random real length in [min_length (default seq_len // 2), seq_len], then padding.
    Static masks: exactly max_pred tokens per row, or with `drawn_masks` drawn as the examples
    stage draws them (bert.pretraining.masking, masked_lm_prob 0.15: rows of different lengths mask different
    numbers of tokens, as real shards do). Without `next_sentence`: MLM-only shards (no NSP labels)."""
    rng = np.random.default_rng(seed)
    input_ids = np.zeros((rows, seq_len), np.int32)
    input_mask = np.zeros((rows, seq_len), np.int8)
    segment_ids = np.zeros((rows, seq_len), np.int8)
    positions = np.zeros((rows, max_pred), np.int32)
    labels = np.zeros((rows, max_pred), np.int32)
    for r in range(rows):
        length = int(rng.integers(min_length or seq_len // 2, seq_len + 1))
        split = int(rng.integers(2, length - 2))
        tokens = rng.integers(5, len(VOCAB), size=length)
        tokens[0], tokens[split], tokens[length - 1] = CLS, SEP, SEP
        input_ids[r, :length] = tokens
        input_mask[r, :length] = 1
        segment_ids[r, split + 1 : length] = 1
        if not dynamic and not drawn_masks:
            maskable = [i for i in range(1, length - 1) if i != split]
            # every row masks max_pred tokens: a batch's mean MLM loss is then the mean of its
            # halves' means, so 1 rank x 8 and 2 ranks x 4 agree exactly (see docs/operations.md)
            chosen = np.sort(rng.choice(maskable, size=max_pred, replace=False))
            positions[r, : len(chosen)] = chosen
            labels[r, : len(chosen)] = input_ids[r, chosen]
            input_ids[r, chosen] = MASK
    if drawn_masks and not dynamic:
        candidate = (input_mask == 1) & ~np.isin(input_ids, (CLS, SEP))
        input_ids, positions, labels = mask_batch(
            input_ids, candidate, None, 0.15, max_pred, np.arange(len(VOCAB)), MASK, rng
        )
    with h5py.File(path, "w") as f:
        for name, data in [
            ("input_ids", input_ids),
            ("input_mask", input_mask),
            ("segment_ids", segment_ids),
            ("masked_lm_positions", positions),
            ("masked_lm_ids", labels),
            ("next_sentence_labels", rng.integers(0, 2, size=rows).astype(np.int8)),
        ]:
            if name != "next_sentence_labels" or next_sentence:
                f.create_dataset(name, data=data, track_times=False)
        f.attrs["masking"] = "dynamic" if dynamic else "static"
    return path


def write_shards(
    directory: Path,
    sizes=(40, 24, 33),
    seq_len=16,
    max_pred=3,
    dynamic=False,
    min_length=None,
    drawn_masks=False,
    next_sentence=True,
) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return [
        write_shard(
            directory / f"part-{i:05d}.hdf5",
            n,
            seq_len,
            max_pred,
            100 + i,
            dynamic,
            min_length,
            drawn_masks,
            next_sentence,
        )
        for i, n in enumerate(sizes)
    ]


def tiny_model(seed: int = 0, dropout: float = 0.1) -> BertForPreTraining:
    import torch

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    return BertForPreTraining(config)


def tiny_hf_folder(folder: Path) -> Path:
    """A tiny BERT in Hugging Face format as Google's releases are: config.json, vocab.txt and
    pytorch_model.bin (no model.safetensors, no tokenizer_config.json)."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)  # fmt: skip
    BertForPreTraining(config).save_pretrained(folder, vocab_file=write_vocab(folder.parent / "vocab.txt"))
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    (folder / "tokenizer_config.json").unlink()
    return folder
