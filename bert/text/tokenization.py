"""The tokenizer of a run: BERT's WordPiece (a vocab.txt, configured exactly as BERT's) or any
Hugging Face fast tokenizer (a `tokenizer.json`: ModernBERT's byte-level BPE, RoBERTa's, ...),
through Hugging Face `tokenizers` (Rust).

One function builds the tokenizer every part of the project uses (example creation, SQuAD
features, prediction), so a vocabulary always means the same ids everywhere; `TokenLayout` says
what every stage needs to know about it: its special tokens and how it lays out one text or a pair.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from bert.errors import UserError
from bert.inputs import read_json, read_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TOKENIZER_JSON = "tokenizer.json"
# the names the special tokens go by in the tokenizers people use (BERT's and ModernBERT's, RoBERTa's)
SPECIAL_NAMES = {
    "mask": ("[MASK]", "<mask>"),
    "pad": ("[PAD]", "<pad>"),
    "unk": ("[UNK]", "<unk>"),
}


def load_tokenizer(vocab_file: str | Path, lower_case: bool = True) -> Tokenizer:
    """The tokenizer of `vocab_file`: a `tokenizer.json` as it is (its own normaliser decides the
    casing; `lower_case` is not read), or a BERT vocab.txt as BERT's tokenizer: BERT normaliser
    (lower-casing and accent stripping when `lower_case`), BERT pre-tokeniser, WordPiece with `##`
    continuations, and the `[CLS] A [SEP] B [SEP]` template. `encode(..., add_special_tokens=False)`
    gives bare pieces."""
    vocab_file = Path(vocab_file)
    if not vocab_file.is_file():
        raise UserError(f"{vocab_file}: vocabulary file not found (run the `vocab` stage, or fix the path)")
    if vocab_file.suffix == ".json":
        return _load_tokenizer_json(vocab_file)
    read_text(vocab_file)  # UTF-8 and not an HTML page, or one line saying where it is not
    tokenizer = Tokenizer(
        WordPiece.from_file(str(vocab_file), unk_token="[UNK]", max_input_chars_per_word=100)
    )
    # strip_accents=None follows `lowercase`, as in BERT: uncased models strip accents, cased keep them.
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lower_case
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    missing = [token for token in SPECIAL_TOKENS if tokenizer.token_to_id(token) is None]
    if missing:
        raise UserError(
            f"{vocab_file}: vocabulary lacks the special tokens {missing}; it is not a BERT vocab.txt"
        )
    tokenizer.post_processor = bert_template(tokenizer)
    return tokenizer


def bert_template(tokenizer: Tokenizer) -> processors.TemplateProcessing:
    """BERT's layout of one text or a pair, over the tokenizer's own [CLS] and [SEP] ids:
    `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`, B and its [SEP] of token type 1."""
    return processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]")), ("[SEP]", tokenizer.token_to_id("[SEP]"))],
    )


def _load_tokenizer_json(path: Path) -> Tokenizer:
    read_json(path)  # JSON, or one line saying where it is not
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception for a file it cannot read
        raise UserError(f"{path}: not a Hugging Face tokenizer.json ({error})") from None
    tokenizer.no_truncation()  # a released tokenizer.json may cut or pad; the stages do both themselves
    tokenizer.no_padding()
    TokenLayout.of(tokenizer, path)  # one line now if it lacks a special token or a pair template
    return tokenizer


def load_tokenizer_from_dir(directory: str | Path, default_lower_case: bool = True) -> tuple[Tokenizer, bool]:
    """The tokenizer of a folder (a Hugging Face model directory, the vocab stage's output) and
    whether it lower-cases. A folder with vocab.txt gets BERT's tokenizer over it, lower-casing as
    its tokenizer_config.json's `do_lower_case` says (BERT's default True when the file lacks the
    key, `default_lower_case` when there is no such file); a folder with only tokenizer.json gets
    that tokenizer, whose normaliser says the casing."""
    directory = Path(directory)
    if not (directory / "vocab.txt").is_file() and (directory / TOKENIZER_JSON).is_file():
        tokenizer = load_tokenizer(directory / TOKENIZER_JSON)
        return tokenizer, normalizer_lower_cases(tokenizer)
    config = directory / "tokenizer_config.json"
    lower_case = configured_lower_case(config) if config.is_file() else default_lower_case
    return load_tokenizer(directory / "vocab.txt", lower_case), lower_case


def vocabulary_size(vocab_file: str | Path) -> int:
    """How many ids a vocab.txt (its lines, as BERT counts them) or a tokenizer.json holds."""
    vocab_file = Path(vocab_file)
    if vocab_file.suffix == ".json":
        return load_tokenizer(vocab_file).get_vocab_size()
    with open(vocab_file, encoding="utf-8") as file:
        return sum(1 for _ in file)


def normalizer_lower_cases(tokenizer: Tokenizer) -> bool:
    """Whether the tokenizer's normaliser lower-cases (a `Lowercase` step, or BERT's with lowercase)."""

    def lowers(step) -> bool:
        if not step:
            return False
        if step.get("type") == "Sequence":
            return any(lowers(inner) for inner in step.get("normalizers", []))
        return step.get("type") == "Lowercase" or (
            step.get("type") == "BertNormalizer" and step.get("lowercase")
        )

    return bool(lowers(json.loads(tokenizer.to_str()).get("normalizer")))


@dataclass(frozen=True)
class TokenLayout:
    """What a tokenizer declares around its texts, read from its post-processor by encoding a probe
    text and a probe pair: the special ids before, between and after the texts and their type ids.
    BERT: `[CLS] A [SEP] B [SEP]`, B and its [SEP] of type 1; RoBERTa: `<s> A </s></s> B </s>`, all
    type 0. Also its mask/pad/unk ids, every special id, and its model kind (wordpiece, bpe, ...)."""

    single_before: tuple[int, ...]
    single_after: tuple[int, ...]
    pair_before: tuple[int, ...]
    pair_between: tuple[int, ...]
    pair_after: tuple[int, ...]
    # type ids of the pair's five parts: before, A (one for all its tokens), between, B, after
    pair_types: tuple[tuple[int, ...], int, tuple[int, ...], int, tuple[int, ...]]
    mask: int
    pad: int
    unk: int
    special_ids: tuple[int, ...]  # never masked, never drawn as a random replacement (but by WordPiece)
    vocab_size: int
    kind: str  # the tokenizer's model, lower-cased: wordpiece, bpe, unigram, wordlevel

    @property
    def cls(self) -> int:
        return self.single_before[0]

    @property
    def sep(self) -> int:
        return self.single_after[-1]

    @classmethod
    def of(cls, tokenizer: Tokenizer, source: str | Path = "the tokenizer") -> "TokenLayout":
        named = {}
        for role, names in SPECIAL_NAMES.items():
            found = [tokenizer.token_to_id(name) for name in names if tokenizer.token_to_id(name) is not None]
            if not found:
                raise UserError(f"{source}: the tokenizer has no {role} token (one of {', '.join(names)})")
            named[role] = found[0]
        single = _parts(tokenizer.encode("a", add_special_tokens=True))
        pair = _parts(tokenizer.encode("a", "b", add_special_tokens=True))
        if len(single) != 3 or len(pair) != 5 or not single[0][0] or not single[2][0] or not pair[4][0]:
            raise UserError(
                f"{source}: the tokenizer's post-processor does not put special tokens before and after "
                "a text and a pair (a template such as `[CLS] $A [SEP] $B [SEP]`)"
            )
        added = {index for index, token in tokenizer.get_added_tokens_decoder().items() if token.special}
        template = {index for part in (*single[::2], *pair[::2]) for index in part[0]}
        return cls(
            single_before=single[0][0],
            single_after=single[2][0],
            pair_before=pair[0][0],
            pair_between=pair[2][0],
            pair_after=pair[4][0],
            pair_types=(pair[0][1], pair[1][1][0], pair[2][1], pair[3][1][0], pair[4][1]),
            special_ids=tuple(sorted(added | template | set(named.values()))),
            vocab_size=tokenizer.get_vocab_size(),
            kind=json.loads(tokenizer.to_str())["model"]["type"].lower(),
            **named,
        )

    def pair(self, a, b) -> tuple[np.ndarray, np.ndarray]:
        """(ids, type ids) of the pair of token id sequences a and b as the template lays it out:
        BERT's `[CLS] a [SEP] b [SEP]`, types 0 up to the first [SEP] and 1 after it."""
        before_types, a_type, between_types, b_type, after_types = self.pair_types
        ids = np.concatenate([self.pair_before, a, self.pair_between, b, self.pair_after]).astype(np.int64)
        types = np.concatenate(
            [before_types, np.full(len(a), a_type), between_types, np.full(len(b), b_type), after_types]
        ).astype(np.int8)
        return ids, types

    def token_names(self, tokenizer: Tokenizer) -> dict[str, str]:
        """The special tokens by the names transformers' tokenizer_config.json gives them."""
        roles = {"cls_token": self.cls, "sep_token": self.sep, "mask_token": self.mask, "pad_token": self.pad}
        return {
            name: tokenizer.id_to_token(index) for name, index in {**roles, "unk_token": self.unk}.items()
        }

    def replaceable_ids(self) -> np.ndarray:
        """The ids a masked position may be replaced by at random: the whole vocabulary for
        WordPiece (as Google draws: BERT's bytes), every id but the special ones for the others
        (ModernBERT's tokenizer holds dozens of unused special tokens)."""
        ids = np.arange(self.vocab_size, dtype=np.int64)
        return ids if self.kind == "wordpiece" else np.setdiff1d(ids, self.special_ids)


