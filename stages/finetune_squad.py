"""Stage finetune_squad: fine-tune BertForQuestionAnswering on SQuAD train.

    python -m stages.finetune_squad [--join NODE_RANK]

finetune.init picks the start, a Hugging Face directory data/weights/<init>/ that the stage named
in dvc.yaml builds: `phase2` (export_hf: our pretrained model), `random` (init_random: fresh
weights over our vocabulary, the baseline pretraining must beat), or a key of `weights`
(download_weights@<key>: Google's BERT, or any Hugging Face BERT folder or URL). The recipe is
finetune.recipe with squad.recipe's changes, the run settings finetune's.
data/squad/train.json -> data/models/squad/ (Hugging Face format, with vocab.txt), checkpoints in
data/checkpoints/squad/ (resumed), dvclive/finetune_squad/, metrics/finetune_squad.json.
With distributed.nproc_per_node x nnodes > 1 the stage starts itself again under torchrun.
"""

import logging
import sys

import torch

from bert.distributed import Distributed, launch
from bert.errors import UserError, run_main
from bert.finetune import described_files, finetune, question_answering_objective
from bert.modeling import BertForQuestionAnswering
from bert.squad.dataset import load_examples
from bert.squad.features import make_features
from bert.tokenization import load_tokenizer_from_dir
from stages import layout
from stages.params import Params, load_params

log = logging.getLogger("finetune_squad")
USAGE = "python -m stages.finetune_squad [--join NODE_RANK]"
TRAIN_FILE = layout.SQUAD_TRAIN
OUT_DIR = layout.model("squad")


def main() -> None:
    params = load_params()
    params.check_global_batch("squad")
    launch(
        ["stages.finetune_squad"],
        sys.argv[1:],
        USAGE,
        params.distributed,
        lambda distributed: run(params, distributed),
        checkpoint_dir=layout.checkpoints("squad"),
        log_dir=layout.logs("squad"),
        outputs=layout.OUTPUT_FOLDERS,
    )


def run(params: Params, distributed: Distributed) -> None:
    shared, squad, recipe = params.finetune, params.squad, params.recipe("squad")
    source = layout.init_directory(shared.init)
    tokenizer, lower_case = load_tokenizer_from_dir(source, params.vocab.lower_case)
    torch.manual_seed(recipe.seed)  # the same fresh QA head on every rank
    model = BertForQuestionAnswering.from_pretrained(source, unpad=shared.unpad)
    if model.config.vocab_size < tokenizer.get_vocab_size():
        raise UserError(
            f"{source}: config.json has vocab_size {model.config.vocab_size}, vocab.txt "
            f"{tokenizer.get_vocab_size()} tokens"
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
        max_seq_length=squad.max_seq_length,
        doc_stride=squad.doc_stride,
        max_query_length=squad.max_query_length,
        progress=distributed.is_main,
    )
    if len(features) < recipe.global_batch_size:
        raise UserError(
            f"{TRAIN_FILE}: its {len(examples)} questions make {len(features)} training windows, fewer than "
            f"global_batch_size {recipe.global_batch_size} (finetune.recipe, squad.recipe): not one optimizer "
            "step; give more questions or lower the global batch size"
        )
    if distributed.is_main:
        log.info(
            "init=%s (%s, %.1fM parameters), %d questions -> %d windows%s; encoder on %s",
            shared.init, source, model.num_parameters() / 1e6, len(examples), len(features),
            ", binned by length" if shared.length_binning else "",
            "packed real tokens (unpad)" if shared.unpad else "padded batches",
        )  # fmt: skip
    # What the run trains on (finetune adds the recipe): its checkpoints belong to these only.
    described = {
        "init": shared.init,
        "files": described_files([TRAIN_FILE, *sorted(p for p in source.iterdir() if p.is_file())]),
        "squad": [squad.max_seq_length, squad.doc_stride, squad.max_query_length],
    }
    finetune(
        model,
        features.training_arrays(),
        question_answering_objective,
        rank=distributed.rank,
        world_size=distributed.world_size,
        **params.finetuning("squad"),
        checkpoint_dir=layout.checkpoints("squad"),
        live_dir=layout.live("finetune_squad"),
        metrics_file=layout.metrics("finetune_squad"),
        run_description=described,
        execution={"unpad": shared.unpad},
    )
    if distributed.is_main:
        model.save_pretrained(OUT_DIR, vocab_file=source / "vocab.txt", lower_case=lower_case)
        log.info("wrote %s", OUT_DIR)


if __name__ == "__main__":
    run_main(main)
