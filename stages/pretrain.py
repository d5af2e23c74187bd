"""Stage pretrain_phase1 | pretrain_phase2: BERT pretraining (MLM + NSP, or MLM only) on the HDF5 examples.

    python -m stages.pretrain phase1|phase2

data/examples/<phase>/*.hdf5 + data/vocab/vocab.txt -> data/models/<phase>/ (Hugging Face format),
checkpoints in data/checkpoints/<phase>/ (resumed), dvclive/pretrain_<phase>/, metrics/pretrain_<phase>.json.
Phase 1 starts from fresh weights (pretrain.init: random, of model.size) or continues released
ones (pretrain.init: a key of weights, from data/weights/<init>; the optimizer starts fresh).
With distributed.nproc_per_node x nnodes > 1 the stage starts itself again under torchrun.

    python -m stages.pretrain phase1|phase2 --join NODE_RANK

On many nodes, the head node runs the stage (`dvc repro`: node 0, where rank 0 writes every output)
and each other node runs this: torchrun with that node rank, meeting the head at BERT_RDZV_ENDPOINT
(docs/operations.md, execution settings). It never touches DVC and writes nothing but its ranks' logs.
"""

import logging
import sys
from pathlib import Path

import torch

from bert.distributed.launch import Distributed, launch
from bert.errors import UserError, run_main
from bert.model.config import BertConfig
from bert.model.hf import WEIGHT_FILES
from bert.model.network import BertForPreTraining
from bert.pretraining.loader import DynamicMasking, PretrainingData
from bert.pretraining.loss import pretraining_objective
from bert.training.checkpoints import UNREADABLE, file_sha256, load_checkpoint, newest_checkpoint
from bert.training.loop import RunRecord, train
from bert.training.optim import fit_optimizer_state, learning_rate_schedule, recipe_optimizer
from bert.training.recipe import Recipe
from stages import layout
from stages.params import Params, load_params

log = logging.getLogger("pretrain")
PHASES = ("phase1", "phase2")
USAGE = "python -m stages.pretrain phase1|phase2 [--join NODE_RANK]"


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in PHASES:
        raise UserError(f"usage: {USAGE}")
    phase = sys.argv[1]
    params = load_params()
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
    spec = getattr(params.pretrain, phase)
    examples = getattr(params.examples, phase)
    vocab_file = layout.VOCAB
    if not vocab_file.is_file():
        raise UserError(f"{vocab_file}: not found; run the `vocab` stage first")
    vocab_size = len(vocab_file.read_text(encoding="utf-8").splitlines())
    shards = sorted(layout.examples(phase).glob("*.hdf5"))

    length_binning, unpad = params.pretrain.length_binning, params.pretrain.unpad
    # apex's FusedLayerNorm with use_apex (as FusedLAMB below); both fall back to torch when absent
    options = dict(apex_layer_norm=params.pretrain.use_apex, unpad=unpad)
    if not params.examples.next_sentence:  # MLM only: no NSP head, no pooler
        options["next_sentence"] = False
    torch.manual_seed(params.seed)  # the same initial weights (and fresh heads) on every rank
    if phase == "phase1" and params.pretrain.init == "random":
        model = BertForPreTraining(BertConfig.resolve(params.model.size, vocab_size), **options)
    elif phase == "phase1":
        model = released_model(params, vocab_file, options)
    else:
        model = BertForPreTraining.from_pretrained(layout.model("phase1"), **options)
        if model.config.vocab_size != vocab_size:
            raise UserError(
                f"{layout.model('phase1')} has vocab_size {model.config.vocab_size}, {vocab_file} has {vocab_size}; re-run phase 1"
            )
        if model.config.max_position_embeddings < examples.max_seq_length:
            raise UserError(
                f"examples.phase2.max_seq_length {examples.max_seq_length} exceeds the model's "
                f"max_position_embeddings {model.config.max_position_embeddings}"
            )
    model.to(distributed.device)

    recipe = params.recipe(phase)
    optimizer = recipe_optimizer(model, recipe, params.pretrain.use_apex)
    if phase == "phase2" and spec.init_optimizer_from_phase1:
        _load_phase1_optimizer(optimizer, recipe.optimizer)
    scheduler = learning_rate_schedule(optimizer, recipe, spec.max_steps)

    masking = None
    if params.examples.masking == "dynamic":
        masking = DynamicMasking.from_vocab(
            vocab_file,
            params.examples.masked_lm_prob,
            examples.max_predictions_per_seq,
            params.examples.whole_word_mask,
        )
    data = PretrainingData(
        shards,
        global_batch_size=recipe.global_batch_size,
        micro_batch_size=recipe.micro_batch_size,
        seed=recipe.seed,
        rank=distributed.rank,
        world_size=distributed.world_size,
        num_workers=params.pretrain.data_workers,
        pin_memory=distributed.device.type == "cuda",
        masking=masking,
        length_binning=length_binning,
    )
    if distributed.is_main:
        log.info(
            "%s: %s (%.1fM parameters), %d shards / %d sequences, global batch %d = %d x %d accum x %d ranks, %d steps",
            phase, _model_name(params), model.num_parameters() / 1e6, len(shards), sum(data.sizes),
            recipe.global_batch_size, recipe.micro_batch_size, data.accumulation_steps, distributed.world_size,
            spec.max_steps,
        )  # fmt: skip
        log.info(
            "batches cut to their longest sequence%s; encoder on %s",
            ", sequences binned by length" if length_binning else "",
            "packed real tokens (unpad)" if unpad else "padded batches",
        )
    record = run_record(params, phase, _described(params, phase, recipe, shards))
    train(
        model, data, pretraining_objective, optimizer, scheduler,
        max_steps=spec.max_steps, recipe=recipe, settings=params.run_settings(phase), record=record,
    )  # fmt: skip
    if distributed.is_main:
        model.save_pretrained(layout.model(phase), vocab_file=vocab_file, lower_case=params.vocab.lower_case)
        log.info("wrote %s", layout.model(phase))