def _parts(encoding) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """An encoding as alternating runs, special tokens first: specials, text, specials[, text,
    specials]; each run (ids, type ids), a special run empty where nothing stands there."""
    runs: list[tuple[list[int], list[int]]] = [([], [])]
    text_of_run = None  # which text (0, 1) the last run holds, None for a special run
    for index, type_id, sequence in zip(encoding.ids, encoding.type_ids, encoding.sequence_ids):
        if sequence != text_of_run:
            if sequence is not None and text_of_run is not None:  # two texts with nothing between
                runs.append(([], []))
            runs.append(([], []))
            text_of_run = sequence
        runs[-1][0].append(index)
        runs[-1][1].append(type_id)
    if text_of_run is not None:
        runs.append(([], []))
    return [(tuple(ids), tuple(types)) for ids, types in runs]


def configured_lower_case(config: Path, source: str | Path | None = None) -> bool:
    """A tokenizer_config.json's `do_lower_case` (BERT's default, True, when the key is absent);
    `source` is what to call the file in messages (a URL it was fetched from)."""
    values = read_json(config, source)
    if not isinstance(values, dict):
        raise UserError(f"{source or config}: not a JSON object of tokenizer settings")
    return bool(values.get("do_lower_case", True))


def tokenizer_without_vocab(lower_case: bool) -> Tokenizer:
    """BERT's normaliser and pre-tokeniser over an empty WordPiece model: what a vocabulary is
    trained with (bert.text.vocab) and what `load_tokenizer` fills."""
    tokenizer = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lower_case
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


