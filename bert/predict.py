"""Answer one question about one text with a fine-tuned BERT question-answering model.

    python -m bert.predict --model DIR --question "Where is the café?" --context "Zoë's café is in São Paulo."

DIR is a Hugging Face BERT directory (config.json, model.safetensors or pytorch_model.bin,
vocab.txt, tokenizer_config.json with do_lower_case): the `finetune_squad` stage's output, or
any BertForQuestionAnswering checkpoint from the Hugging Face hub. A long context is cut into
overlapping windows exactly as for SQuAD evaluation, and the answer is cut out of the original
text, so it is always a substring of the context.
"""

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np
import torch

from bert.errors import UserError
from bert.modeling import BertForQuestionAnswering
from bert.squad import SquadExample, make_features, postprocess
from bert.tokenization import load_tokenizer


def read_lower_case(model_dir: Path) -> bool:
    """`do_lower_case` from tokenizer_config.json; BERT's tokenizers lower-case unless told otherwise."""
    path = model_dir / "tokenizer_config.json"
    if not path.is_file():
        return True
    try:
        return bool(json.loads(path.read_text(encoding="utf-8")).get("do_lower_case", True))
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as error:
        raise UserError(f"{path}: not a JSON object ({error})") from None


def answer_question(
    model: BertForQuestionAnswering,
    tokenizer,
    question: str,
    context: str,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    allow_no_answer: bool = False,
    null_score_diff_threshold: float = 0.0,
    batch_size: int = 16,
) -> tuple[str, list[dict]]:
    """The answer (a substring of `context`, or "" when `allow_no_answer` and the model says
    there is none) and the n-best list [{text, probability, start_logit, end_logit}, ...]."""
    if not question.strip() or not context.strip():
        raise UserError("both a question and a context are needed")
    max_seq_length = min(max_seq_length, model.config.max_position_embeddings)
    example = SquadExample("question", "", question, context, [])
    features = make_features(
        [example], tokenizer, max_seq_length, doc_stride, max_query_length, progress=False
    )
    start_logits, end_logits = [], []
    with torch.inference_mode():
        for begin in range(0, len(features), batch_size):
            rows = slice(begin, begin + batch_size)
            output = model(
                torch.from_numpy(features.input_ids[rows]).long(),
                torch.from_numpy(features.token_type_ids[rows]).long(),
                torch.from_numpy(features.attention_mask[rows]).long(),
            )
            start_logits.append(output.start_logits.float().numpy())
            end_logits.append(output.end_logits.float().numpy())
    predictions, nbest, _ = postprocess(
        [example],
        features,
        np.concatenate(start_logits),
        np.concatenate(end_logits),
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        version_2=allow_no_answer,
        null_score_diff_threshold=null_score_diff_threshold,
    )
    return predictions["question"], nbest["question"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bert.predict", description="Answer a question about a text with a BERT QA model."
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
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
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
        tokenizer = load_tokenizer(model_dir / "vocab.txt", read_lower_case(model_dir))
        model = BertForQuestionAnswering.from_pretrained(model_dir)
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
        )
    except (UserError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
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
    main()
