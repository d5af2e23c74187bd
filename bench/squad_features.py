"""Time SQuAD feature conversion and post-processing at real SQuAD size.

    PYTHONPATH=. python bench/squad_features.py --vocab VOCAB.txt [--squad train-v1.1.json]
        [--questions 88000] [--max-seq-length 384 --doc-stride 128 --max-query-length 64]

With --squad, the real file is used; otherwise a SQuAD-sized stand-in is built from the 70-page
Wikipedia sample in ../shared/data (paragraphs of real text, about 4.6 questions per paragraph
as in SQuAD v1.1 train, answers on word boundaries). Post-processing runs on random logits.
"""

import argparse
import bz2
import os
import random
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from bert.squad.answers import postprocess
from bert.squad.dataset import Answer, SquadExample, load_examples
from bert.squad.features import make_features
from bert.text.tokenization import load_tokenizer


def sample_dump() -> Path:
    """The 70-page Wikipedia sample: $BERT_SHARED_DATA, <repo>/../shared/data or /work/shared/data."""
    repo = Path(__file__).resolve().parents[1]
    for folder in (os.environ.get("BERT_SHARED_DATA"), repo.parent / "shared/data", "/work/shared/data"):
        if folder and (Path(folder) / "enwiki-sample-70pages.xml.bz2").exists():
            return Path(folder) / "enwiki-sample-70pages.xml.bz2"
    raise SystemExit("enwiki-sample-70pages.xml.bz2 not found: set BERT_SHARED_DATA or pass --squad")


def stand_in_examples(num_questions: int, seed: int = 0) -> list[SquadExample]:
    with bz2.open(sample_dump()) as file:
        texts = [el.text or "" for el in ET.parse(file).iter() if el.tag.endswith("}text")]
    paragraphs = [p for text in texts for p in text.split("\n\n") if 400 < len(p) < 1500]
    rng = random.Random(seed)
    examples = []
    while len(examples) < num_questions:
        # Distinct contexts (as SQuAD's ~19k paragraphs are), ~4.6 questions each.
        context = f"{len(examples)} " + rng.choice(paragraphs)
        words = [m.span() for m in re.finditer(r"\S+", context)]
        for _ in range(rng.choice([4, 5, 5])):
            first = rng.randrange(len(words))
            start, end = words[first][0], words[min(len(words) - 1, first + rng.randrange(3))][1]
            question = " ".join(context[s:e] for s, e in rng.sample(words, min(10, len(words)))) + "?"
            examples.append(
                SquadExample(f"q{len(examples)}", "t", question, context, [Answer(context[start:end], start)])
            )
    return examples[:num_questions]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--squad")
    parser.add_argument("--questions", type=int, default=88_000)
    parser.add_argument("--max-seq-length", type=int, default=384)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--max-query-length", type=int, default=64)
    args = parser.parse_args()

    examples = load_examples(args.squad) if args.squad else stand_in_examples(args.questions)
    tokenizer = load_tokenizer(args.vocab)
    began = time.perf_counter()
    features = make_features(
        examples,
        tokenizer,
        max_seq_length=args.max_seq_length,
        doc_stride=args.doc_stride,
        max_query_length=args.max_query_length,
    )
    featurised = time.perf_counter() - began
    print(
        f"make_features: {len(examples)} questions, {len({e.context for e in examples})} contexts -> "
        f"{len(features)} windows in {featurised:.1f} s ({len(examples) / featurised:,.0f} questions/s)"
    )
    rng = np.random.default_rng(0)
    start_logits = rng.standard_normal(features.input_ids.shape, dtype=np.float32)
    end_logits = rng.standard_normal(features.input_ids.shape, dtype=np.float32)
    began = time.perf_counter()
    postprocess(examples, features, start_logits, end_logits)
    took = time.perf_counter() - began
    print(f"postprocess: {len(examples)} questions in {took:.1f} s ({len(examples) / took:,.0f} questions/s)")


if __name__ == "__main__":
    main()
