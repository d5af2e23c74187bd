"""Overlap of a corpus with the evaluation sets: word n-grams shared with an evaluation text.

A document is contaminated by an evaluation set when one of its word n-grams (bert.cleaning.text:
normalised words, `n` of them, 13 by default as in GPT-3's study) is an n-gram of one of the set's
texts (SQuAD's dev contexts and questions, a task's dev texts). An evaluation text shorter than n
words has no n-gram and is counted as `too_short`: with a smaller n such texts would match
common phrases of any corpus ("in which year was he born"). Per set the figures are the
contaminated documents and the matched n-grams (distinct n-grams of the set found in the corpus).

The evaluation texts travel as one Parquet table (`set, text`) written by the stage that reads
the evaluation files; the n-gram sets of every evaluation set (a few million hashes for SQuAD and
GLUE) are held whole by each worker: they are the evaluation data, not the corpus.
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from bert.atomic import atomic_file
from bert.cleaning.tables import Chunk, list_chunks
from bert.cleaning.text import text_ngrams
from bert.compute import Compute
from bert.corpus.documents import read_rows
from bert.errors import UserError
from bert.parallel import ComputePool

EVAL_TEXTS_SCHEMA = pa.schema([("set", pa.string()), ("text", pa.string())])


def write_eval_texts(path: Path, texts: dict[str, list[str]]) -> None:
    """The evaluation texts, by set name (sets in the given order, texts in file order)."""
    sets = [name for name, items in texts.items() for _ in items]
    rows = [text for items in texts.values() for text in items]
    with atomic_file(path) as building:
        pq.write_table(
            pa.table({"set": sets, "text": rows}, schema=EVAL_TEXTS_SCHEMA), building, compression="zstd"
        )


def read_eval_texts(path: Path) -> dict[str, list[str]]:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as error:
        raise UserError(
            f"{path}: cannot read the evaluation texts ({error}); run the stage that writes them"
        ) from None
    texts: dict[str, list[str]] = {}
    for name, text in zip(table.column("set").to_pylist(), table.column("text").to_pylist()):
        texts.setdefault(name, []).append(text)
    return texts


def eval_ngrams(
    texts: dict[str, list[str]], n: int, lower_case: bool
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Per set: its distinct n-gram hashes (sorted), and how many of its texts are shorter than n words."""
    ngrams, too_short = {}, {}
    for name, items in texts.items():
        arrays = [text_ngrams(text, n, lower_case, whole_if_shorter=False) for text in items]
        too_short[name] = sum(len(array) == 0 for array in arrays)
        ngrams[name] = np.unique(np.concatenate(arrays)) if arrays else np.empty(0, np.uint64)
    return ngrams, too_short


def save_ngrams(path: Path, ngrams: dict[str, np.ndarray]) -> None:
    """For the workers, which read it once each (ComputePool's initializer)."""
    with atomic_file(path) as building, open(building, "wb") as out:
        np.savez(
            out,
            **{f"set_{i}": array for i, array in enumerate(ngrams.values())},
            names=np.array(list(ngrams)),
        )


_sets: dict[str, np.ndarray] | None = None  # in a worker: the evaluation sets' n-grams


def load_ngrams(path: str) -> None:
    global _sets
    with np.load(path) as data:
        _sets = {str(name): data[f"set_{i}"] for i, name in enumerate(data["names"])}


def matches(doc_ngrams: np.ndarray) -> dict[str, np.ndarray]:
    """The evaluation sets (loaded by load_ngrams) sharing an n-gram with a document: set -> the
    shared n-gram hashes."""
    found = {}
    for name, array in _sets.items():
        shared = np.intersect1d(doc_ngrams, array, assume_unique=True)
        if len(shared):
            found[name] = shared
    return found


def _report_task(chunk: Chunk, n: int, lower_case: bool) -> tuple[int, dict[str, tuple[int, np.ndarray]]]:
    rows = read_rows(chunk.path, chunk.start, chunk.end, ["text"])
    per_set: dict[str, list] = {}
    for text in rows.column("text").to_pylist():
        for name, shared in matches(text_ngrams(text or "", n, lower_case, whole_if_shorter=False)).items():
            per_set.setdefault(name, []).append(shared)
    return chunk.corpus, {
        name: (len(found), np.unique(np.concatenate(found))) for name, found in per_set.items()
    }


def contamination_report(
    folders: dict[str, Path],
    ngrams_file: Path,
    set_names: list[str],
    n: int,
    lower_case: bool,
    compute: Compute,
) -> dict:
    """Per corpus (cleaned tables) and evaluation set: contaminated documents and matched n-grams."""
    names = list(folders)
    chunks = list_chunks(list(folders.values()))
    documents = {name: {s: 0 for s in set_names} for name in names}
    matched = {name: {s: [] for s in set_names} for name in names}
    with (
        ComputePool(compute, load_ngrams, (str(ngrams_file),)) as pool,
        tqdm(
            total=chunks[-1].first + chunks[-1].end - chunks[-1].start if chunks else 0,
            desc="contamination",
            unit=" docs",
        ) as bar,
    ):
        results = pool.map(
            _report_task, [(c, n, lower_case) for c in chunks], describe=lambda task: task[0].describe()
        )
        for chunk, (corpus, found) in zip(chunks, results):
            bar.update(chunk.end - chunk.start)
            for name, (count, shared) in found.items():
                documents[names[corpus]][name] += count
                matched[names[corpus]][name].append(shared)
    return {
        corpus: {
            s: {
                "contaminated_documents": documents[corpus][s],
                "matched_ngrams": int(len(np.unique(np.concatenate(matched[corpus][s]))))
                if matched[corpus][s]
                else 0,
            }
            for s in set_names
        }
        for corpus in names
    }
