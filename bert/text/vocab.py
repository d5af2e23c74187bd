"""The vocabulary of a run (stage `vocab`): BERT's WordPiece or a byte-level BPE trained on the
corpora's sentences with Hugging Face `tokenizers`, Google's released vocab.txt downloaded, a file
of the user's (vocab.txt or tokenizer.json), or the tokenizer of the released weights that
pretraining continues from; written with the casing it is used with, as `vocab.txt` (WordPiece,
BERT's form) or `tokenizer.json` (any other), + `tokenizer_config.json`, which
bert.text.tokenization loads."""

import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, trainers
from tokenizers.models import BPE

from bert.atomic import atomic_folder
from bert.download.fetch import download
from bert.download.transport import SourceNotFound
from bert.errors import UserError
from bert.inputs import read_json
from bert.text.tokenization import (
    SPECIAL_TOKENS,
    TOKENIZER_JSON,
    bert_template,
    configured_lower_case,
    load_tokenizer,
    normalizer_lower_cases,
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


def train_bpe(
    sentences: Callable[[], Iterable[str]], *, vocab_size: int, min_frequency: int, lower_case: bool
) -> Tokenizer:
    """Train a byte-level BPE tokenizer of at most `vocab_size` tokens, as ModernBERT's (and GPT-2's,
    RoBERTa's) is made: NFC (and lower-casing when `lower_case`), byte-level pre-tokeniser keeping
    the space in front of a word in its piece, the 256 byte symbols always in the vocabulary, so no
    text is ever unknown. BERT's special tokens take ids 0..4 (SPECIAL_TOKENS) and BERT's template
    lays texts out, as ModernBERT's tokenizer does: `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`, B
    and its [SEP] of type id 1."""
    tokenizer = Tokenizer(BPE(unk_token="[UNK]"))
    steps = [normalizers.NFC(), normalizers.Lowercase()] if lower_case else [normalizers.NFC()]
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(sentences(), trainer=trainer)
    tokenizer.post_processor = bert_template(tokenizer)
    return tokenizer


def save_vocab(tokens: list[str], path: str | Path) -> None:
    """Write `vocab.txt`: one token per line, line number = id."""
    Path(path).write_text("".join(f"{token}\n" for token in tokens), encoding="utf-8")


def prepare_vocab(
    source: str,
    output_dir: str | Path,
    lower_case: bool,
    *,
    kind: str = "wordpiece",
    sentences: Callable[[], Iterable[str]] | None = None,
    vocab_size: int | None = None,
    min_frequency: int | None = None,
    url: str = "",
    checksum: str | None = None,
) -> Path:
    """Make output_dir/vocab.txt (BERT's WordPiece) or output_dir/tokenizer.json (any other
    tokenizer), and output_dir/tokenizer_config.json ({"do_lower_case": ...}); returns the first.

    source: "train" (`kind` wordpiece or bpe, trained on `sentences()`), "google" (download `url`,
    verified against `checksum`), "file:<path>" (a copy of a vocab.txt or a tokenizer.json) or
    "weights" (`url` is a Hugging Face folder, URL or path: its vocab.txt, else its tokenizer.json).
    A tokenizer.json lower-cases or not by its own normaliser: `lower_case` must say the same. The
    folder is built beside output_dir and renamed into place (bert.atomic)."""
    with atomic_folder(output_dir) as building:
        vocab_file, origin = _fetch_vocab(
            source, building, lower_case, kind, sentences, vocab_size, min_frequency, url, checksum
        )
        try:  # a clear message if it is not a vocabulary, naming the source, not the folder being built
            tokenizer = load_tokenizer(vocab_file, lower_case)
        except UserError as error:
            raise UserError(str(error).replace(str(vocab_file), origin)) from None
        if vocab_file.name == TOKENIZER_JSON and normalizer_lower_cases(tokenizer) != lower_case:
            cased = "lower-cases" if normalizer_lower_cases(tokenizer) else "keeps case"
            raise UserError(
                f"params.yaml: vocab.lower_case is {str(lower_case).lower()} but the tokenizer of vocab.source "
                f"{source} ({origin}) {cased}; set vocab.lower_case: {str(not lower_case).lower()}"
            )
        (building / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lower_case}) + "\n")
    return Path(output_dir) / vocab_file.name


def _fetch_vocab(source, building, lower_case, kind, sentences, vocab_size, min_frequency, url, checksum):
    """(the vocabulary file made in `building`, what to call its origin in messages)."""
    if source == "train":
        if sentences is None or vocab_size is None or min_frequency is None:
            raise ValueError("vocab source `train` needs sentences, vocab_size and min_frequency")
        settings = dict(vocab_size=vocab_size, min_frequency=min_frequency, lower_case=lower_case)
        if kind == "bpe":
            train_bpe(sentences, **settings).save(str(building / TOKENIZER_JSON), pretty=False)
            return building / TOKENIZER_JSON, "the trained tokenizer"
        if kind != "wordpiece":
            raise UserError(f"vocab.kind is {kind!r}; allowed: wordpiece, bpe")
        save_vocab(train_wordpiece(sentences, **settings), building / "vocab.txt")
        return building / "vocab.txt", "the trained vocabulary"
    if source == "google":
        download(url, building / "vocab.txt", checksum)
        return building / "vocab.txt", url
    if source.startswith("file:"):
        given = Path(source[len("file:") :])
        if not given.is_file():
            raise UserError(f"{given}: vocabulary file not found (vocab.source: {source})")
        name = TOKENIZER_JSON if given.suffix == ".json" else "vocab.txt"
        shutil.copyfile(given, building / name)
        return building / name, str(given)
    if source == "weights":  # BERT's vocab.txt where the folder has one, else its tokenizer.json
        folder = url.rstrip("/")
        for name in ("vocab.txt", TOKENIZER_JSON):
            try:
                download(f"{folder}/{name}", building / name)
                return building / name, f"{folder}/{name}"
            except SourceNotFound:
                continue
        raise UserError(f"{folder}: neither vocab.txt nor {TOKENIZER_JSON} there (vocab.source: weights)")
    raise UserError(f"vocab.source is {source!r}; allowed: train, google, file:<path>, weights")


def released_lower_case(folder: str, scratch: Path) -> bool | None:
    """Whether the BERT tokenizer of a Hugging Face folder (URL or path) lower-cases: its
    tokenizer_config.json's do_lower_case (BERT's default, True, when the key is absent), or None
    when the folder has no such file or its tokenizer is not BERT's and does not say (ModernBERT's:
    its tokenizer.json's normaliser says, which prepare_vocab checks). `scratch`: a folder to fetch
    it into."""
    source = f"{folder.rstrip('/')}/tokenizer_config.json"
    try:
        path = download(source, Path(scratch) / "tokenizer_config.json")
    except SourceNotFound:
        return None
    values = read_json(path, source)
    if (
        isinstance(values, dict)
        and "do_lower_case" not in values
        and not str(values.get("tokenizer_class") or "BertTokenizer").startswith("Bert")
    ):
        return None
    return configured_lower_case(path, source)
