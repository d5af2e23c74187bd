"""Stage pretrain@<phase>: BERT pretraining (MLM + NSP, or MLM only) on the HDF5 examples.

    python -m stages.pretrain phase1|phase2

data/weights/<start> + data/examples/<phase>/*.hdf5 + data/vocab/vocab.txt -> data/weights/<phase>/
(Hugging Face format, where a later phase and fine-tuning start from), checkpoints in
data/checkpoints/<phase>/ (resumed), dvclive/pretrain_<phase>/, metrics/pretrain_<phase>.json.
The start is pretrain.phases.<phase>: random (init_random's fresh weights of model.size), a key of
weights (released ones, continued; the optimizer starts fresh), or the phase before.
With distributed.nproc_per_node x nnodes > 1 the stage starts itself again under torchrun.

    python -m stages.pretrain phase1|phase2 --join NODE_RANK

On many nodes, the head node runs the stage (`dvc repro`: node 0, where rank 0 writes every output)
and each other node runs this: torchrun with that node rank, meeting the head at BERT_RDZV_ENDPOINT
(docs/operations.md, execution settings). It never touches DVC and writes nothing but its ranks' logs.
"""

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from bert.distributed.launch import Distributed, launch
from bert.errors import UserError, run_main
from bert.model import family
from bert.model.hf import WEIGHT_FILES, check_reloads
from bert.pretraining.loader import DynamicMasking, PretrainingData
from bert.pretraining.loss import pretraining_objective
from bert.text.tokenization import vocabulary_size
from bert.training.checkpoints import UNREADABLE, file_sha256, load_checkpoint, newest_checkpoint
from bert.training.loop import RunRecord
from bert.training.optim import fit_optimizer_state
from bert.training.run import TrainingRun
from stages.common import layout
from stages.common.params import Params, load_params

log = logging.getLogger("pretrain")
USAGE = "python -m stages.pretrain phase1|phase2 [--join NODE_RANK]"


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in layout.PHASES:
        raise UserError(f"usage: {USAGE}")
    phase = sys.argv[1]
    params = load_params()
    if phase not in params.pretrain.phases:
        raise UserError(
            f"params.yaml: pretrain.phases runs {', '.join(params.pretrain.phases)}, not {phase}; run one of "
            f"those, or add {phase} to pretrain.phases"
        )
    params.check_global_batch(phase)
    launch(
        ["stages.pretrain", phase],
        sys.argv[2:],
        USAGE,
        params.distributed,
        lambda distributed: pretrain(params, phase, distributed),
        checkpoint_dir=layout.checkpoints(phase),
        log_dir=layout.logs(phase),
        outputs=layout.OUTPUT_FOLDERS,
    )


def pretrain(params: Params, phase: str, distributed: Distributed) -> None:
    """The phase's model and data; the run is built as every training run is (bert.training.run)."""
    spec, examples = getattr(params.pretrain, phase), getattr(params.examples, phase)
    vocab_file = layout.vocab_file()
    if not vocab_file.is_file():
        raise UserError(f"{vocab_file}: not found; run the `vocab` stage first")
    shards = sorted(layout.examples(phase).glob("*.hdf5"))
    start_family = family.model_type(layout.weights(params.pretrain.phases[phase]))
    # apex's FusedLayerNorm with use_apex (as FusedLAMB in the run); both fall back to torch when absent
    options = family.pretraining_options(
        start_family, unpad=params.pretrain.unpad, apex_layer_norm=params.pretrain.use_apex,
        next_sentence=examples.next_sentence,
    )  # fmt: skip
    torch.manual_seed(params.seed)  # the same fresh heads on every rank
    model = start_model(params, phase, vocab_file, vocabulary_size(vocab_file), options)
    model.to(distributed.device)

    run = TrainingRun.build(
        model, pretraining_objective, pretraining_data(params, phase, shards, distributed),
        recipe=params.recipe(phase), settings=params.run_settings(phase), record=run_record(params, phase, shards),
        max_steps=spec.max_steps, use_apex=params.pretrain.use_apex, fused_on_cpu=True,
        # phase 2's option (no other phase has one): it continues phase 1's optimizer moments
        optimizer_start=_load_phase1_optimizer if getattr(spec, "init_optimizer_from_phase1", False) else None,
    )  # fmt: skip
    if distributed.is_main:
        log.info(
            "%s: %s (%.1fM parameters), %d shards / %d sequences; batches cut to their longest sequence%s; "
            "encoder on %s",
            phase, _model_name(params), model.num_parameters() / 1e6, len(shards), sum(run.batches.sizes),
            ", sequences binned by length" if params.pretrain.length_binning else "",
            "packed real tokens (unpad)" if params.pretrain.unpad else "padded batches",
        )  # fmt: skip
    run.train()
    if distributed.is_main:
        # What the objective does not train (an MLM-only run's pooler) goes on unchanged from the start.
        start = params.pretrain.phases[phase]
        carried = None if start == "random" else family.untrained_tensors(layout.weights(start), model)
        output = layout.weights(phase)
        model.save_pretrained(
            output, vocab_file=vocab_file, lower_case=params.vocab.lower_case, carried=carried
        )
        check_reloads(model, output, **options)
        log.info("wrote %s", output)


