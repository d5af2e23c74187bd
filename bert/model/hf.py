"""Hugging Face interop: read and write BERT directories in the `transformers` format.

A Hugging Face BERT directory holds `config.json` (BertConfig's fields), the weights
(`model.safetensors`, or the older `pytorch_model.bin`, possibly sharded with an index) and,
for a tokenizer, `vocab.txt` + `tokenizer_config.json`. Our modules are named for reading;
`parameter_names` below is the one place that says which of our tensors is which of theirs.
"""

import json
import logging
import shutil
import zipfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from bert.atomic import atomic_folder
from bert.errors import UserError, first_line
from bert.inputs import check_content, read_json, shown
from bert.model.config import BertConfig
from bert.text.tokenization import TokenLayout, load_tokenizer

log = logging.getLogger(__name__)

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# The models whose head is `classifier` on the pooled [CLS] (a fine-tuned one is no start for the other).
CLASSIFIER_HEADS = ("BertForSequenceClassification", "BertForMultipleChoice")
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")

# Tensors in HF checkpoints that carry nothing of their own: a buffer of 0..511, and the MLM
# decoder, whose weight is the word embedding matrix and whose bias is `cls.predictions.bias`.
REDUNDANT_HF_KEYS = (
    "embeddings.position_ids",
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
)


def _encoder_names(config: BertConfig, ours: str, theirs: str) -> list[tuple[str, tuple[str, ...]]]:
    """(our name, HF names) pairs for BertModel's tensors, under the prefixes `ours`/`theirs`."""
    pairs = [
        ("embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight"),
        ("embeddings.position_embeddings.weight", "embeddings.position_embeddings.weight"),
        ("embeddings.token_type_embeddings.weight", "embeddings.token_type_embeddings.weight"),
        ("embeddings.layer_norm.weight", "embeddings.LayerNorm.weight"),
        ("embeddings.layer_norm.bias", "embeddings.LayerNorm.bias"),
    ]
    names = [(ours + mine, (theirs + hf,)) for mine, hf in pairs]
    for i in range(config.num_hidden_layers):
        mine, hf = f"{ours}layers.{i}.", f"{theirs}encoder.layer.{i}."
        for kind in ("weight", "bias"):
            # Our fused QKV projection is HF's query, key and value stacked along the output dim.
            qkv = tuple(f"{hf}attention.self.{part}.{kind}" for part in ("query", "key", "value"))
            names += [
                (f"{mine}attention.qkv.{kind}", qkv),
                (f"{mine}attention.out.{kind}", (f"{hf}attention.output.dense.{kind}",)),
                (f"{mine}attention_norm.{kind}", (f"{hf}attention.output.LayerNorm.{kind}",)),
                (f"{mine}ffn_in.{kind}", (f"{hf}intermediate.dense.{kind}",)),
                (f"{mine}ffn_out.{kind}", (f"{hf}output.dense.{kind}",)),
                (f"{mine}ffn_norm.{kind}", (f"{hf}output.LayerNorm.{kind}",)),
            ]
    return names


def _pooler_names(ours: str, theirs: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(f"{ours}pooler.{kind}", (f"{theirs}pooler.dense.{kind}",)) for kind in ("weight", "bias")]


def parameter_names(model: torch.nn.Module) -> list[tuple[str, tuple[str, ...]]]:
    """For every tensor of `model` (one of bert.model.network's models, told apart by class name, as
    config.json's `architectures` tells transformers' apart): (our state_dict key, the HF keys it
    is made of, in order). HF's task models keep the encoder under `bert.`, as ours do; its bare
    BertModel has none. This module never imports bert.model.network, which imports it."""
    kind = type(model).__name__
    if kind == "BertModel":
        return _encoder_names(model.config, "", "") + _pooler_names("", "")
    names = _encoder_names(model.config, "bert.", "bert.")
    if kind == "BertForPreTraining":
        next_sentence = model.nsp_classifier is not None  # MLM only: no pooler, no NSP head
        names += _pooler_names("bert.", "bert.") if next_sentence else []
        for kind in ("weight", "bias"):
            names += [
                (f"mlm_transform.{kind}", (f"cls.predictions.transform.dense.{kind}",)),
                (f"mlm_norm.{kind}", (f"cls.predictions.transform.LayerNorm.{kind}",)),
            ]
            names += [(f"nsp_classifier.{kind}", (f"cls.seq_relationship.{kind}",))] if next_sentence else []
        names.append(("mlm_bias", ("cls.predictions.bias",)))
    elif kind == "BertForQuestionAnswering":
        names += [(f"qa_outputs.{kind}", (f"qa_outputs.{kind}",)) for kind in ("weight", "bias")]
    elif kind in CLASSIFIER_HEADS:
        names += _pooler_names("bert.", "bert.")
        names += [(f"classifier.{kind}", (f"classifier.{kind}",)) for kind in ("weight", "bias")]
    else:
        raise TypeError(f"no Hugging Face names for {type(model).__name__}")
    return names


