"""`python -m bert.squad.ask`: one question, one context, a Hugging Face QA directory."""

import json
import subprocess
import sys

import pytest
import torch

from bert.errors import run_main
from bert.model.config import BertConfig
from bert.model.network import BertForQuestionAnswering
from bert.squad.ask import main

CONTEXT = (
    "Zoë Saldaña’s café in São Paulo opened in 1998. “Le Petit Café” was its name, and it’s still there."
)


@pytest.fixture(scope="module")
def tiny_qa_dir(tmp_path_factory, uncased_vocab):
    """A randomly initialised tiny BertForQuestionAnswering saved in Hugging Face format."""
    torch.manual_seed(0)
    vocab_size = len(uncased_vocab.read_text(encoding="utf-8").splitlines())
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    directory = tmp_path_factory.mktemp("qa") / "tiny-qa"
    BertForQuestionAnswering(config).save_pretrained(directory, vocab_file=uncased_vocab, lower_case=True)
    return directory


def test_cli_prints_an_answer_from_the_context(tiny_qa_dir):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bert.squad.ask",
            "--model",
            str(tiny_qa_dir),
            "--question",
            "Where is the café?",
            "--context",
            CONTEXT,
            "--n-best",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] and lines[0] in CONTEXT
    assert len(lines) == 4 and lines[1].startswith("  1. " + lines[0] + "  (p=")


def test_long_context_json_nbest(tiny_qa_dir, capsys, tmp_path):
    """A context longer than a window (several windows), read from a file; every n-best answer is
    a distinct substring of it, probabilities sum to 1."""
    long_context = " ".join([CONTEXT] * 12)
    (tmp_path / "context.txt").write_text(long_context, encoding="utf-8")
    main(
        [
            "--model",
            str(tiny_qa_dir),
            "--question",
            "When did it open?",
            "--context-file",
            str(tmp_path / "context.txt"),
            "--n-best",
            "5",
            "--max-seq-length",
            "64",
            "--doc-stride",
            "24",
            "--max-query-length",
            "16",
            "--json",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    texts = [entry["text"] for entry in result["nbest"]]
    assert result["answer"] == texts[0] and len(texts) == 5 == len(set(texts))
    assert all(text and text in long_context for text in texts)
    assert sum(entry["probability"] for entry in result["nbest"]) == pytest.approx(1.0)


def test_allow_no_answer_lists_the_null_answer(tiny_qa_dir, capsys):
    main(
        [
            "--model",
            str(tiny_qa_dir),
            "--question",
            "Who?",
            "--context",
            CONTEXT,
            "--allow-no-answer",
            "--json",
            "--null-threshold",
            "-1000",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert result["answer"] == "" and "" in [entry["text"] for entry in result["nbest"]]


def test_bad_model_dir_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda: main(["--model", str(tmp_path / "missing"), "--question", "?", "--context", "text"]))
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "missing" in err[0]
