"""Stage predict_squad: answer SQuAD dev with the fine-tuned model.

    python -m stages.predict_squad

data/models/squad + data/squad/dev.json -> data/predictions/{predictions.json, nbest_predictions.json,
and for v2.0 null_odds.json} (null score minus the best span's score, per question), with predict.*
and finetune.precision (as predict_task).
"""

import logging
import time
from pathlib import Path

import torch

from bert.atomic import atomic_folder, write_json
from bert.errors import UserError, run_main
from bert.model import family
from bert.squad.answers import postprocess
from bert.squad.dataset import dataset_version, load_examples, read_json
from bert.squad.features import make_features
from bert.squad.predict import predict_logits
from bert.text.tokenization import load_tokenizer_from_dir
from stages.common import layout
from stages.common.params import load_params

log = logging.getLogger("predict_squad")
MODEL_DIR = layout.model(layout.SQUAD)
DEV_FILE = layout.SQUAD_DEV
OUT_DIR = layout.SQUAD_PREDICTIONS


def main() -> None:
    params = load_params()
    if not (MODEL_DIR / "config.json").is_file():
        raise UserError(f"{MODEL_DIR}: no model; run the finetune_squad stage first")
    version = dataset_version(read_json(DEV_FILE))
    tokenizer, _ = load_tokenizer_from_dir(MODEL_DIR, params.vocab.lower_case)
    model = family.from_pretrained(MODEL_DIR, "question_answering")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)

    squad, spec = params.squad, params.predict
    examples = load_examples(DEV_FILE)
    features = make_features(
        examples,
        tokenizer,
        max_seq_length=squad.max_seq_length,
        doc_stride=squad.doc_stride,
        max_query_length=squad.max_query_length,
    )
    started = time.perf_counter()
    start_logits, end_logits = predict_logits(
        model, features, batch_size=spec.batch_size, device=device, precision=params.finetune.precision
    )
    seconds = time.perf_counter() - started
    log.info(
        "%d windows in %.1f s (%.1f windows/s on %s)", len(features), seconds, len(features) / seconds, device
    )
    predictions, nbest, null_odds = postprocess(
        examples,
        features,
        start_logits,
        end_logits,
        n_best_size=spec.n_best_size,
        max_answer_length=spec.max_answer_length,
        version_2=version == "v2.0",
        null_score_diff_threshold=spec.null_score_diff_threshold,
    )
    outputs = {"predictions.json": predictions, "nbest_predictions.json": nbest}
    if version == "v2.0":
        outputs["null_odds.json"] = null_odds
    write_folder(OUT_DIR, outputs)
    log.info("%s %d questions -> %s: %s", version, len(examples), OUT_DIR, ", ".join(outputs))


def write_folder(directory: Path, files: dict[str, object]) -> None:
    """Write JSON files into a new folder beside `directory`, then swap it into place: the folder
    is complete or absent, never half-written (and a v1.1 run leaves no stale null_odds.json)."""
    with atomic_folder(directory) as staging:
        for name, content in files.items():
            write_json(staging / name, content)


if __name__ == "__main__":
    run_main(main)