def to_hf_state_dict(model) -> dict[str, torch.Tensor]:
    """Our weights under HF's names: separate, contiguous tensors (safetensors refuses views
    that share memory), the tied decoder left out as `transformers` itself saves it."""
    ours = model.state_dict()
    hf_state = {}
    for mine, theirs in parameter_names(model):
        for name, part in zip(theirs, ours[mine].detach().chunk(len(theirs), dim=0)):
            hf_state[name] = part.clone().contiguous()
    return hf_state


def _normalise_hf_keys(hf_state: dict[str, torch.Tensor], with_prefix: bool) -> dict[str, torch.Tensor]:
    """Bring the keys of any HF BERT checkpoint to the form `parameter_names` uses: LayerNorm
    `gamma`/`beta` (checkpoints converted from TensorFlow) become `weight`/`bias`, and the
    encoder gains or loses its `bert.` prefix to match the model being loaded."""
    encoder_roots = ("embeddings.", "encoder.", "pooler.")
    normalised = {}
    for key, tensor in hf_state.items():
        if key.endswith(".gamma"):
            key = key[: -len("gamma")] + "weight"
        elif key.endswith(".beta"):
            key = key[: -len("beta")] + "bias"
        if with_prefix and key.startswith(encoder_roots):
            key = "bert." + key
        elif not with_prefix and key.startswith("bert."):
            key = key[len("bert.") :]
        normalised[key] = tensor
    # Old checkpoints may keep the MLM bias only as the decoder's.
    if "cls.predictions.bias" not in normalised and "cls.predictions.decoder.bias" in normalised:
        normalised["cls.predictions.bias"] = normalised["cls.predictions.decoder.bias"]
    return normalised


# The namespaces whose tensors a pretraining model carries from its start when its objective does
# not train them (the pooler and the NSP head of an MLM-only run); a task head (classifier,
# qa_outputs) is no part of a pretrained encoder and is left behind.
CARRIED_NAMESPACES = ("bert.", "cls.")


def untrained_tensors(directory: str | Path, model) -> dict[str, torch.Tensor]:
    """The tensors of the Hugging Face folder `directory` that `model` (loaded from it) does not
    hold, under the names `save_pretrained` writes: what its objective does not train, to be
    carried unchanged to the folder the model is saved in (`save_pretrained(carried=...)`). An
    MLM-only model continued from released weights holds no pooler and no NSP head; without this,
    fine-tuning would start from a fresh pooler, worse than the released one."""
    prefixed = type(model).__name__ != "BertModel"
    source = _normalise_hf_keys(read_hf_weights(Path(directory)), with_prefix=prefixed)
    held = {name for _, theirs in parameter_names(model) for name in theirs}
    carried = {
        name: tensor
        for name, tensor in sorted(source.items())
        if name not in held
        and name.removeprefix("bert.") not in REDUNDANT_HF_KEYS
        and name.startswith(CARRIED_NAMESPACES if prefixed else ("pooler.",))
    }
    if carried:
        log.info(
            "%s: not trained by %s's objective, carried unchanged: %s",
            directory, type(model).__name__, ", ".join(carried),
        )  # fmt: skip
    return carried


def check_reloads(model, directory: str | Path, **options) -> None:
    """The folder `model` (a BertForPreTraining) was just saved in, loaded with the `options` it
    was built with, gives the same outputs, so a broken save fails where it was made."""
    reloaded = type(model).from_pretrained(directory, **options)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, model.config.vocab_size, (2, 12), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    attention_mask = torch.ones_like(input_ids)
    positions = torch.tensor([[1, 4, 0], [2, 3, 7]])
    device = next(model.parameters()).device
    inputs = [tensor.to(device) for tensor in (input_ids, token_type_ids, attention_mask, positions)]
    was_training = model.training
    with torch.no_grad():
        want = model.eval()(*inputs)
        got = reloaded.to(device).eval()(*inputs)
    model.train(was_training)
    same_nsp = want.nsp_logits is None or torch.equal(want.nsp_logits, got.nsp_logits)  # None: MLM only
    if not (torch.equal(want.mlm_logits, got.mlm_logits) and same_nsp):
        raise UserError(f"{directory}: the saved model does not reproduce the trained model's outputs")


