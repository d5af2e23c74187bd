"""Fine-tuning really learns: a tiny BERT, trained from scratch through the same code the
finetune_squad stage runs (features, batches, QA loss, the shared training loop, n-best
post-processing, official F1), answers held-out questions of a small synthetic span task.

Each context states one fact, "the code of <name> is <value> .", at a random place among filler
sentences; the question asks "what is the code of <name> ?". The held-out questions use (name,
value) pairs never seen in training, so the model must find the span, not memorise the answer.
(Facts with decoys of another attribute, "the colour of <name> is <value> .", are learnt too, but
only after a plateau of ~1000 steps: too slow for a unit test.)
"""

import random

import numpy as np
import torch

from bert.model.config import BertConfig
from bert.model.network import BertForQuestionAnswering
from bert.squad.answers import postprocess
from bert.squad.dataset import Answer, SquadExample
from bert.squad.evaluation import evaluate
from bert.squad.features import make_features
from bert.squad.objective import question_answering_objective
from bert.squad.predict import predict_logits
from bert.text.tokenization import SPECIAL_TOKENS, load_tokenizer
from bert.training.finetune import FineTuningBatches
from bert.training.optim import build_optimizer, warmup_poly_schedule
from bert.training.run import steps_for_epochs
from tests.support.loop import run_loop

NAMES = [
    f"{a}{b}" for a in ("bel", "cor", "dun", "fal", "gar", "hol", "kes", "lom") for b in ("ina", "ek", "os")
]
VALUES = [
    f"{a}{b}" for a in ("zu", "mi", "ra", "to", "ve", "pa", "qu", "si", "no", "ha") for b in ("lk", "rn", "x")
]
FILLER = [
    "it rains often in the valley .",
    "the old road is closed in winter .",
    "many travellers pass through here .",
    "the market opens at dawn .",
]
WORDS = sorted({*NAMES, *VALUES, "the", "code", "of", "is", "what", "?", *" ".join(FILLER).split()})


def make_examples(rng: random.Random, pairs: list[tuple[str, str]], prefix: str) -> list[SquadExample]:
    examples = []
    for index, (name, value) in enumerate(pairs):
        fact = f"the code of {name} is {value} ."
        sentences = [fact, *rng.sample(FILLER, 2)]
        rng.shuffle(sentences)
        context = " ".join(sentences)
        start = context.index(fact) + len(fact) - len(value) - 2
        question = f"what is the code of {name} ?"
        examples.append(SquadExample(f"{prefix}{index}", "t", question, context, [Answer(value, start)]))
    return examples


def as_squad_json(examples: list[SquadExample]) -> dict:
    paragraphs = [
        {
            "context": e.context,
            "qas": [
                {
                    "id": e.qid,
                    "question": e.question,
                    "answers": [{"text": a.text, "answer_start": a.start} for a in e.answers],
                }
            ],
        }
        for e in examples
    ]
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}


def test_tiny_bert_learns_a_span_task(tmp_path):
    torch.set_num_threads(1)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, *WORDS]) + "\n")
    tokenizer = load_tokenizer(vocab)
    rng = random.Random(0)
    pairs = [(n, v) for n in NAMES for v in VALUES]
    rng.shuffle(pairs)
    held_out = set(pairs[:150])
    train_examples = make_examples(rng, [p for p in pairs if p not in held_out], "train")
    dev_examples = make_examples(rng, sorted(held_out), "dev")
    windows = dict(max_seq_length=64, doc_stride=32, max_query_length=12, progress=False)
    train_features = make_features(train_examples, tokenizer, **windows)
    dev_features = make_features(dev_examples, tokenizer, **windows)
    assert len(train_features) == len(train_examples)  # one window each: the task is about the span

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(SPECIAL_TOKENS) + len(WORDS),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = BertForQuestionAnswering(config)
    batches = FineTuningBatches(
        train_features.training_arrays(), global_batch_size=32, micro_batch_size=32, seed=0
    )
    max_steps = steps_for_epochs(len(train_features), epochs=10, global_batch_size=32)
    optimizer = build_optimizer(model, "adamw", learning_rate=2e-3, weight_decay=0.01)
    scheduler = warmup_poly_schedule(optimizer, max_steps // 10, max_steps, power=1.0)
    summary = run_loop(
        model, batches, question_answering_objective, optimizer, scheduler, max_steps=max_steps, log_every=20
    )
    assert summary["loss"] < 0.5 * summary["first_loss"]

    start_logits, end_logits = predict_logits(
        model, dev_features, batch_size=64, device="cpu", precision="fp32", progress=False
    )
    predictions, _, _ = postprocess(dev_examples, dev_features, start_logits, end_logits, max_answer_length=5)
    scores = evaluate(as_squad_json(dev_examples), predictions)
    assert scores["f1"] >= 90, scores
    # Every answer is a single word: a model that learnt the task names it exactly.
    assert np.isclose(scores["exact_match"], scores["f1"], atol=5)
