"""Stage documents@<corpus>: data/raw/<corpus>/ -> data/documents/<corpus>/, the document table.

How the raw files become documents follows the corpus's `kind` in params.yaml: `wikipedia` extracts
the articles of MediaWiki dumps (wikiextractor), `text` takes .txt files (one document each) and
Parquet files with a `text` column (BookCorpus as published), `task` the text columns of a
fine-tuning task's files (corpora.<corpus>.columns; task-adaptive pretraining). Counts go to
metrics/documents_<corpus>.json.
"""

import argparse
from pathlib import Path

from bert.atomic import write_json
from bert.corpus.books import format_books
from bert.corpus.task_text import format_task_text
from bert.corpus.wikipedia import extract_wikipedia
from bert.errors import UserError, run_main
from stages.common import layout
from stages.common.params import load_params


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.documents", description=__doc__.splitlines()[0])
    parser.add_argument("corpus", help="a key of `corpora` in params.yaml, e.g. wikipedia")
    corpus = parser.parse_args().corpus
    params = load_params()
    if corpus not in params.corpora:
        raise UserError(f"params.yaml: no `corpora.{corpus}`; corpora: {', '.join(params.corpora)}")
    settings = params.corpora[corpus]
    if settings.kind == "task":
        raw = layout.raw(corpus)
        origins = sources_as_written(raw, settings.sources, f"corpora.{corpus}.sources")
        stats = format_task_text(
            raw, layout.documents(corpus), corpus, params.compute, settings.columns, origins
        )
    else:
        extract = {"wikipedia": extract_wikipedia, "text": format_books}[settings.kind]
        stats = extract(layout.raw(corpus), layout.documents(corpus), corpus, params.compute)
    write_json(layout.documents_metrics(corpus), stats.metrics())


def sources_as_written(raw: Path, sources: list[str], param: str) -> dict[str, str]:
    """How messages name each file of `raw` (a download's output, one file per source file): the
    entry of `param` it was fetched from, as written there (a file or URL of that name, else that
    file of a folder entry), and the param."""
    origins = {}
    for path in sorted(raw.iterdir()) if raw.is_dir() else []:
        named = [entry for entry in sources if entry.rstrip("/").rsplit("/", 1)[-1] == path.name]
        folders = [entry for entry in sources if (Path(entry.removeprefix("file://")) / path.name).is_file()]
        origin = named[0] if named else f"{folders[0].rstrip('/')}/{path.name}" if folders else str(path)
        origins[path.name] = f"{origin} ({param})"
    return origins


if __name__ == "__main__":
    run_main(main)