def _read_weight_file(path: Path) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            return load_file(path)
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # safetensors and pickle raise many types for a damaged file
        raise _unreadable(path, error) from None


def _unreadable(path: Path, error: Exception) -> UserError:
    """One line for weights that do not load: an HTML page in their place says so; otherwise the
    first line of the library's message (torch's runs to a paragraph)."""
    check_content(path)
    return UserError(
        f"{path}: cannot read the weights ({shown(first_line(error), 160)}); is the file complete?"
    )


def weight_files(directory: Path) -> list[Path]:
    """The file(s) holding a HF directory's tensors: one weight file, or the shards its index lists."""
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return [directory / name]
    for name in INDEX_FILES:
        if (directory / name).is_file():
            return [directory / shard for shard in sorted(set(read_weight_index(directory / name).values()))]
    raise UserError(f"{directory}: no {' or '.join(WEIGHT_FILES)} (not a Hugging Face model directory)")


def read_weight_index(path: Path) -> dict[str, str]:
    """A sharded checkpoint's index (model.safetensors.index.json): {tensor name: shard file},
    every shard a file beside the index."""
    index = read_json(path)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(name, str) and isinstance(shard, str) for name, shard in weight_map.items()
    ):
        raise UserError(f"{path}: no 'weight_map' of tensor names to shard files; download the index again")
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard or len(shard.encode()) > 255 or not (path.parent / shard).is_file():
            raise UserError(
                f"{path}: lists the shard {shown(shard)}, which is not a file beside it; fetch it too"
            )
    return weight_map


def read_hf_weights(directory: Path) -> dict[str, torch.Tensor]:
    """All tensors of a HF directory: a single weight file, or the shards listed by an index."""
    state = {}
    for path in weight_files(directory):
        state.update(_read_weight_file(path))
    return state


