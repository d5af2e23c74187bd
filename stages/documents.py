"""Stage documents@<corpus>: data/raw/<corpus>/ -> data/documents/<corpus>/, the document table.

How the raw files become documents follows the corpus's `kind` in params.yaml: `wikipedia` extracts
the articles of MediaWiki dumps (wikiextractor), `text` takes .txt files (one document each) and
Parquet files with a `text` column (BookCorpus as published), `task` the text columns of a
fine-tuning task's files (corpora.<corpus>.columns; task-adaptive pretraining). Counts go to
metrics/documents_<corpus>.json.
"""

import argparse

from bert.atomic import write_json
from bert.corpus.books import format_books
from bert.corpus.task_text import format_task_text
from bert.corpus.wikipedia import extract_wikipedia
from bert.errors import UserError, run_main
from stages import layout
from stages.params import load_params


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.documents", description=__doc__.splitlines()[0])
    parser.add_argument("corpus", help="a key of `corpora` in params.yaml, e.g. wikipedia")
    corpus = parser.parse_args().corpus
    params = load_params()
    if corpus not in params.corpora:
        raise UserError(f"params.yaml: no `corpora.{corpus}`; corpora: {', '.join(params.corpora)}")
    settings = params.corpora[corpus]
    if settings.kind == "task":
        stats = format_task_text(
            layout.raw(corpus), layout.documents(corpus), corpus, params.compute, settings.columns
        )
    else:
        extract = {"wikipedia": extract_wikipedia, "text": format_books}[settings.kind]
        stats = extract(layout.raw(corpus), layout.documents(corpus), corpus, params.compute)
    write_json(layout.documents_metrics(corpus), stats.metrics())


if __name__ == "__main__":
    run_main(main)