def pretraining_data(
    params: Params, phase: str, shards: list[Path], distributed: Distributed
) -> Callable[..., PretrainingData]:
    """The phase's loader, waiting for the run's batching (bert.training.run.TrainingRun.build):
    its shards, loader workers and, when examples.masking is dynamic, the masks drawn as it reads."""
    examples, masking = getattr(params.examples, phase), None
    if examples.masking == "dynamic":
        masking = DynamicMasking.from_vocab(
            layout.vocab_file(),
            examples.masked_lm_prob,
            examples.max_predictions_per_seq,
            examples.whole_word_mask,
        )
    return functools.partial(
        PretrainingData, shards, num_workers=params.pretrain.data_workers,
        pin_memory=distributed.device.type == "cuda", masking=masking,
    )  # fmt: skip


def start_model(
    params: Params, phase: str, vocab_file: Path, vocab_size: int, options: dict
) -> torch.nn.Module:
    """The model the phase starts from: data/weights/<start> as its stage left it (random's fresh
    weights are the ones seed and model.size draw), in its family (config.json's model_type: BERT's
    MLM + NSP model, or ModernBERT's MLM). From released weights their config.json is the
    shape (model.size is not read) and their vocabulary must be the examples' (vocab.source:
    weights); heads the folder lacks start fresh (the MLM decoder is always the word embeddings)."""
    start = params.pretrain.phases[phase]
    directory = layout.weights(start)
    where = f"pretrain.phases.{phase}: {start}"
    if not (directory / "config.json").is_file():
        raise UserError(
            f"{directory}: no config.json ({where}); run `dvc repro {layout.weights_stage(start)}`"
        )
    released = start in params.weights
    if released:
        released_vocab = layout.tokenizer_file(directory)
        if not released_vocab.is_file() or released_vocab.read_bytes() != vocab_file.read_bytes():
            raise UserError(
                f"{vocab_file} is not {released_vocab}, the vocabulary of weights.{start} ({where}); "
                "run `dvc repro vocab` with vocab.source: weights"
            )
    kind = family.model_type(directory)
    if kind == "modernbert" and getattr(params.examples, phase).next_sentence:
        raise UserError(
            f"examples.next_sentence is true, but {directory} ({where}) is a ModernBERT, which has no "
            "next-sentence head; set examples.next_sentence: false (MLM only)"
        )
    model = family.from_pretrained(directory, "pretraining", **options)
    # A released model may hold more ids than its tokenizer (ModernBERT-base: 50,368 for 50,280 tokens).
    if (model.config.vocab_size < vocab_size) if released else (model.config.vocab_size != vocab_size):
        raise UserError(
            f"{directory} has vocab_size {model.config.vocab_size}, {vocab_file} has {vocab_size}; "
            f"run `dvc repro {layout.weights_stage(start)}`"
        )
    max_seq_length = getattr(params.examples, phase).max_seq_length
    if model.config.max_position_embeddings < max_seq_length:
        raise UserError(
            f"examples.{phase}.max_seq_length {max_seq_length} exceeds the max_position_embeddings "
            f"{model.config.max_position_embeddings} of {directory}/config.json ({where})"
        )
    if released:
        log.info(
            "%s: continuing %s (%d layers, hidden %d; its config.json, not model.size %s)",
            phase, directory, model.config.num_hidden_layers, model.config.hidden_size, params.model.size,
        )  # fmt: skip
    return model


