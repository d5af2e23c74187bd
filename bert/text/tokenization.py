"""WordPiece tokenisation through Hugging Face `tokenizers` (Rust), configured exactly as BERT's.

One function builds the tokenizer every part of the project uses (example creation, SQuAD
features, prediction), so a vocabulary always means the same ids everywhere.
"""

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from bert.errors import UserError
from bert.inputs import read_json, read_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_tokenizer(vocab_file: str | Path, lower_case: bool = True) -> Tokenizer:
    """BERT's tokenizer for `vocab_file`: BERT normaliser (lower-casing and accent stripping when
    `lower_case`), BERT pre-tokeniser, WordPiece with `##` continuations, and the
    `[CLS] A [SEP] B [SEP]` template. `encode(..., add_special_tokens=False)` gives bare pieces."""
    vocab_file = Path(vocab_file)
    if not vocab_file.is_file():
        raise UserError(f"{vocab_file}: vocabulary file not found (run the `vocab` stage, or fix the path)")
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
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tokenizer


def load_tokenizer_from_dir(directory: str | Path, default_lower_case: bool = True) -> tuple[Tokenizer, bool]:
    """The tokenizer of a folder with vocab.txt (a Hugging Face BERT directory, the vocab stage's
    output) and whether it lower-cases: as its tokenizer_config.json's `do_lower_case` says, BERT's
    default True when the file lacks the key, `default_lower_case` when there is no such file."""
    directory = Path(directory)
    config = directory / "tokenizer_config.json"
    lower_case = configured_lower_case(config) if config.is_file() else default_lower_case
    return load_tokenizer(directory / "vocab.txt", lower_case), lower_case


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
    """Token ids of many sentences, exactly as `tokenizer.encode(s, add_special_tokens=False)`,
    several times faster.

    BERT's normalisation, pre-tokenisation and WordPiece never look across whitespace, so the
    pieces of a whitespace-separated chunk do not depend on its neighbours. Real text repeats its
    chunks (Zipf), so each distinct chunk is tokenised once and remembered as a row of a ragged
    piece table; a batch of sentences then becomes ids with one str.split(), one dict lookup per
    chunk and a few NumPy gathers.
    """

    def __init__(self, tokenizer: Tokenizer, max_cached_chunks: int = 1_000_000):
        self.tokenizer = tokenizer
        self.max_cached_chunks = max_cached_chunks
        self._clear()

    def _clear(self) -> None:
        self.chunk_index = _ChunkIndex()
        self.pieces = np.zeros(0, dtype=np.int32)  # pieces of all known chunks, back to back
        self.piece_starts = np.zeros(2, dtype=np.int64)  # row k: pieces[piece_starts[k]:piece_starts[k + 1]]

    def _learn_new_chunks(self) -> None:
        # The new chunks, joined by spaces, go through the tokenizer as a few long texts (a text per
        # chunk costs 2x more); the character offset of each piece tells which chunk it is from.
        chunks, self.chunk_index.new = self.chunk_index.new, []
        per_text = 8192
        texts = [" ".join(chunks[i : i + per_text]) for i in range(0, len(chunks), per_text)]
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        new_pieces, counts = [], []
        for first, encoding in zip(range(0, len(chunks), per_text), encodings):
            group = chunks[first : first + per_text]
            chunk_offsets = np.cumsum([0] + [len(chunk) + 1 for chunk in group[:-1]])
            piece_offsets = np.array([start for start, _ in encoding.offsets], dtype=np.int64)
            chunk_of_piece = np.searchsorted(chunk_offsets, piece_offsets, side="right") - 1
            counts.append(np.bincount(chunk_of_piece, minlength=len(group)))
            new_pieces.append(np.array(encoding.ids, dtype=np.int32))
        self.pieces = np.concatenate([self.pieces, *new_pieces])
        new_ends = self.piece_starts[-1] + np.cumsum(np.concatenate(counts))
        self.piece_starts = np.concatenate([self.piece_starts, new_ends])

    def encode(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(ids int32 [total pieces], lengths int32 [len(sentences)]) for sentences in order."""
        if not sentences:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
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
        return self.pieces[gather], sentence_lengths