def tensor_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Names and shapes of a weight file's tensors, without reading their data where the format
    allows it (safetensors; a zip-format .bin is memory-mapped)."""
    try:
        if path.suffix == ".safetensors":
            with safe_open(path, framework="pt") as file:
                return {name: tuple(file.get_slice(name).get_shape()) for name in file.keys()}  # noqa: SIM118 (not iterable)
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
        return {name: tuple(tensor.shape) for name, tensor in state.items()}
    except Exception as error:  # safetensors and pickle raise many types for a damaged file
        raise _unreadable(path, error) from None


def check_pretrained(directory: str | Path, encoder: type[torch.nn.Module]) -> BertConfig:
    """That a HF BERT directory will load: config.json valid (BertConfig), and every tensor of
    `encoder` (bert.model.network.BertModel) present with the shape config.json gives it (the pooler,
    which a model may start fresh, only checked when there). Reads tensor names and shapes, not
    the weights; for download_weights, before it publishes the folder."""
    directory = Path(directory)
    config = BertConfig.from_json_file(directory / "config.json")
    shapes: dict[str, tuple[int, ...]] = {}
    for path in weight_files(directory):
        shapes.update(tensor_shapes(path))
    shapes = _normalise_hf_keys(shapes, with_prefix=False)
    with torch.device("meta"):  # shapes only: no memory for BERT-large's weights
        expected = encoder(config).state_dict()
    for mine, theirs in _encoder_names(config, "", "") + _pooler_names("", ""):
        missing = [name for name in theirs if name not in shapes]
        if missing and mine.startswith("pooler."):
            continue  # a model without a pooler (a SQuAD head) gets a fresh one
        if missing:
            raise UserError(
                f"{directory}: the weights have no tensor {missing[0]!r}, which config.json "
                f"({config.num_hidden_layers} layers) needs; the weights and config.json do not belong together"
            )
        # Our fused QKV is HF's query, key and value stacked along the first dimension.
        want = tuple(expected[mine].shape)
        part = (want[0] // len(theirs), *want[1:])
        wrong = next((name for name in theirs if shapes[name] != part), None)
        if wrong:
            raise UserError(
                f"{directory}: the tensor {wrong!r} has shape {list(shapes[wrong])}, but config.json "
                f"(hidden_size {config.hidden_size}, intermediate_size {config.intermediate_size}, vocab_size "
                f"{config.vocab_size}, ...) makes it {list(part)}; the weights and config.json do not belong together"
            )
    return config


def _num_labels(directory: Path, hf_state: dict[str, torch.Tensor], asked: int | None) -> int:
    """The size of the BertForSequenceClassification head loaded from `directory`. A folder with
    a classifier (fine-tuned, by us or by transformers) fixes it: its config.json's id2label
    (transformers leaves it out for its default of 2 labels) and its weights must agree, with each
    other and with `asked` when given. A folder without one (a pretrained encoder) gets a fresh
    head of `asked` labels; an id2label there describes no weights and gives way, with a warning."""
    values = read_json(directory / "config.json")  # an object: from_json_file checked it
    id2label = values.get("id2label")
    in_config = len(id2label) if isinstance(id2label, dict) else None
    classifier = hf_state.get("classifier.weight")
    if classifier is None:
        if asked is None:
            raise UserError(
                f"{directory}: the weights hold no classifier (a pretrained encoder): "
                "pass num_labels for a fresh head"
            )
        if in_config is not None and in_config != asked:
            log.warning(
                "%s: config.json's id2label has %d labels, but the weights hold no classifier: "
                "a fresh head of num_labels=%d",
                directory,
                in_config,
                asked,
            )
        return asked
    found = classifier.shape[0]
    if in_config is not None and in_config != found:
        raise UserError(
            f"{directory}: config.json's id2label has {in_config} labels but the classifier in the "
            f"weights has {found}; the folder is inconsistent"
        )
    if asked is not None and asked != found:
        raise UserError(
            f"{directory}: fine-tuned for {found} labels (its classifier"
            f"{', config.json id2label' if in_config else ''}), not the num_labels={asked} asked for; "
            f"pass num_labels={found}, or None for the folder's"
        )
    # transformers trains a single output as a regression and more as single-label classes, as
    # we do, unless problem_type says otherwise (multi-label, multi-output regression): refused.
    problem_type = values.get("problem_type")
    expected = "regression" if found == 1 else "single_label_classification"
    if problem_type not in (None, expected):
        raise UserError(
            f"{directory}: problem_type {problem_type!r} with {found} labels is not supported; "
            f"BertForSequenceClassification does {expected!r} for {found} labels"
        )
    return found


def _check_head_kind(directory: Path, cls, hf_state: dict[str, torch.Tensor]) -> None:
    """A classifier fine-tuned for one kind of task is not a start for the other: a multiple-choice
    head (one score per choice) would load as a one-output regression, and a sequence classifier
    as a multiple-choice head of the wrong size. config.json's architectures tells them apart."""
    architectures = read_json(directory / "config.json").get("architectures")
    heads = CLASSIFIER_HEADS
    made_as = [name for name in architectures if name in heads] if isinstance(architectures, list) else []
    if "classifier.weight" in hf_state and made_as and cls.__name__ in heads and cls.__name__ not in made_as:
        raise UserError(
            f"{directory}: a {made_as[0]} (config.json's architectures), not a {cls.__name__}; "
            "fine-tune this task from a pretrained encoder (finetune.init), not from another task's model"
        )


def head_config(model, label_names: tuple[str, ...] | None) -> dict:
    """config.json entries that tell transformers a sequence classifier's size and loss, for
    either family's (Bert- or ModernBertForSequenceClassification): id2label (the number of labels)
    and label2id, by the task's label names (as run_glue.py writes them) or LABEL_i as transformers
    names them, and problem_type. Nothing for any other model."""
    if not type(model).__name__.endswith("ForSequenceClassification"):
        return {}
    if label_names is not None and len(label_names) != model.num_labels:
        raise ValueError(f"{len(label_names)} label names for a classifier of {model.num_labels} labels")
    labels = list(label_names or (f"LABEL_{i}" for i in range(model.num_labels)))
    return {
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)},
        "problem_type": "regression" if model.num_labels == 1 else "single_label_classification",
    }


# The tensors of a fine-tuned task head, left behind by `fresh_head` (the pooler is the encoder's).
TASK_HEAD_PREFIXES = ("classifier.", "qa_outputs.")


