"""The WordPiece vocabulary of a run (stage `vocab`): trained on the corpora's sentences with
Hugging Face `tokenizers`, Google's released vocab.txt downloaded, a file of the user's, or the
vocab.txt of the released weights that pretraining continues from; written
with the casing it is used with, as `vocab.txt` + `tokenizer_config.json`, which
bert.text.tokenization loads."""

import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from tokenizers import trainers

from bert.atomic import atomic_folder
from bert.download.fetch import download
from bert.download.transport import SourceNotFound
from bert.errors import UserError
from bert.text.tokenization import (
    SPECIAL_TOKENS,
    configured_lower_case,
    load_tokenizer,
    tokenizer_without_vocab,
)


def train_wordpiece(
    sentences: Callable[[], Iterable[str]], *, vocab_size: int, min_frequency: int, lower_case: bool
) -> list[str]:
    """Train a BERT WordPiece vocabulary of at most `vocab_size` tokens; returns the tokens in id
    order. `sentences()` streams the training text (it is called twice). Same normaliser and
    pre-tokeniser as `load_tokenizer`; SPECIAL_TOKENS take ids 0..4; continuations start `##`.

    tokenizers' trainer numbers `##` pieces in hash-map order, and merges with equal counts are
    then picked differently from run to run (huggingface/tokenizers#1794). Declaring every `##`
    piece up front, sorted, fixes their ids and makes the result the same on every run."""
    tokenizer = tokenizer_without_vocab(lower_case)
    characters: set[str] = set()
    for sentence in sentences():
        characters.update(sentence)
    continuations = set()
    for character in characters:
        normalized = tokenizer.normalizer.normalize_str(character)
        # characters BERT splits off as words of their own (punctuation, CJK) never continue a word
        words = tokenizer.pre_tokenizer.pre_tokenize_str("a" + normalized)
        if normalized and [word for word, _ in words] == ["a" + normalized]:
            continuations.update(normalized)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *sorted("##" + c for c in continuations)],
        continuing_subword_prefix="##",
        show_progress=False,
    )
    tokenizer.train_from_iterator(sentences(), trainer=trainer)
    vocab = tokenizer.get_vocab(with_added_tokens=False)
    return sorted(vocab, key=vocab.__getitem__)


def save_vocab(tokens: list[str], path: str | Path) -> None:
    """Write `vocab.txt`: one token per line, line number = id."""
    Path(path).write_text("".join(f"{token}\n" for token in tokens), encoding="utf-8")


def prepare_vocab(
    source: str,
    output_dir: str | Path,
    lower_case: bool,
    *,
    sentences: Callable[[], Iterable[str]] | None = None,
    vocab_size: int | None = None,
    min_frequency: int | None = None,
    url: str = "",
    checksum: str | None = None,
) -> Path:
    """Make output_dir/vocab.txt and output_dir/tokenizer_config.json ({"do_lower_case": ...}).

    source: "train" (WordPiece trained on `sentences()`), "google" (download `url`, verified
    against `checksum`), "file:<path>" (a copy) or "weights" (`url` is a Hugging Face folder, URL
    or path: its vocab.txt). The folder is built beside output_dir and renamed into place (bert.atomic)."""
    with atomic_folder(output_dir) as building:
        vocab_file = building / "vocab.txt"
        origin = "the trained vocabulary"
        if source == "train":
            if sentences is None or vocab_size is None or min_frequency is None:
                raise ValueError("vocab source `train` needs sentences, vocab_size and min_frequency")
            tokens = train_wordpiece(
                sentences, vocab_size=vocab_size, min_frequency=min_frequency, lower_case=lower_case
            )
            save_vocab(tokens, vocab_file)
        elif source == "google":
            download(url, vocab_file, checksum)
            origin = url
        elif source.startswith("file:"):
            given = Path(source[len("file:") :])
            if not given.is_file():
                raise UserError(f"{given}: vocabulary file not found (vocab.source: {source})")
            shutil.copyfile(given, vocab_file)
            origin = str(given)
        elif source == "weights":
            download(f"{url.rstrip('/')}/vocab.txt", vocab_file)
            origin = f"{url.rstrip('/')}/vocab.txt"
        else:
            raise UserError(f"vocab.source is {source!r}; allowed: train, google, file:<path>, weights")
        try:  # a clear message if it is not a BERT vocab, naming the source, not the folder being built
            load_tokenizer(vocab_file, lower_case)
        except UserError as error:
            raise UserError(str(error).replace(str(vocab_file), origin)) from None
        (building / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lower_case}) + "\n")
    return Path(output_dir) / "vocab.txt"


def released_lower_case(folder: str, scratch: Path) -> bool | None:
    """Whether the tokenizer of a Hugging Face folder (URL or path) lower-cases: its
    tokenizer_config.json's do_lower_case (BERT's default, True, when the key is absent), or None
    when the folder has no such file. `scratch`: a folder to fetch it into."""
    source = f"{folder.rstrip('/')}/tokenizer_config.json"
    try:
        path = download(source, Path(scratch) / "tokenizer_config.json")
    except SourceNotFound:
        return None
    return configured_lower_case(path, source)
