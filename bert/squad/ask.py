"""Ask a fine-tuned BERT or ModernBERT question-answering model one question about one text.

    python -m bert.squad.ask --model DIR --question "Where is the café?" --context "Zoë's café is in São Paulo."

DIR is a Hugging Face BERT or ModernBERT directory (config.json, model.safetensors or
pytorch_model.bin, vocab.txt or tokenizer.json, tokenizer_config.json): the `finetune_squad`
stage's output, or any BertForQuestionAnswering or ModernBertForQuestionAnswering checkpoint from
the Hugging Face hub. The question goes the way of
a SQuAD dev question in predict_squad: a long context is cut into overlapping windows, and the
answer is cut out of the original text, so it is always a substring of the context.
"""

import argparse
import json
import logging
from pathlib import Path

import torch

from bert.errors import UserError, run_main
from bert.model import family
from bert.squad.answers import postprocess
from bert.squad.dataset import SquadExample
from bert.squad.features import make_features
from bert.squad.predict import predict_logits
from bert.text.tokenization import load_tokenizer_from_dir


def answer_question(
    model: torch.nn.Module,
    tokenizer,
    question: str,
    context: str,
    *,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    allow_no_answer: bool = False,
    null_score_diff_threshold: float = 0.0,
    batch_size: int = 16,
    precision: str = "fp32",
) -> tuple[str, list[dict]]:
    """The answer (a substring of `context`, or "" when `allow_no_answer` and the model says
    there is none) and the n-best list [{text, probability, start_logit, end_logit}, ...]."""
    if not question.strip() or not context.strip():
        raise UserError("both a question and a context are needed")
    max_seq_length = min(max_seq_length, model.config.max_position_embeddings)
    example = SquadExample("question", "", question, context, [])
    try:
        features = make_features(
            [example],
            tokenizer,
            max_seq_length=max_seq_length,
            doc_stride=doc_stride,
            max_query_length=max_query_length,
            progress=False,
        )
    except ValueError as error:  # window settings that leave no room for the context
        raise UserError(str(error)) from None
    device = next(model.parameters()).device
    start_logits, end_logits = predict_logits(
        model, features, batch_size=batch_size, device=device, precision=precision, progress=False
    )
    predictions, nbest, _ = postprocess(
        [example],
        features,
        start_logits,
        end_logits,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        version_2=allow_no_answer,
        null_score_diff_threshold=null_score_diff_threshold,
    )
    return predictions["question"], nbest["question"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bert.squad.ask", description="Answer a question about a text with a BERT QA model."
    )
    parser.add_argument("--model", required=True, help="Hugging Face BERT question-answering directory")
    parser.add_argument("--question", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--context", help="the text holding the answer")
    source.add_argument("--context-file", help="read the text from this UTF-8 file")
    parser.add_argument("--n-best", type=int, default=5, help="how many ranked answers to show (default 5)")
    parser.add_argument("--max-answer-length", type=int, default=30, help="in tokens (default 30)")
    parser.add_argument("--max-seq-length", type=int, default=384)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--max-query-length", type=int, default=64)
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    parser.add_argument(
        "--allow-no-answer",
        action="store_true",
        help="SQuAD 2.0 models: answer nothing when the model says so",
    )
    parser.add_argument(
        "--null-threshold", type=float, default=0.0, help="with --allow-no-answer (default 0.0)"
    )
    parser.add_argument("--json", action="store_true", help="print {answer, nbest} as JSON")
    args = parser.parse_args(argv)
    if args.n_best < 1 or args.max_answer_length < 1:
        raise UserError("--n-best and --max-answer-length must be at least 1")
    model_dir = Path(args.model)
    if not (model_dir / "config.json").is_file():
        raise UserError(f"{model_dir}: not a model directory (no config.json)")
    context = args.context
    if args.context_file:
        try:
            context = Path(args.context_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise UserError(f"{args.context_file}: cannot read the context ({error})") from None
    tokenizer, _ = load_tokenizer_from_dir(model_dir)
    model = family.from_pretrained(model_dir, "question_answering")
    answer, nbest = answer_question(
        model,
        tokenizer,
        args.question,
        context,
        n_best_size=args.n_best,
        max_answer_length=args.max_answer_length,
        max_seq_length=args.max_seq_length,
        doc_stride=args.doc_stride,
        max_query_length=args.max_query_length,
        allow_no_answer=args.allow_no_answer,
        null_score_diff_threshold=args.null_threshold,
        precision=args.precision,
    )
    if args.json:
        print(json.dumps({"answer": answer, "nbest": nbest}, ensure_ascii=False, indent=2))
        return
    print(answer if answer else "(no answer)")
    for rank, entry in enumerate(nbest, 1):
        text = entry["text"] if entry["text"] else "(no answer)"
        print(
            f"  {rank}. {text}  (p={entry['probability']:.3f}, start {entry['start_logit']:.2f}, "
            f"end {entry['end_logit']:.2f})"
        )


if __name__ == "__main__":
    run_main(main, logging.WARNING)
