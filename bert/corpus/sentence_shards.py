"""Sentence shards: the documents, split into sentences, that the `vocab` and `examples` stages read.

The `shard` stage writes them (bert.corpus.shards) as data/shards/<corpus>/{train,test}_NNNNN.parquet
with the columns `doc_id` (string) and `sentences` (list<string>), one row per document. Readers
also take the reference text format of Google's create_pretraining_data.py: one sentence per line
and a blank line between documents.
"""

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bert.errors import UserError

SHARD_SCHEMA = pa.schema([("doc_id", pa.string()), ("sentences", pa.list_(pa.string()))])


def train_shards(shards_root: str | Path, corpora: list[str]) -> dict[str, list[Path]]:
    """data/shards/<corpus>/train_*.parquet for every corpus, sorted; only train shards feed pretraining."""
    found = {}
    for corpus in corpora:
        files = sorted(Path(shards_root, corpus).glob("train_*.parquet"))
        if not files:
            raise UserError(
                f"{Path(shards_root, corpus)}: no train_*.parquet shards; run the `shard` stage first"
            )
        found[corpus] = files
    return found


def iter_documents(path: str | Path, batch_size: int = 1000) -> Iterator[list[list[str]]]:
    """Documents of a shard, `batch_size` at a time, each a list of sentences.

    `.parquet`: a sentence shard. Anything else: the reference text format."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: input file not found")
    if path.suffix == ".parquet":
        yield from _iter_parquet(path, batch_size)
    else:
        yield from _iter_text(path, batch_size)


def iter_sentences(paths: Iterable[str | Path]) -> Iterator[str]:
    """Every sentence of the given shards, in order (for vocabulary training)."""
    for path in paths:
        for documents in iter_documents(path):
            for document in documents:
                yield from document


def _iter_parquet(path: Path, batch_size: int) -> Iterator[list[list[str]]]:
    try:
        parquet = pq.ParquetFile(path)
    except Exception as error:  # pyarrow raises several types for a damaged file
        raise UserError(f"{path}: not a readable Parquet file ({error}); re-run the `shard` stage") from None
    if "sentences" not in parquet.schema_arrow.names:
        raise UserError(f"{path}: has no `sentences` column; expected a sentence shard (doc_id, sentences)")
    for batch in parquet.iter_batches(batch_size=batch_size, columns=["sentences"]):
        yield [sentences or [] for sentences in batch.column(0).to_pylist()]


def _iter_text(path: Path, batch_size: int) -> Iterator[list[list[str]]]:
    documents: list[list[str]] = [[]]
    with open(path, "rb") as file:
        for line_number, raw in enumerate(file, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise UserError(f"{path}:{line_number}: not UTF-8 text; convert the file to UTF-8") from None
            if line:
                documents[-1].append(line)
            elif documents[-1]:
                documents.append([])
                if len(documents) > batch_size:
                    yield documents[:-1]
                    documents = [[]]
    yield [document for document in documents if document]