def continuation_table(tokenizer: Tokenizer) -> np.ndarray:
    """bool [vocab_size]: True for `##` pieces (the ones whole-word masking keeps with their word)."""
    table = np.zeros(tokenizer.get_vocab_size(), dtype=bool)
    for token, index in tokenizer.get_vocab().items():
        table[index] = token.startswith("##")
    return table


# Characters BERT's normaliser deletes (control characters) that Python's str.split() would split
# on, joining the words around them: they are deleted before splitting.
_DELETED_BEFORE_SPLIT = "\x00\x0b\x0c\x1c\x1d\x1e\x1f\x85"
_SEPARATOR = "\x00"  # a chunk of its own between sentences (BERT deletes "\x00", so none is left)


class _ChunkIndex(dict):
    """chunk -> its row in the piece table; a chunk seen for the first time gets the next row and
    waits in `new` to be tokenised (no separate pass to find the unknown chunks)."""

    def __init__(self):
        super().__init__({_SEPARATOR: 0})  # row 0: no pieces
        self.new: list[str] = []

    def __missing__(self, chunk: str) -> int:
        self[chunk] = row = len(self)
        self.new.append(chunk)
        return row


class SentenceEncoder:
    """Token ids of many sentences, exactly as `tokenizer.encode(s, add_special_tokens=False)`, and
    where each word starts (from the encodings' word ids), several times faster for BERT's WordPiece.

    BERT's normalisation, pre-tokenisation and WordPiece never look across whitespace, so the
    pieces of a whitespace-separated chunk do not depend on its neighbours. Real text repeats its
    chunks (Zipf), so each distinct chunk is tokenised once and remembered as a row of a ragged
    piece table; a batch of sentences then becomes ids with one str.split(), one dict lookup per
    chunk and a few NumPy gathers. Other tokenizers (byte-level BPE keeps the space in front of a
    word in its piece) encode each sentence whole.
    """

    def __init__(self, tokenizer: Tokenizer, max_cached_chunks: int = 1_000_000):
        self.tokenizer = tokenizer
        self.max_cached_chunks = max_cached_chunks
        described = json.loads(tokenizer.to_str())
        self.chunked = (described["model"]["type"], (described.get("pre_tokenizer") or {}).get("type")) == (
            "WordPiece",
            "BertPreTokenizer",
        )
        self._clear()

    def _clear(self) -> None:
        self.chunk_index = _ChunkIndex()
        self.pieces = np.zeros(0, dtype=np.int32)  # pieces of all known chunks, back to back
        self.word_starts = np.zeros(0, dtype=bool)  # per piece: the first of its word
        self.piece_starts = np.zeros(2, dtype=np.int64)  # row k: pieces[piece_starts[k]:piece_starts[k + 1]]

    def _learn_new_chunks(self) -> None:
        # The new chunks, joined by spaces, go through the tokenizer as a few long texts (a text per
        # chunk costs 2x more); the character offset of each piece tells which chunk it is from.
        chunks, self.chunk_index.new = self.chunk_index.new, []
        per_text = 8192
        texts = [" ".join(chunks[i : i + per_text]) for i in range(0, len(chunks), per_text)]
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        new_pieces, new_word_starts, counts = [], [], []
        for first, encoding in zip(range(0, len(chunks), per_text), encodings):
            group = chunks[first : first + per_text]
            chunk_offsets = np.cumsum([0] + [len(chunk) + 1 for chunk in group[:-1]])
            piece_offsets = np.array([start for start, _ in encoding.offsets], dtype=np.int64)
            chunk_of_piece = np.searchsorted(chunk_offsets, piece_offsets, side="right") - 1
            counts.append(np.bincount(chunk_of_piece, minlength=len(group)))
            new_pieces.append(np.array(encoding.ids, dtype=np.int32))
            new_word_starts.append(_word_starts(encoding.word_ids))
        self.pieces = np.concatenate([self.pieces, *new_pieces])
        self.word_starts = np.concatenate([self.word_starts, *new_word_starts])
        new_ends = self.piece_starts[-1] + np.cumsum(np.concatenate(counts))
        self.piece_starts = np.concatenate([self.piece_starts, new_ends])

    def encode(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids int32 [total pieces], lengths int32 [len(sentences)], word_start bool [total pieces])
        for sentences in order; word_start is True at the first piece of each word."""
        if not sentences:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=bool)
        if not self.chunked:
            encodings = self.tokenizer.encode_batch(sentences, add_special_tokens=False)
            lengths = np.array([len(encoding.ids) for encoding in encodings], dtype=np.int32)
            ids = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int32, count=int(lengths.sum()))
            starts = [_word_starts(encoding.word_ids) for encoding in encodings]
            return ids, lengths, np.concatenate(starts)
        if len(self.chunk_index) > self.max_cached_chunks:
            self._clear()
        # one split for the whole batch: a separator chunk after every sentence marks its end
        joined = "".join(sentences)
        if any(character in joined for character in _DELETED_BEFORE_SPLIT):  # rare
            deleted = str.maketrans("", "", _DELETED_BEFORE_SPLIT)
            sentences = [sentence.translate(deleted) for sentence in sentences]
        text = f" {_SEPARATOR} ".join(sentences) + f" {_SEPARATOR}"
        chunks = text.split()
        chunk_ids = np.fromiter(map(self.chunk_index.__getitem__, chunks), dtype=np.int64, count=len(chunks))
        if self.chunk_index.new:
            self._learn_new_chunks()
        starts = self.piece_starts[chunk_ids]
        lengths = self.piece_starts[chunk_ids + 1] - starts
        ends = np.cumsum(lengths)
        # index of every output piece in self.pieces: each chunk's start, then +1 per piece
        gather = np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1])
        sentence_ends = ends[chunk_ids == 0]
        sentence_lengths = np.diff(sentence_ends, prepend=0).astype(np.int32)
        return self.pieces[gather], sentence_lengths, self.word_starts[gather]


def _word_starts(word_ids: list[int | None]) -> np.ndarray:
    """bool per piece: its word id differs from the piece before's (the first piece of a word)."""
    words = np.array([-1 if word is None else word for word in word_ids], dtype=np.int64)
    return np.diff(words, prepend=-2) != 0
