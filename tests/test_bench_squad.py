"""The SQuAD inference benchmark's inputs: SQuAD-shaped files from real paragraphs, and the dev-set
timing (ours as predict_squad runs, transformers padded and with dynamic padding)."""

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from bench.squad_like import MIN_PARAGRAPH_CHARS, squad_like
from bert.corpus.documents import DocumentWriter
from bert.squad.dataset import examples_from_json

REPO = Path(__file__).resolve().parents[1]
SHARED_DUMP = REPO.parent / "shared/data/enwiki-sample-70pages.xml.bz2"

SENTENCE = "The river rises in the hills and flows west through three towns before it meets the sea. "


def test_squad_like_keeps_long_paragraphs_with_answerable_questions(tmp_path):
    writer = DocumentWriter(tmp_path)
    long_paragraph = SENTENCE * 6  # ~540 characters
    writer.add("wiki", "1", "River", "\n".join(["A short one.", long_paragraph, "Another short paragraph."]))
    writer.add("wiki", "2", "Stub", "Too short to keep.")
    writer.add("wiki", "3", "Hills", long_paragraph + "\n" + long_paragraph.upper())
    writer.close()

    dataset = squad_like(tmp_path, questions_per_paragraph=3, seed=1)

    assert [article["title"] for article in dataset["data"]] == ["River", "Hills"]
    paragraphs = [p for article in dataset["data"] for p in article["paragraphs"]]
    assert len(paragraphs) == 3 and all(len(p["context"]) >= MIN_PARAGRAPH_CHARS for p in paragraphs)
    examples = examples_from_json(dataset)  # checks every answer against its context
    assert len(examples) == 9 and len({e.qid for e in examples}) == 9
    for example in examples:
        words = example.question.rstrip("?").split()
        assert 4 <= len(words) <= 16 and words[0] == example.answers[0].text
    assert squad_like(tmp_path, 3, seed=1) == dataset  # seeded


@pytest.mark.skipif(not SHARED_DUMP.is_file(), reason="needs ../shared/data (the real Wikipedia sample)")
def test_squad_like_from_real_wikipedia_has_squad_sized_paragraphs(tmp_path):
    from bert.corpus.wikipedia import extract_wikipedia

    extract_wikipedia(SHARED_DUMP, tmp_path / "documents", "wikipedia", compute=1)
    dataset = squad_like(tmp_path / "documents", questions_per_paragraph=1)
    contexts = [p["context"] for article in dataset["data"] for p in article["paragraphs"]]
    # SQuAD v1.1's paragraphs average ~750 characters; real Wikipedia prose gives the same order.
    assert len(contexts) > 50 and 600 < sum(map(len, contexts)) / len(contexts) < 1200


def _tiny_model_and_squad_file(tmp_path: Path) -> tuple[Path, Path]:
    """A random 1-layer model over the words of SENTENCE, and a SQuAD-like file of 3 paragraphs."""
    import torch

    from bert.model.config import BertConfig
    from bert.model.network import BertForQuestionAnswering

    (tmp_path / "documents").mkdir()
    writer = DocumentWriter(tmp_path / "documents")
    for i in range(3):
        writer.add("wiki", str(i), f"T{i}", (SENTENCE * (6 + 3 * i)).strip())
    writer.close()
    squad_file = tmp_path / "squad.json"
    squad_file.write_text(json.dumps(squad_like(tmp_path / "documents", 2)))
    words = sorted({w.strip(".?").lower() for w in SENTENCE.split()})
    vocab = tmp_path / "model/vocab.txt"
    vocab.parent.mkdir()
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?", *words]) + "\n")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab.read_text().split()), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=128)  # fmt: skip
    BertForQuestionAnswering(config).save_pretrained(vocab.parent, vocab_file=vocab)
    return vocab.parent, squad_file


def test_dev_set_benchmark_cli_times_both_libraries_on_the_same_answers(tmp_path):
    pytest.importorskip("transformers")
    model_dir, squad_file = _tiny_model_and_squad_file(tmp_path)

    done = subprocess.run(
        [sys.executable, "-m", "bench.squad_inference", "--model", str(model_dir), "--squad", str(squad_file),
         "--seq-len", "64", "--doc-stride", "32", "--max-query-length", "16", "--batch", "4", "--rounds", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["windows"] > 6 and 0 < result["padding_at_full_length"] < 1
    assert result["max_start_logit_difference"] < 1e-4
    assert result["speedup"] > 0 and result["speedup_vs_dynamic_padding"] > 0


def test_training_benchmark_cli_compares_padded_trimmed_binned_and_unpadded_batches(tmp_path):
    model_dir, squad_file = _tiny_model_and_squad_file(tmp_path)

    done = subprocess.run(
        [sys.executable, "-m", "bench.squad_train", "--model", str(model_dir), "--squad", str(squad_file),
         "--seq-len", "96", "--doc-stride", "32", "--max-query-length", "16", "--batch", "4", "--steps", "2",
         "--rounds", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    waste = {
        name: result[name]["padding_waste"]
        for name in ("padded_to_max_length", "random_trimmed", "length_binned")
    }
    # One binning window holds the whole epoch here, and sorted batches have the smallest maxima.
    assert 0 <= waste["length_binned"] <= waste["random_trimmed"] <= waste["padded_to_max_length"] < 1, waste
    assert waste["length_binned"] < waste["padded_to_max_length"], waste
    assert all(result[name]["windows_per_second"] > 0 for name in waste)
    assert result["speedup_vs_padded"] > 0 and result["speedup_vs_random_trimmed"] > 0
    assert result["length_binned_unpadded"]["padding_waste"] == waste["length_binned"]  # the same batches
    assert (
        result["length_binned_unpadded"]["windows_per_second"] > 0
        and result["unpadded_speedup_vs_binned"] > 0
    )


def test_parity_bench_at_learning_rate_zero_scores_both_sides_alike(minilm_dir, tmp_path):
    """bench.squad_parity end to end at a tiny size: two steps per side on 8 MiniLM windows. With
    no learning rate both sides keep MiniLM and the one shared QA head, so the same windows must
    give the same answers: a check that both really start from the same weights and inputs."""
    pytest.importorskip("transformers")
    from bench.squad_parity import main

    out = tmp_path / "parity.json"
    quiet = logging.getLogger("bert.model.hf")
    level = quiet.level
    try:  # main() quiets bert.model.hf for its own run; later tests must see its warnings again
        result = main(
            ["--model", str(minilm_dir), "--train-questions", "8", "--dev-questions", "6", "--epochs", "1",
             "--batch-size", "4", "--learning-rate", "0", "--seeds", "0", "--speed-steps", "1", "--speed-rounds", "1", "--out", str(out)]
        )  # fmt: skip
    finally:
        quiet.setLevel(level)

    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["train_windows"] == 8 and result["dev_questions"] == 6
    (run,) = result["runs"]
    assert run["steps"] == 2
    ours, theirs = run["ours"], run["transformers"]
    assert ours["f1"] == pytest.approx(theirs["f1"]) and ours["exact_match"] == theirs["exact_match"]
    assert ours["windows_per_second"] > 0 and theirs["windows_per_second"] > 0
    summary = result["summary"]
    assert summary["f1_gap"] == pytest.approx(0) and summary["runs_speed_ratio"] > 0
    assert result["timing"]["speed_ratio"] > 0
    assert result["machine"]["nproc"] >= 1 and result["machine"]["torch_threads"] >= 1
