"""A SQuAD-shaped file from real paragraphs, for speed benchmarks when SQuAD itself is not at hand.

    python -m bench.squad_like data/documents/wikipedia squad-like.json [--questions 2] [--seed 0]

Inference time depends on how long the windows are, so a benchmark on made-up short contexts
flatters whichever side skips padding. This writes a SQuAD v1.1 file whose contexts are the real
paragraphs of a document table (the `extract_wikipedia` / `format_books` output) of 500
characters or more, SQuAD's own rule for choosing paragraphs, with `--questions` questions each:
the first 4 to 16 words of one of the paragraph's sentences and a question mark, answered by that
sentence's first word. Only the lengths are realistic: use it to time models, never to score them.
"""

import argparse
import itertools
import json
import random
import re
from pathlib import Path

import pyarrow.parquet as pq

from bert.corpus.documents import document_files

MIN_PARAGRAPH_CHARS = 500  # as Rajpurkar et al. (2016) chose SQuAD's paragraphs
SENTENCE_START = re.compile(r"(?:^|(?<=[.!?] ))(\w+)")


def squad_like(document_folder: str | Path, questions_per_paragraph: int = 2, seed: int = 0) -> dict:
    rng = random.Random(seed)
    question_ids = itertools.count()
    articles = []
    for path in document_files(document_folder):
        for title, text in zip(*pq.read_table(path, columns=["title", "text"]).to_pydict().values()):
            paragraphs = []
            for context in text.split("\n"):
                starts = list(SENTENCE_START.finditer(context))
                if len(context) < MIN_PARAGRAPH_CHARS or not starts:
                    continue
                qas = []
                for _ in range(questions_per_paragraph):
                    first_word = rng.choice(starts)
                    words = context[first_word.start() :].split()[: rng.randint(4, 16)]
                    answer = {"text": first_word.group(1), "answer_start": first_word.start(1)}
                    qas.append({"id": f"q{next(question_ids)}", "question": " ".join(words) + "?",
                                "answers": [answer]})  # fmt: skip
                paragraphs.append({"context": context, "qas": qas})
            if paragraphs:
                articles.append({"title": title, "paragraphs": paragraphs})
    if not articles:
        raise SystemExit(f"{document_folder}: no paragraph of {MIN_PARAGRAPH_CHARS} characters or more")
    return {"version": "1.1", "data": articles}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.squad_like", description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", help="a document table folder (Parquet parts)")
    parser.add_argument("out", help="the SQuAD v1.1 JSON file to write")
    parser.add_argument("--questions", type=int, default=2, help="questions per paragraph (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dataset = squad_like(args.documents, args.questions, args.seed)
    Path(args.out).write_text(json.dumps(dataset, ensure_ascii=False), encoding="utf-8")
    paragraphs = [p for article in dataset["data"] for p in article["paragraphs"]]
    print(f"{args.out}: {len(paragraphs)} paragraphs of {len(dataset['data'])} articles, "
          f"{sum(len(p['qas']) for p in paragraphs)} questions, "
          f"{sum(len(p['context']) for p in paragraphs) / len(paragraphs):.0f} characters per paragraph")  # fmt: skip


if __name__ == "__main__":
    main()