def load_pretrained(cls, directory: str | Path, *, fresh_head: bool = False, **kwargs):
    """`cls.from_pretrained(directory)`: see BertPreTrainedModel.from_pretrained. `fresh_head`:
    leave the folder's task head behind (another task's classes), so the model's starts fresh."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: model directory not found")
    config = BertConfig.from_json_file(directory / "config.json")
    hf_state = _normalise_hf_keys(read_hf_weights(directory), with_prefix=cls.__name__ != "BertModel")
    if fresh_head:
        hf_state = {
            name: tensor for name, tensor in hf_state.items() if not name.startswith(TASK_HEAD_PREFIXES)
        }
    _check_head_kind(directory, cls, hf_state)
    if cls.__name__ == "BertForSequenceClassification":
        kwargs["num_labels"] = _num_labels(directory, hf_state, kwargs.get("num_labels"))
    model = cls(config, **kwargs)

    ours, missing = {}, []
    for mine, theirs in parameter_names(model):
        if all(name in hf_state for name in theirs):
            ours[mine] = torch.cat([hf_state.pop(name) for name in theirs], dim=0)
        else:
            missing.append(mine)
    # Without the encoder there is nothing to load; without a pooler or a head there is a
    # model to fine-tune (e.g. SQuAD from a pretraining checkpoint), so those start fresh.
    missing_encoder = [name for name in missing if "layers." in name or "embeddings." in name]
    if missing_encoder:
        raise UserError(
            f"{directory}: the weights lack {len(missing_encoder)} encoder tensors such as {missing_encoder[0]!r}; "
            "they do not match config.json"
        )
    if missing:
        log.warning("%s: not in the checkpoint, freshly initialised: %s", directory, ", ".join(missing))
    unexpected = sorted(key for key in hf_state if key.removeprefix("bert.") not in REDUNDANT_HF_KEYS)
    # An MLM-only pretraining model holds no pooler or NSP head, yet they are not lost: the phase's
    # export carries them unchanged (untrained_tensors), so they are no "unused weights".
    pretraining = cls.__name__ == "BertForPreTraining"
    aside = [key for key in unexpected if pretraining and key.startswith(CARRIED_NAMESPACES)]
    unused = [key for key in unexpected if key not in aside]
    if aside:
        log.info("%s: not held by %s (its objective does not train them); the pretraining stage carries them "
                 "unchanged to its export: %s", directory, cls.__name__, ", ".join(aside))  # fmt: skip
    if unused:
        log.warning("%s: weights not used by %s: %s", directory, cls.__name__, ", ".join(unused))
    try:
        model.load_state_dict(ours, strict=False)
    except RuntimeError as error:  # shape mismatch: the weights were made for another config
        raise UserError(f"{directory}: the weights do not match config.json: {error}") from None
    return model.eval()


def save_pretrained(
    model,
    directory: str | Path,
    vocab_file: str | Path | None = None,
    lower_case: bool = True,
    label_names: tuple[str, ...] | None = None,
    carried: dict[str, torch.Tensor] | None = None,
) -> None:
    """`model.save_pretrained(directory)`: see BertPreTrainedModel.save_pretrained. The folder is
    written beside its final place and renamed into it, so it is either complete or absent.
    `carried`: tensors the model does not hold, written unchanged beside its own (untrained_tensors)."""
    state = to_hf_state_dict(model)
    clash = sorted(set(state) & set(carried or {}))
    if clash:
        raise ValueError(f"carried tensors the model holds itself: {', '.join(clash)}")
    state.update({name: tensor.contiguous() for name, tensor in (carried or {}).items()})
    # An MLM-only pretraining model is, for transformers, its BertForMaskedLM.
    mlm_only = type(model).__name__ == "BertForPreTraining" and model.nsp_classifier is None
    config = {
        "architectures": ["BertForMaskedLM" if mlm_only else type(model).__name__],
        "model_type": "bert",
        **model.config.to_dict(),
        **head_config(model, label_names),
    }
    with atomic_folder(directory) as staging:
        (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_file(state, staging / "model.safetensors", metadata={"format": "pt"})
        if vocab_file is not None:
            write_vocabulary(staging, vocab_file, lower_case, model.config.max_position_embeddings)


def write_vocabulary(folder: Path, vocab_file: str | Path, lower_case: bool, max_length: int) -> None:
    """The vocabulary beside the weights: BERT's vocab.txt, or any other tokenizer's tokenizer.json
    (bert.text.tokenization), and the tokenizer_config.json with which transformers reads it."""
    bert_vocab = Path(vocab_file).suffix != ".json"
    shutil.copyfile(vocab_file, folder / ("vocab.txt" if bert_vocab else "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "BertTokenizer" if bert_vocab else "PreTrainedTokenizerFast",
        "do_lower_case": lower_case,
        "model_max_length": max_length,
    }
    if not bert_vocab:  # transformers' PreTrainedTokenizerFast learns its special tokens here
        tokenizer = load_tokenizer(vocab_file)
        tokenizer_config.update(TokenLayout.of(tokenizer, vocab_file).token_names(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
