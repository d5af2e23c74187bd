"""Vocabularies (bert.text.vocab): WordPiece trained deterministically, Google's downloaded, a user's file
checked; each with the casing it is loaded with."""

import json
from pathlib import Path

import numpy as np
import pytest

from bert.errors import UserError
from bert.text.tokenization import SPECIAL_TOKENS, continuation_table, load_tokenizer
from bert.text.vocab import prepare_vocab, save_vocab, train_wordpiece


def training_text(count=400):
    rng = np.random.default_rng(0)
    words = ["running", "jumped", "Über", "naïve", "tokenisation", "data", "pipeline", "東京", "the", "of"]
    return [" ".join(rng.choice(words, size=8)) + "." for _ in range(count)]


def test_train_wordpiece_special_tokens_prefix_and_determinism(tmp_path):
    # several runs: tokenizers' trainer alone gives a different vocabulary on some runs
    for name in "abcd":
        save_vocab(
            train_wordpiece(training_text, vocab_size=120, min_frequency=2, lower_case=True), tmp_path / name
        )
    assert len({(tmp_path / name).read_bytes() for name in "abcd"}) == 1
    (tmp_path / "a.txt").write_bytes((tmp_path / "a").read_bytes())
    lines = (tmp_path / "a.txt").read_text(encoding="utf-8").splitlines()
    assert lines[:5] == list(SPECIAL_TOKENS)
    assert len(lines) <= 120 and any(line.startswith("##") for line in lines)
    assert not any(line.strip() != line or line in ("##.", "##東", "## ") for line in lines)
    assert "über" not in lines and "uber" in "".join(lines)  # lower-cased and accents stripped
    tokenizer = load_tokenizer(tmp_path / "a.txt", lower_case=True)
    assert tokenizer.token_to_id("[MASK]") == 4
    table = continuation_table(tokenizer)
    assert table.sum() == sum(line.startswith("##") for line in lines)


def test_prepare_vocab_train_and_file(tmp_path):
    trained = prepare_vocab(
        "train", tmp_path / "vocab", True, sentences=training_text, vocab_size=100, min_frequency=2
    )
    assert json.loads((tmp_path / "vocab" / "tokenizer_config.json").read_text()) == {"do_lower_case": True}
    copied = prepare_vocab(f"file:{trained}", tmp_path / "copy", False)
    assert copied.read_bytes() == trained.read_bytes()
    assert json.loads((tmp_path / "copy" / "tokenizer_config.json").read_text()) == {"do_lower_case": False}
    assert not (tmp_path / "copy.tmp").exists()


def test_prepare_vocab_rejects_bad_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        prepare_vocab(f"file:{tmp_path / 'missing.txt'}", tmp_path / "out", True)
    (tmp_path / "bad.txt").write_text("hello\nworld\n")
    with pytest.raises(UserError, match="special tokens"):
        prepare_vocab(f"file:{tmp_path / 'bad.txt'}", tmp_path / "out", True)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.tmp").exists()


def test_prepare_vocab_google_goes_through_download(tmp_path, uncased_vocab, monkeypatch):
    """The google source hands url, destination and checksum to bert.download.fetch.download."""
    calls = []

    def download(source, dest_path, checksum):
        calls.append((source, checksum))
        Path(dest_path).write_bytes(Path(source).read_bytes())

    monkeypatch.setattr("bert.text.vocab.download", download)
    path = prepare_vocab("google", tmp_path / "vocab", True, url=str(uncased_vocab), checksum="sha256:x")
    assert calls == [(str(uncased_vocab), "sha256:x")]
    tokenizer = load_tokenizer(path)
    assert [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 100, 101, 102, 103]


def test_prepare_vocab_google_with_real_downloader(tmp_path, uncased_vocab):
    download = pytest.importorskip("bert.download.fetch", reason="bert.download.fetch is on another branch")
    assert hasattr(download, "download")
    path = prepare_vocab("google", tmp_path / "vocab", True, url=str(uncased_vocab))
    assert path.read_bytes() == uncased_vocab.read_bytes()
