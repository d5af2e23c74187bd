from pathlib import Path

import numpy as np
import pytest

from bench.pretraining_data import wikipedia_documents
from bert.text.tokenization import SentenceEncoder, load_tokenizer

SYNTHETIC = [
    "Héllo Wörld! Ça va? Naïve façade, coöperate, Ångström, Øresund.",
    "東京は日本の首都です。北京 and 서울 are capitals too.",
    "Punctuation: (a), [b], {c}; \"quoted\" 'single' — dashes – and… ellipses?!",
    "Control\x00chars\x07in\x1bthe\u200bmiddle\ufffdof\x7fwords and tabs\tand\nnewlines\r.",
    "Odd whitespace:\xa0no-break\u3000ideographic\u2028line\x0bvertical\x0cfeed\x1cfs\x85nel.",
    "A very long word: " + "supercalifragilisticexpialidocious" * 4 + " and " + "x" * 150 + ".",
    "UPPER lower MiXeD CASE with numbers 3.14159 and 1,000,000 and e-mail a.b@c.org",
    "Combining accents: e\u0301 a\u0300 o\u0308, and a lone \u0301 mark, plus ﬁ ligature.",
    "Emoji 😀 and symbols © ® ™ € £ ¥ ∑ √ ∞ and math x² + y² = z².",
    "",
    "   ",
    "Ελληνικά ΣΊΣΥΦΟΥ σίσυφος and Кириллица Москва.",
]
# Known, documented divergence left out above: an upper-case word-final sigma ("ΣΊΣΥΦΟΣ") lower-cases
# to ς in Python's str.lower() (the slow tokenizer) but to σ in tokenizers (Rust, char by char).


def wikipedia_sentences(path: Path, limit: int = 3000) -> list[str]:
    """Plain-ish sentences from the real Wikipedia sample (the pretraining-data bench's stripper)."""
    return [sentence for document in wikipedia_documents(path) for sentence in document][:limit]


@pytest.fixture(scope="module")
def sentences(shared_data) -> list[str]:
    real = wikipedia_sentences(shared_data / "enwiki-sample-70pages.xml.bz2")
    assert len(real) >= 2000
    return real + SYNTHETIC


@pytest.mark.parametrize("lower_case", [True, False])
def test_ids_equal_transformers_python_bert_tokenizer(sentences, uncased_vocab, lower_case):
    from transformers.models.bert import BertTokenizerLegacy  # the pure-Python BertTokenizer

    reference = BertTokenizerLegacy(vocab_file=str(uncased_vocab), do_lower_case=lower_case)
    tokenizer = load_tokenizer(uncased_vocab, lower_case)
    ours = [encoding.ids for encoding in tokenizer.encode_batch(sentences, add_special_tokens=False)]
    expected = [reference.encode(sentence, add_special_tokens=False) for sentence in sentences]
    mismatches = [(s, a, b) for s, a, b in zip(sentences, ours, expected) if a != b]
    assert not mismatches, mismatches[:3]
    # the word-cached encoder gives the same ids, sentence by sentence
    ids, lengths, _ = SentenceEncoder(tokenizer).encode(sentences)
    assert lengths.tolist() == [len(e) for e in expected]
    assert ids.tolist() == [token for e in expected for token in e]
    # the pair template is BERT's
    pair = tokenizer.encode("first part", "second part")
    assert pair.tokens[0] == "[CLS]" and pair.tokens.count("[SEP]") == 2 and pair.type_ids[-1] == 1


def test_sentence_encoder_cache_survives_clearing(uncased_vocab):
    tokenizer = load_tokenizer(uncased_vocab)
    encoder = SentenceEncoder(tokenizer, max_cached_chunks=3)
    batch = ["the cat sat on the mat", "a dog, a frog.", ""]
    for _ in range(3):
        ids, lengths, _ = encoder.encode(batch)
        expected = [tokenizer.encode(s, add_special_tokens=False).ids for s in batch]
        assert ids.tolist() == sum(expected, []) and lengths.tolist() == [len(e) for e in expected]


def test_sentence_encoder_on_random_strings_of_awkward_characters(uncased_vocab):
    # whitespace BERT and Python disagree on, deleted controls (\x00 is also the encoder's own
    # separator), combining marks, CJK, punctuation, a word over 100 characters
    alphabet = ["a", "Bé", "un", "##", " ", "  ", "\t", "\n", "\x00", "\x0b", "\x0c", "\x1c", "\x1f",
                "\x85", "\xa0", "\u2028", "\u3000", "\u200b", "\u0301", ",", "東京", "\x07", "\ufffd",
                "😀", "x" * 101]  # fmt: skip
    rng = np.random.default_rng(0)
    tokenizer = load_tokenizer(uncased_vocab)
    encoder = SentenceEncoder(tokenizer)
    for _ in range(3):  # a cold cache, then a warm one
        batch = ["".join(rng.choice(alphabet, size=rng.integers(0, 12))) for _ in range(300)]
        ids, lengths, _ = encoder.encode(batch)
        expected = [tokenizer.encode(s, add_special_tokens=False).ids for s in batch]
        assert lengths.tolist() == [len(e) for e in expected]
        assert ids.tolist() == [token for e in expected for token in e]
    ids, lengths, _ = encoder.encode([])
    assert ids.shape == lengths.shape == (0,)
