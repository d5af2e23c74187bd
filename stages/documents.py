"""Stage documents@<corpus>: data/raw/<corpus>/ -> data/documents/<corpus>/, the document table.

How the raw files become documents follows the corpus's `kind` in params.yaml: `wikipedia` extracts
the articles of MediaWiki dumps (wikiextractor), `text` takes .txt files (one document each) and
Parquet files with a `text` column (BookCorpus as published). Counts go to
metrics/documents_<corpus>.json.
"""

import argparse
import logging

from bert.atomic import write_json
from bert.corpus.books import format_books
from bert.corpus.wikipedia import extract_wikipedia
from bert.errors import UserError, run_main
from stages.params import load_params

log = logging.getLogger("stages.documents")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.documents", description=__doc__.splitlines()[0])
    parser.add_argument("corpus", help="a key of `corpora` in params.yaml, e.g. wikipedia")
    corpus = parser.parse_args().corpus
    params = load_params()
    if corpus not in params.corpora:
        raise UserError(f"params.yaml: no `corpora.{corpus}`; corpora: {', '.join(params.corpora)}")
    raw, out = f"data/raw/{corpus}", f"data/documents/{corpus}"
    if params.corpora[corpus].kind == "wikipedia":
        stats = extract_wikipedia(raw, out, params.engine, corpus)
        metrics = stats.metrics()
        log.info(
            "%d pages -> %d documents in %.1fs: %.0f pages/s, %.2f MB/s of XML",
            stats.pages, stats.documents, stats.seconds, metrics["pages_per_second"], metrics["megabytes_per_second"],
        )  # fmt: skip
    else:
        metrics = format_books(raw, out, corpus, params.engine)
    write_json(f"metrics/documents_{corpus}.json", metrics)


if __name__ == "__main__":
    run_main(main)