def _model_name(params: Params) -> str:
    start = params.pretrain_start
    return params.model.size if start == "random" else f"weights.{start}"


def run_record(params: Params, phase: str, shards: list[Path]) -> RunRecord:
    """Where the phase's run keeps its files, how it computes, and what it learns from besides its
    recipe (the run adds that: bert.training.run), which its checkpoints belong to (their signature
    hashes it). Not the world size or max_steps: resuming on other hardware, or with a larger
    max_steps (a longer run), is allowed."""
    examples = getattr(params.examples, phase)
    described = {
        "phase": phase,
        "model": params.model.size,
        "masking": examples.masking,
        "next_sentence": examples.next_sentence,
        "shards": [(p.name, p.stat().st_size) for p in shards],
        # What the shards were made from and how (the manifest lists params, vocab hash and counts).
        "manifest": file_sha256(layout.examples(phase) / "manifest.json"),
        # A phase continuing another: a new one must never let it resume its old checkpoints.
        # From released weights: their weights file (not model.size) says where it starts.
        "init": _start_weights(params, phase),
    }
    return RunRecord(
        checkpoint_dir=layout.checkpoints(phase),
        live_dir=layout.live(phase),
        metrics_file=layout.training_metrics(phase),
        description=described,
        execution={
            "unpad": params.pretrain.unpad,
            "use_apex": params.pretrain.use_apex,
            "data_workers": params.pretrain.data_workers,
        },
    )


def _start_weights(params: Params, phase: str) -> str | None:
    """The hash of the weights file the phase starts from; None for fresh weights (seed and
    model.size, in the signature, make them)."""
    start = params.pretrain.phases[phase]
    if start == "random":
        return None
    directory = layout.weights(start)
    return file_sha256(next(directory / name for name in WEIGHT_FILES if (directory / name).is_file()))


def _load_phase1_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """Phase 2 continues phase 1's optimizer moments (NVIDIA's --init_checkpoint with
    --resume_from_checkpoint semantics) from the newest phase 1 checkpoint, with phase 2's LR."""
    newest = newest_checkpoint(layout.checkpoints("phase1"))
    if newest is None:
        raise UserError(
            f"pretrain.phase2.init_optimizer_from_phase1 is on but {layout.checkpoints('phase1')} holds no "
            "checkpoint; re-run phase 1 or turn the option off"
        )
    try:
        state = load_checkpoint(newest)["optimizer"]
    except UNREADABLE as error:
        raise UserError(
            f"{newest}: unreadable ({str(error).split('. ')[0]}); "
            "pretrain.phase2.init_optimizer_from_phase1 needs phase 1's last checkpoint: run "
            "`dvc repro --force pretrain@phase1` (it resumes from an older one to the same weights) "
            "or turn the option off"
        ) from None
    phase2_settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
    try:
        optimizer.load_state_dict(fit_optimizer_state(state, optimizer))  # across use_apex too
    except (ValueError, KeyError) as error:
        raise UserError(
            f"{newest}: optimizer state does not fit this model/optimizer ({type(optimizer).__name__}): {error}"
        ) from None
    for group, settings in zip(optimizer.param_groups, phase2_settings):  # phase 2's own LR and schedule
        group.pop("initial_lr", None)
        group.update(settings)
    log.info("optimizer state from %s", newest)


if __name__ == "__main__":
    run_main(main)
