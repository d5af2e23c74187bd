"""Stage finetune_squad: fine-tune the question-answering model (BERT's or ModernBERT's) on SQuAD train.

    python -m stages.finetune_squad [--join NODE_RANK]

finetune.init picks the start, a Hugging Face directory data/weights/<init>/ that the stage named
in dvc.yaml builds: a phase of pretrain.phases (pretrain@<phase>: our pretrained model), `random` (init_random: fresh
weights over our vocabulary, the baseline pretraining must beat), or a key of `weights`
(download_weights@<key>: Google's BERT, or any Hugging Face BERT folder or URL). The recipe is
finetune.recipe with squad.recipe's changes, the run settings finetune's (stages/common/finetune.py).
data/squad/train.json -> data/models/squad/ (Hugging Face format, with vocab.txt), checkpoints in
data/checkpoints/squad/ (resumed), dvclive/finetune_squad/, metrics/finetune_squad.json.
With distributed.nproc_per_node x nnodes > 1 the stage starts itself again under torchrun.
"""

import logging
import sys

from bert.distributed.launch import Distributed
from bert.errors import UserError, run_main
from bert.model import family
from bert.squad.dataset import load_examples
from bert.squad.features import make_features
from bert.squad.objective import question_answering_objective
from stages.common import layout
from stages.common.finetune import (
    TrainingData,
    check_model,
    launch_finetuning,
    starting_point,
    train_and_save,
)
from stages.common.params import Params, load_params

log = logging.getLogger("finetune_squad")
USAGE = "python -m stages.finetune_squad [--join NODE_RANK]"


def main() -> None:
    params = load_params()
    launch_finetuning(
        layout.SQUAD, ["stages.finetune_squad"], sys.argv[1:], USAGE, params, lambda d: run(params, d)
    )


def run(params: Params, distributed: Distributed) -> None:
    squad = params.squad
    start = starting_point(params, layout.SQUAD)
    model = family.from_pretrained(start.folder, "question_answering", unpad=params.finetune.unpad)
    check_model(model, start, squad.max_seq_length, "squad.max_seq_length")
    model.to(distributed.device)

    if not layout.SQUAD_TRAIN.is_file():
        raise UserError(f"{layout.SQUAD_TRAIN}: not found; run the download_squad stage first")
    examples = load_examples(layout.SQUAD_TRAIN)
    features = make_features(
        examples,
        start.tokenizer,
        max_seq_length=squad.max_seq_length,
        doc_stride=squad.doc_stride,
        max_query_length=squad.max_query_length,
        progress=distributed.is_main,
    )
    if distributed.is_main:
        log.info("%d questions -> %d windows", len(examples), len(features))
    data = TrainingData(
        features.training_arrays(),
        question_answering_objective,
        layout.SQUAD_TRAIN,
        {"squad": [squad.max_seq_length, squad.doc_stride, squad.max_query_length]},
        "windows",
    )
    train_and_save(layout.SQUAD, params, distributed, model, start, data)


if __name__ == "__main__":
    run_main(main)
