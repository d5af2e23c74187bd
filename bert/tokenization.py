"""WordPiece tokenisation through Hugging Face `tokenizers` (Rust), configured exactly as BERT's.

One function builds the tokenizer every part of the project uses (example creation, SQuAD
features, prediction), so a vocabulary always means the same ids everywhere.
"""

from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from bert.errors import UserError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_tokenizer(vocab_file: str | Path, lower_case: bool = True) -> Tokenizer:
    """BERT's tokenizer for `vocab_file`: BERT normaliser (lower-casing and accent stripping when
    `lower_case`), BERT pre-tokeniser, WordPiece with `##` continuations, and the
    `[CLS] A [SEP] B [SEP]` template. `encode(..., add_special_tokens=False)` gives bare pieces."""
    vocab_file = Path(vocab_file)
    if not vocab_file.is_file():
        raise UserError(f"{vocab_file}: vocabulary file not found (run the `vocab` stage, or fix the path)")
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
