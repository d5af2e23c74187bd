"""Stage clean: data/documents/<corpus>/ of every corpus -> data/clean/<corpus>/, without duplicates.

Exact and near duplicates across all corpora at once (bert.cleaning.dedup), and under
`clean.decontaminate: remove` the documents sharing an n-gram with an evaluation set
(data/decontaminate/remove, stage eval_texts). Figures go to metrics/clean.json, the first removed
documents beside the ones kept to metrics/clean_removed.txt.
"""

from bert.atomic import atomic_file, atomic_folder, write_json
from bert.cleaning.contamination import eval_ngrams, read_eval_texts, save_ngrams
from bert.cleaning.dedup import clean_corpora
from bert.errors import run_main
from stages.common import layout
from stages.common.params import load_params


def main() -> None:
    params = load_params()
    settings = params.clean  # bert.cleaning.dedup.CleanSettings, as params.yaml writes it
    inputs = {corpus: layout.documents(corpus) for corpus in params.corpora}
    sets, too_short = [], {}
    with atomic_folder(layout.CLEAN_DIR) as out:
        ngrams_file = out / ".eval_ngrams.npz"
        if settings.removes_contaminated:
            ngrams, too_short = eval_ngrams(
                read_eval_texts(layout.EVAL_TEXTS), settings.contamination_ngram, settings.lower_case
            )
            sets = list(ngrams)
            save_ngrams(ngrams_file, ngrams)
        result = clean_corpora(inputs, out, settings, params.compute, ngrams_file, sets)
        ngrams_file.unlink(missing_ok=True)
    if too_short:
        result.metrics["all"]["eval_texts_shorter_than_ngram"] = too_short
    write_json(layout.CLEAN_METRICS, result.metrics)
    with atomic_file(layout.CLEAN_SAMPLES) as building:
        building.write_text("\n".join(result.samples) or "no document was removed\n", encoding="utf-8")


if __name__ == "__main__":
    run_main(main)
