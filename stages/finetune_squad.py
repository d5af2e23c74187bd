"""Stage finetune_squad: fine-tune BertForQuestionAnswering on SQuAD train.

    python -m stages.finetune_squad

finetune.init picks the start, a Hugging Face directory data/weights/<init>/ that the stage named
in dvc.yaml builds: `phase2` (export_hf: our pretrained model), `random` (init_random: fresh
weights over our vocabulary, the baseline pretraining must beat), or a key of `weights`
(download_weights@<key>: Google's BERT, or any Hugging Face BERT folder or URL).
data/squad/train.json -> data/models/squad/ (Hugging Face format, with vocab.txt), checkpoints in
data/checkpoints/squad/ (resumed), dvclive/finetune_squad/, metrics/finetune_squad.json.
With distributed.nproc_per_node x nnodes > 1 the stage starts itself again under torchrun.
"""

import logging
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from bert.checkpoints import file_sha256, run_signature
from bert.distributed import node_rank_to_join, relaunch_under_torchrun, setup_distributed
from bert.errors import UserError, run_main
from bert.finetune import FineTuningBatches, init_directory, question_answering_objective, steps_for_epochs
from bert.global_batch import accumulation_steps
from bert.modeling import BertForQuestionAnswering
from bert.optim import build_optimizer, warmup_poly_schedule
from bert.squad.dataset import load_examples
from bert.squad.features import make_features
from bert.tokenization import load_tokenizer_from_dir
from bert.training import TrainConfig, train
from stages.params import load_params

log = logging.getLogger("finetune_squad")
TRAIN_FILE = Path("data/squad/train.json")
OUT_DIR = Path("data/models/squad")


def main() -> None:
    params = load_params()
    d = params.distributed
    usage = "python -m stages.finetune_squad [--join NODE_RANK]"
    node_rank = node_rank_to_join(sys.argv[1:], d.nnodes, usage)
    if node_rank is None:
        raise UserError(f"usage: {usage}")
    if relaunch_under_torchrun(
        ["stages.finetune_squad"], d.nproc_per_node, d.nnodes, d.rdzv_endpoint, d.max_restarts, node_rank,
        checkpoint_dir="data/checkpoints/squad",
    ):  # fmt: skip
        return
    distributed = setup_distributed(d.backend, d.timeout_minutes)
    try:
        finetune(params, distributed)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def finetune(params, distributed) -> None:
    spec, squad = params.finetune, params.squad
    accumulation = accumulation_steps(
        spec.global_batch_size, spec.micro_batch_size, distributed.world_size, params="finetune."
    )
    source = init_directory(spec.init)
    tokenizer, lower_case = load_tokenizer_from_dir(source, params.vocab.lower_case)
    vocab_size = tokenizer.get_vocab_size()

    torch.manual_seed(spec.seed)  # the same fresh QA head on every rank
    model = BertForQuestionAnswering.from_pretrained(source, unpad=spec.unpad)
    if model.config.vocab_size < vocab_size:
        raise UserError(
            f"{source}: config.json has vocab_size {model.config.vocab_size}, vocab.txt {vocab_size} tokens"
        )
    if squad.max_seq_length > model.config.max_position_embeddings:
        raise UserError(
            f"params.yaml: squad.max_seq_length {squad.max_seq_length} exceeds the model's "
            f"max_position_embeddings {model.config.max_position_embeddings} ({source})"
        )
    model.to(distributed.device)

    if not TRAIN_FILE.is_file():
        raise UserError(f"{TRAIN_FILE}: not found; run the download_squad stage first")
    examples = load_examples(TRAIN_FILE)
    features = make_features(
        examples,
        tokenizer,
        squad.max_seq_length,
        squad.doc_stride,
        squad.max_query_length,
        progress=distributed.is_main,
    )
    if len(features) < spec.global_batch_size:
        raise UserError(
            f"{TRAIN_FILE}: its {len(examples)} questions make {len(features)} training windows, fewer than "
            f"finetune.global_batch_size {spec.global_batch_size}: not one optimizer step; give more questions "
            "or lower finetune.global_batch_size"
        )
    batches = FineTuningBatches(
        features.training_arrays(),
        spec.global_batch_size,
        spec.micro_batch_size,
        spec.seed,
        distributed.rank,
        distributed.world_size,
        spec.length_binning,
    )
    max_steps = steps_for_epochs(len(features), spec.epochs, spec.global_batch_size)
    optimizer = build_optimizer(model, "adamw", spec.learning_rate, spec.weight_decay, fused=True)
    scheduler = warmup_poly_schedule(
        optimizer, round(spec.warmup_proportion * max_steps), max_steps, power=1.0
    )
    if distributed.is_main:
        log.info(
            "init=%s (%s, %.1fM parameters), %d questions -> %d windows, global batch %d = %d x %d accum x %d ranks, "
            "%g epochs = %d steps",
            spec.init, source, model.num_parameters() / 1e6, len(examples), len(features), spec.global_batch_size,
            spec.micro_batch_size, accumulation, distributed.world_size, spec.epochs, max_steps,
        )  # fmt: skip
        log.info(
            "batches cut to their longest window%s; encoder on %s",
            ", windows binned by length" if spec.length_binning else "",
            "packed real tokens (unpad)" if spec.unpad else "padded batches",
        )
    described = described_run(params, source)
    config = TrainConfig(
        max_steps=max_steps,
        grad_accum_steps=accumulation,
        precision=spec.precision,
        grad_clip=1.0,
        log_every=spec.log_every,
        save_every=spec.save_every,
        checkpoint_dir=Path("data/checkpoints/squad"),
        resume=True,
        seed=spec.seed,
        live_dir=Path("dvclive/finetune_squad"),
        metrics_file=Path("metrics/finetune_squad.json"),
        run_signature=run_signature(described),
        run_description=described,
        execution={"unpad": spec.unpad},
    )
    train(model, batches, question_answering_objective, optimizer, scheduler, config)
    if distributed.is_main:
        model.save_pretrained(OUT_DIR, vocab_file=source / "vocab.txt", lower_case=lower_case)
        log.info("wrote %s", OUT_DIR)


def described_run(params, source: Path) -> dict:
    """What makes a checkpoint belong to this run (not the world size: resuming elsewhere is fine)."""
    spec, squad = params.finetune, params.squad
    # Contents, not mtimes (a `dvc checkout` changes those): new initial weights of the same shape,
    # from a new pretraining run, must not resume the checkpoints of the old one.
    files = [TRAIN_FILE, *sorted(p for p in source.iterdir() if p.is_file())]
    described = {
        "init": spec.init,
        "files": [(p.name, file_sha256(p)) for p in files],
        "squad": [squad.max_seq_length, squad.doc_stride, squad.max_query_length],
        "optimizer": [spec.learning_rate, spec.warmup_proportion, spec.weight_decay, spec.epochs, spec.seed],
        "global_batch": spec.global_batch_size,
        "length_binning": spec.length_binning,
    }
    return described


if __name__ == "__main__":
    run_main(main)
