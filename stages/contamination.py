"""Stage contamination: the report of overlap between the cleaned corpora and the evaluation sets.

data/clean/<corpus>/ + data/decontaminate/remove/ (stage eval_texts) -> metrics/contamination.json:
per corpus and evaluation set, the documents sharing a `clean.contamination_ngram`-word n-gram with
it and the distinct n-grams matched. Off the pretraining path: nothing downstream reads it, so an
edited evaluation file reruns this report and never pretraining. Under `clean.decontaminate:
remove` it checks the removal (every figure 0); under `off` it reports nothing.
"""

import tempfile
from pathlib import Path

from bert.atomic import write_json
from bert.cleaning.contamination import contamination_report, eval_ngrams, read_eval_texts, save_ngrams
from bert.errors import run_main
from stages.common import layout
from stages.common.params import load_params


def main() -> None:
    params = load_params()
    clean = params.clean
    if clean.decontaminate == "none":
        write_json(layout.CONTAMINATION_METRICS, {"decontaminate": "none"})
        return
    ngrams, too_short = eval_ngrams(
        read_eval_texts(layout.EVAL_TEXTS), clean.contamination_ngram, params.vocab.lower_case
    )
    # The workers read the n-grams from a file (on the shared filesystem for a Dask cluster).
    with tempfile.TemporaryDirectory(prefix=".contamination-", dir=layout.DATA) as scratch:
        ngrams_file = Path(scratch) / "ngrams.npz"
        save_ngrams(ngrams_file, ngrams)
        report = contamination_report(
            {corpus: layout.clean(corpus) for corpus in params.corpora},
            ngrams_file,
            list(ngrams),
            clean.contamination_ngram,
            params.vocab.lower_case,
            params.compute,
        )
    report["eval_texts_shorter_than_ngram"] = too_short
    report["decontaminate"] = clean.decontaminate
    write_json(layout.CONTAMINATION_METRICS, report)


if __name__ == "__main__":
    run_main(main)