def released_model(params: Params, vocab_file: Path, options: dict) -> BertForPreTraining:
    """Phase 1's start from released weights (pretrain.init: a key of weights): data/weights/<init>
    as download_weights left it. Its config.json is the model's shape (model.size is not read),
    its vocabulary must be the examples' (vocab.source: weights), and heads it lacks start fresh
    (the MLM decoder is always the word embeddings)."""
    init = params.pretrain.init
    directory = layout.weights(init)
    if not (directory / "config.json").is_file():
        raise UserError(
            f"{directory}: no config.json for pretrain.init={init}; run `dvc repro download_weights@{init}`"
        )
    released_vocab = directory / "vocab.txt"
    if not released_vocab.is_file() or released_vocab.read_bytes() != vocab_file.read_bytes():
        raise UserError(
            f"{vocab_file} is not {released_vocab}, the vocabulary of pretrain.init={init}; "
            "run `dvc repro vocab` with vocab.source: weights"
        )
    model = BertForPreTraining.from_pretrained(directory, **options)
    longest = max(params.examples.phase1.max_seq_length, params.examples.phase2.max_seq_length)
    if model.config.max_position_embeddings < longest:
        raise UserError(
            f"examples max_seq_length {longest} exceeds the max_position_embeddings "
            f"{model.config.max_position_embeddings} of {directory}/config.json (pretrain.init={init})"
        )
    log.info(
        "phase1: continuing %s (%d layers, hidden %d; its config.json, not model.size %s)",
        directory, model.config.num_hidden_layers, model.config.hidden_size, params.model.size,
    )  # fmt: skip
    return model


def _model_name(params: Params) -> str:
    return params.model.size if params.pretrain.init == "random" else f"weights.{params.pretrain.init}"


def run_record(params: Params, phase: str, described: dict) -> RunRecord:
    """Where the phase's run keeps its files, what it learns from, and how it computes."""
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


def _described(params: Params, phase: str, recipe: Recipe, shards: list[Path]) -> dict:
    """What makes a checkpoint belong to this run (its signature hashes this). Not the world size or
    the split of the global batch into micro-batch x accumulation: resuming on other hardware is
    allowed, and sees the rows the uninterrupted run would have seen (bert.training.global_batch). Not
    max_steps: a larger one extends the run."""
    described = {
        "phase": phase,
        "model": params.model.size,
        "optimizer": recipe.optimizer,
        "learning_rate": recipe.learning_rate,
        "warmup_proportion": recipe.warmup_proportion,
        "weight_decay": recipe.weight_decay,
        "grad_clip": recipe.grad_clip,
        "global_batch": recipe.global_batch_size,
        "seed": recipe.seed,
        "masking": params.examples.masking,
        "shards": [(p.name, p.stat().st_size) for p in shards],
        # What the shards were made from and how (the manifest lists params, vocab hash and counts).
        "manifest": file_sha256(layout.examples(phase) / "manifest.json"),
        # Phase 2 continues phase 1: a new phase 1 must never let phase 2 resume its old checkpoints.
        # Phase 1 from released weights: their weights file (not model.size) says where it starts.
        "init": _start_weights(params, phase),
    }
    if not params.examples.next_sentence:  # named only when off, so older checkpoints still resume
        described["next_sentence"] = False
    if (
        params.pretrain.length_binning
    ):  # another data order; named only when on, so older checkpoints still resume
        described["length_binning"] = True
    if recipe.decay_power != 0.5:  # the schedule's shape; 0.5 was fixed before it was a param
        described["decay_power"] = recipe.decay_power
    if recipe.schedule != "poly":  # named only when not poly, so older checkpoints still resume
        described["schedule"] = {"kind": recipe.schedule, "decay_share": recipe.decay_share,
                                 "decay_shape": recipe.decay_shape}  # fmt: skip
    return described


def _start_weights(params: Params, phase: str) -> str | None:
    """The hash of the weights file the phase starts from; None for fresh weights."""
    if phase == "phase2":
        return file_sha256(layout.model("phase1") / "model.safetensors")
    if params.pretrain.init == "random":
        return None
    directory = layout.weights(params.pretrain.init)
    return file_sha256(next(directory / name for name in WEIGHT_FILES if (directory / name).is_file()))


def _load_phase1_optimizer(optimizer: torch.optim.Optimizer, name: str) -> None:
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
            "`dvc repro --force pretrain_phase1` (it resumes from an older one to the same weights) "
            "or turn the option off"
        ) from None
    phase2_settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
    try:
        optimizer.load_state_dict(fit_optimizer_state(state, optimizer))  # across use_apex too
    except (ValueError, KeyError) as error:
        raise UserError(
            f"{newest}: optimizer state does not fit this model/optimizer ({name}): {error}"
        ) from None
    for group, settings in zip(optimizer.param_groups, phase2_settings):  # phase 2's own LR and schedule
        group.pop("initial_lr", None)
        group.update(settings)
    log.info("optimizer state from %s", newest)


if __name__ == "__main__":
    run_main(main)
