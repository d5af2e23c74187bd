"""SQuAD loading, windowed features and post-processing (bert/squad/dataset.py, features.py, answers.py)."""

import bz2
import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from bert.errors import UserError
from bert.squad.answers import postprocess
from bert.squad.dataset import Answer, SquadExample, dataset_version, load_examples
from bert.squad.features import make_features, window_starts
from bert.text.tokenization import load_tokenizer

# Contexts with the text SQuAD really has: accents (precomposed and decomposed), curly quotes,
# dashes, non-breaking spaces, tabs, newlines, double spaces, zero-width spaces, CJK.
CONTEXTS = [
    "Zoë Saldaña's café in São Paulo opened in 1998; “Le Petit Café” was its name, and it’s still there.",
    "Beyoncé Giselle Knowles-Carter (born September 4, 1981) is an American singer,  songwriter\tand actress.",
    "The Normans (Norman: Nourmands; French: Normands) gave their name to Normandy,\na region in France.",
    "Nikola\u00a0Tesla (10 July 1856 – 7 January 1943) was a Serbian-American inventor. He died in New\u00a0York.",
    "Cafe\u0301 owners in Mu\u0308nchen\u200b said the Straße was busy; 東京 and ＡＢＣ are full-width.",
]


def make_example(qid, question, context, answer_text, occurrence=0, impossible=False):
    if impossible:
        return SquadExample(qid, "t", question, context, [], is_impossible=True)
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(answer_text, start + 1)
    return SquadExample(qid, "t", question, context, [Answer(answer_text, start)])


def word_spans(context, rng, count):
    """Answers on whitespace-word boundaries: 1-4 consecutive words of the context."""
    words = [m.span() for m in re.finditer(r"\S+", context)]
    spans = []
    for _ in range(count):
        first = rng.randrange(len(words))
        last = min(len(words) - 1, first + rng.randrange(4))
        spans.append((words[first][0], words[last][1]))
    return spans


def examples_with_every_word_answer():
    examples = []
    for c, context in enumerate(CONTEXTS):
        for w, (start, end) in enumerate(m.span() for m in re.finditer(r"\S+", context)):
            text = context[start:end]
            examples.append(
                SquadExample(f"c{c}w{w}", "t", "which word is it?", context, [Answer(text, start)])
            )
    return examples


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return load_tokenizer(uncased_vocab, lower_case=True)


def perfect_logits(features):
    """One-hot logits at each window's training targets ([CLS] where the window has no answer)."""
    start = np.zeros(features.input_ids.shape, dtype=np.float32)
    end = np.zeros(features.input_ids.shape, dtype=np.float32)
    rows = np.arange(len(features))
    start[rows, features.start_positions] = 10.0
    end[rows, features.end_positions] = 10.0
    return start, end


def decode(features, f, context):
    s, e = features.start_positions[f], features.end_positions[f]
    return context[features.offsets[f, s, 0] : features.offsets[f, e, 1]]


# ----------------------------------------------------------------------------------------------
# Loading


def squad_json(version, qas, context="Paris is the capital of France."):
    return {"version": version, "data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]}


def write(tmp_path, obj, name="data.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def test_load_v1_and_v2(tmp_path):
    v1 = write(
        tmp_path,
        squad_json(
            "1.1",
            [
                {
                    "id": "q1",
                    "question": "Capital?",
                    "answers": [{"text": "Paris", "answer_start": 0}, {"text": "France", "answer_start": 24}],
                },
            ],
        ),
        "v1.json",
    )
    v2 = write(
        tmp_path,
        squad_json(
            "v2.0",
            [
                {
                    "id": "q1",
                    "question": "Capital?",
                    "answers": [{"text": "Paris", "answer_start": 0}],
                    "is_impossible": False,
                },
                {
                    "id": "q2",
                    "question": "Capital of Spain?",
                    "answers": [],
                    "is_impossible": True,
                    "plausible_answers": [{"text": "Paris", "answer_start": 0}],
                },
            ],
        ),
        "v2.json",
    )
    examples = load_examples(v1)
    assert dataset_version(v1) == "v1.1" and dataset_version(v2) == "v2.0"
    assert [(e.qid, e.title, e.question) for e in examples] == [("q1", "T", "Capital?")]
    assert examples[0].answers == [Answer("Paris", 0), Answer("France", 24)]
    assert examples[0].context == "Paris is the capital of France." and not examples[0].is_impossible
    second = load_examples(v2)[1]
    assert second.is_impossible and second.answers == [] and second.plausible_answers == [Answer("Paris", 0)]


def test_version_without_version_field():
    data = squad_json("", [{"id": "q", "question": "?", "answers": [], "is_impossible": True}])
    del data["version"]
    assert dataset_version(data) == "v2.0"
    data["data"][0]["paragraphs"][0]["qas"][0].pop("is_impossible")
    assert dataset_version(data) == "v1.1"


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON at line 1, column 2"),
        ({"version": "1.1"}, "no top-level 'data' list"),
        (squad_json("1.1", [{"id": "q7", "answers": []}]), "question q7: missing key 'question'"),
        (squad_json("1.1", [{"id": "q8", "question": "?"}]), "question q8: missing key 'answers'"),
        (
            squad_json(
                "1.1", [{"id": "q9", "question": "?", "answers": [{"text": "Paris", "answer_start": 3}]}]
            ),
            "question q9: answer 'Paris' is not at answer_start 3",
        ),
        (squad_json("1.1", [{"id": "q10", "question": "?", "answers": []}]), "question q10: no answers"),
        (
            squad_json(
                "1.1", [{"id": "q", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]}] * 2
            ),
            "question id 'q' occurs twice",
        ),
    ],
)
def test_bad_files_name_the_file_and_question(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(UserError, match=re.escape(message)) as error:
        load_examples(path)
    assert str(path) in str(error.value)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="nope.json: not found"):
        load_examples(tmp_path / "nope.json")


# ----------------------------------------------------------------------------------------------
# Features


def test_window_starts():
    assert window_starts(10, 20, 5) == [0]
    assert window_starts(20, 20, 5) == [0]
    assert window_starts(21, 20, 5) == [0, 5]
    assert window_starts(100, 20, 30) == [0, 20, 40, 60, 80]  # stride capped at the window: no token skipped


def test_offsets_are_exact_for_every_context_token(tokenizer):
    """Each context token's span in the original text normalises to the token itself (lower-cased,
    accents stripped), so offsets point into the original string, not the normalised one."""
    examples = [make_example(f"q{i}", "what?", c, c.split()[0]) for i, c in enumerate(CONTEXTS)]
    features = make_features(
        examples, tokenizer, doc_stride=128, max_seq_length=256, max_query_length=16, progress=False
    )
    checked = 0
    for f in range(len(features)):
        context = examples[features.example_index[f]].context
        for i in np.flatnonzero(features.offsets[f, :, 0] >= 0):
            token = tokenizer.id_to_token(int(features.input_ids[f, i]))
            start, end = features.offsets[f, i]
            piece = tokenizer.normalizer.normalize_str(context[start:end]).strip()  # CJK gets spaces
            if token != "[UNK]":
                assert piece == token.removeprefix("##"), (context[start:end], token)
            checked += 1
    assert checked > 100


def test_word_offsets_span_the_pieces_of_each_word(tokenizer):
    """A token's word span holds the token; consecutive tokens share it exactly when the second
    is a ## piece; it holds no whitespace; outside the context it is (-1, -1) like the offsets."""
    examples = [make_example(f"q{i}", "what?", c, c.split()[0]) for i, c in enumerate(CONTEXTS)]
    features = make_features(
        examples, tokenizer, doc_stride=128, max_seq_length=256, max_query_length=16, progress=False
    )
    for f in range(len(features)):
        context = examples[features.example_index[f]].context
        positions = np.flatnonzero(features.offsets[f, :, 0] >= 0)
        assert (features.word_offsets[f, features.offsets[f, :, 0] < 0] == -1).all()
        for i in positions:
            (start, end), (word_start, word_end) = features.offsets[f, i], features.word_offsets[f, i]
            assert word_start <= start < end <= word_end and not any(
                c.isspace() for c in context[word_start:word_end]
            )
        for i, j in zip(positions[:-1], positions[1:]):
            piece = tokenizer.id_to_token(int(features.input_ids[f, j])).startswith("##")
            assert piece == (features.word_offsets[f, i] == features.word_offsets[f, j]).all()


def test_layout_of_a_feature(tokenizer):
    example = make_example("q", "Where is the café?", CONTEXTS[0], "São Paulo")
    features = make_features(
        [example], tokenizer, doc_stride=128, max_seq_length=64, max_query_length=4, progress=False
    )
    ids = features.input_ids[0]
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    question = tokenizer.encode("Where is the café?", add_special_tokens=False).ids[:4]
    assert ids[0] == cls_id and list(ids[1:5]) == question and ids[5] == sep_id
    length = int(features.attention_mask[0].sum())
    assert ids[length - 1] == sep_id and (ids[length:] == tokenizer.token_to_id("[PAD]")).all()
    assert (features.token_type_ids[0, :6] == 0).all() and (features.token_type_ids[0, 6:length] == 1).all()
    assert (features.token_type_ids[0, length:] == 0).all()
    assert (features.offsets[0, :6] == -1).all() and (features.offsets[0, length - 1 :] == -1).all()
    assert (features.offsets[0, 6 : length - 1] >= 0).all()
    assert features.input_ids.dtype == np.int32 and features.attention_mask.dtype == np.int8
    assert features.token_type_ids.dtype == np.int8 and features.offsets.shape == (1, 64, 2)
    assert decode(features, 0, CONTEXTS[0]) == "São Paulo"


def test_training_positions_round_trip_for_every_word(tokenizer):
    """Every whitespace word of every context as an answer, in short windows: the positions
    decode back through the offsets to exactly the answer text, in every window that holds it."""
    examples = examples_with_every_word_answer()
    features = make_features(
        examples, tokenizer, max_seq_length=32, doc_stride=7, max_query_length=8, progress=False
    )
    answered = set()
    for f in range(len(features)):
        example = examples[features.example_index[f]]
        if features.start_positions[f] > 0:
            assert decode(features, f, example.context) == example.answers[0].text
            answered.add(example.qid)
        else:
            assert features.end_positions[f] == 0
    assert answered == {e.qid for e in examples}
    assert len(features) > len(examples)  # questions with several windows


def test_answer_split_across_windows_points_at_cls_where_incomplete(tokenizer):
    context = (
        " ".join(f"w{i}" for i in range(60))
        + " the Grand Duchy of Luxembourg "
        + " ".join(f"v{i}" for i in range(60))
    )
    example = make_example("q", "which state?", context, "the Grand Duchy of Luxembourg")
    features = make_features(
        [example], tokenizer, max_seq_length=40, doc_stride=10, max_query_length=8, progress=False
    )
    partial = full = 0
    answer = example.answers[0]
    for f in range(len(features)):
        spans = features.offsets[f][features.offsets[f, :, 0] >= 0]
        first_char, last_char = spans[:, 0].min(), spans[:, 1].max()
        if first_char <= answer.start and answer.end <= last_char:
            full += 1
            assert decode(features, f, context) == answer.text
        else:
            partial += first_char < answer.end and answer.start < last_char
            assert features.start_positions[f] == 0 and features.end_positions[f] == 0
    assert full >= 1 and partial >= 1


def test_answers_at_the_very_start_and_end_and_impossible(tokenizer):
    context = CONTEXTS[3]
    examples = [
        make_example("first", "who?", context, "Nikola"),
        make_example("last", "where?", context, "New\u00a0York."),
        make_example("none", "why?", context, None, impossible=True),
    ]
    features = make_features(
        examples, tokenizer, max_seq_length=24, doc_stride=5, max_query_length=4, progress=False
    )
    by_qid = {
        e.qid: [f for f in range(len(features)) if features.example_index[f] == i]
        for i, e in enumerate(examples)
    }
    assert decode(features, by_qid["first"][0], context) == "Nikola"
    assert decode(features, by_qid["last"][-1], context) == "New\u00a0York."
    assert all(features.start_positions[f] == 0 == features.end_positions[f] for f in by_qid["none"])


def test_question_truncated_to_max_query_length(tokenizer):
    question = "what " * 50 + "?"
    features = make_features(
        [make_example("q", question, CONTEXTS[1], "American")],
        tokenizer,
        doc_stride=128,
        max_seq_length=64,
        max_query_length=10,
        progress=False,
    )
    assert int((features.token_type_ids[0] == 0).sum() - (features.attention_mask[0] == 0).sum()) == 12
    with pytest.raises(ValueError, match="max_seq_length"):
        make_features([], tokenizer, doc_stride=128, max_seq_length=20, max_query_length=17)


def test_each_context_token_has_exactly_one_max_context_window(tokenizer):
    examples = examples_with_every_word_answer()[:40]
    features = make_features(
        examples, tokenizer, max_seq_length=30, doc_stride=6, max_query_length=6, progress=False
    )
    for i in range(len(examples)):
        windows = np.flatnonzero(features.example_index == i)
        counts = {}
        for f in windows:
            for pos in np.flatnonzero(features.offsets[f, :, 0] >= 0):
                key = tuple(features.offsets[f, pos])
                counts[key] = counts.get(key, 0) + int(features.token_is_max_context[f, pos])
        assert set(counts.values()) == {1}


def test_real_wikipedia_text_round_trip(tokenizer, shared_data):
    """Raw wikitext of real pages (markup, templates, entities, every script the sample has):
    random word-boundary answers decode back exactly, and perfect logits predict them."""
    with bz2.open(shared_data / "enwiki-sample-70pages.xml.bz2") as file:
        texts = [el.text or "" for el in ET.parse(file).iter() if el.tag.endswith("}text")]
    paragraphs = [p for text in texts for p in text.split("\n\n") if 200 < len(p) < 3000]
    rng = random.Random(0)
    examples = []
    for p, paragraph in enumerate(rng.sample(paragraphs, 60)):
        for a, (start, end) in enumerate(word_spans(paragraph, rng, 3)):
            if end - start > 60:  # longer than a window can hold (URLs in templates)
                continue
            examples.append(
                SquadExample(
                    f"p{p}a{a}", "t", "what is it?", paragraph, [Answer(paragraph[start:end], start)]
                )
            )
    features = make_features(
        examples, tokenizer, max_seq_length=128, doc_stride=48, max_query_length=16, progress=False
    )
    for f in np.flatnonzero(features.start_positions > 0):
        example = examples[features.example_index[f]]
        assert decode(features, f, example.context) == example.answers[0].text
    assert len({int(i) for i in features.example_index[features.start_positions > 0]}) == len(examples)
    predictions, _, _ = postprocess(examples, features, *perfect_logits(features), max_answer_length=64)
    assert predictions == {e.qid: e.answers[0].text for e in examples}


# ----------------------------------------------------------------------------------------------
# Post-processing


def test_perfect_logits_recover_every_answer(tokenizer):
    examples = examples_with_every_word_answer()
    features = make_features(
        examples, tokenizer, max_seq_length=32, doc_stride=7, max_query_length=8, progress=False
    )
    predictions, nbest, null_odds = postprocess(
        examples, features, *perfect_logits(features), n_best_size=5, max_answer_length=30
    )
    assert predictions == {e.qid: e.answers[0].text for e in examples}
    assert null_odds == {}
    for e in examples:
        assert nbest[e.qid][0]["text"] == e.answers[0].text
        assert abs(sum(entry["probability"] for entry in nbest[e.qid]) - 1) < 1e-6
        assert all(entry["text"] in e.context for entry in nbest[e.qid])
        assert nbest[e.qid][0]["start_logit"] == 10.0 and nbest[e.qid][0]["end_logit"] == 10.0


def test_answer_spanning_a_window_boundary_is_recovered(tokenizer):
    """The answer straddles the boundary of the first window; the window that contains it wins."""
    context = (
        " ".join(f"w{i}" for i in range(18))
        + " Zoë Saldaña’s “café” in São Paulo "
        + " ".join(f"v{i}" for i in range(40))
    )
    example = make_example("q", "where?", context, "Zoë Saldaña’s “café” in São Paulo")
    features = make_features(
        [example], tokenizer, max_seq_length=48, doc_stride=20, max_query_length=4, progress=False
    )
    holding = np.flatnonzero(features.start_positions > 0)
    assert len(features) >= 3 and 0 not in holding  # window 0 holds only the start of the answer
    first_window_last_char = features.offsets[0, features.offsets[0, :, 0] >= 0, 1].max()
    assert example.answers[0].start < first_window_last_char < example.answers[0].end
    predictions, _, _ = postprocess([example], features, *perfect_logits(features))
    assert predictions == {"q": "Zoë Saldaña’s “café” in São Paulo"}


def test_non_ascii_and_edge_answers_with_perfect_logits(tokenizer):
    examples = [
        make_example("zoe", "who?", CONTEXTS[0], "Zoë Saldaña's café"),
        make_example("quote", "name?", CONTEXTS[0], "“Le Petit Café”"),
        make_example("its", "still?", CONTEXTS[0], "it’s still there."),
        make_example("muenchen", "where?", CONTEXTS[4], "Cafe\u0301 owners in Mu\u0308nchen\u200b"),
        make_example("tokyo", "city?", CONTEXTS[4], "東京"),
        make_example("tab", "what?", CONTEXTS[1], "songwriter\tand actress."),
        make_example("newline", "where?", CONTEXTS[2], "Normandy,\na region"),
        make_example("nbsp", "who?", CONTEXTS[3], "Nikola\u00a0Tesla"),
    ]
    features = make_features(
        examples, tokenizer, max_seq_length=40, doc_stride=9, max_query_length=4, progress=False
    )
    predictions, _, _ = postprocess(examples, features, *perfect_logits(features))
    assert predictions == {e.qid: e.answers[0].text for e in examples}


def test_v2_perfect_null_logits_predict_empty(tokenizer):
    examples = [
        make_example("answerable", "where?", CONTEXTS[0], "São Paulo"),
        make_example("impossible", "why?", CONTEXTS[0], None, impossible=True),
    ]
    features = make_features(
        examples, tokenizer, max_seq_length=24, doc_stride=6, max_query_length=4, progress=False
    )
    predictions, nbest, null_odds = postprocess(examples, features, *perfect_logits(features), version_2=True)
    assert predictions == {"answerable": "São Paulo", "impossible": ""}
    # null score: min over windows of start[CLS] + end[CLS] = 0 (the window holding the answer).
    assert null_odds["answerable"] == pytest.approx(0.0 - 20.0)
    assert null_odds["impossible"] == pytest.approx(20.0 - 0.0)
    assert nbest["impossible"][0]["text"] == ""
    assert "" in [entry["text"] for entry in nbest["answerable"]]  # the null answer is always listed
    # A threshold above the score difference answers anyway.
    predictions, _, _ = postprocess(
        examples, features, *perfect_logits(features), version_2=True, null_score_diff_threshold=25.0
    )
    assert predictions["impossible"] != ""


def test_postprocess_respects_max_answer_length_and_order(tokenizer):
    context = "alpha beta gamma delta epsilon"
    example = make_example("q", "?", context, "alpha")
    features = make_features(
        [example], tokenizer, doc_stride=128, max_seq_length=32, max_query_length=4, progress=False
    )
    start = np.zeros((1, 32), dtype=np.float32)
    end = np.zeros((1, 32), dtype=np.float32)
    first = int(np.flatnonzero(features.offsets[0, :, 0] >= 0)[0])  # "alpha"
    start[0, first], end[0, first + 4] = 5.0, 5.0  # best pair spans 5 tokens
    end[0, first + 1] = 4.0  # an end before the best start
    end[0, first + 3] = 1.0
    end[0, first - 1] = 100.0  # a question token: never an end
    start[0, first + 2] = 100.0  # a start after every good end ... only "gamma" itself can pair with it
    predictions, nbest, _ = postprocess([example], features, start, end, max_answer_length=5)
    assert predictions["q"] == "gamma delta epsilon"  # 100 + 5
    predictions, nbest, _ = postprocess([example], features, start, end, max_answer_length=2)
    assert predictions["q"] == "gamma delta"  # 100 + 1 beats 5 + 4 and 100 + 0
    assert [e["text"] for e in nbest["q"][:2]] == ["gamma delta", "gamma"]


def test_no_valid_span_predicts_empty(tokenizer):
    example = make_example("q", "?", "alpha beta gamma", "alpha")
    features = make_features(
        [example], tokenizer, doc_stride=128, max_seq_length=16, max_query_length=4, progress=False
    )
    context = np.flatnonzero(features.offsets[0, :, 0] >= 0)
    start = np.zeros((1, 16), dtype=np.float32)
    end = np.zeros((1, 16), dtype=np.float32)
    start[0, context[-1]], end[0, context[0]] = 3.0, 3.0  # the only start candidate comes after the only end
    predictions, nbest, null_odds = postprocess([example], features, start, end, n_best_size=1)
    assert predictions == {"q": ""} and nbest["q"] == [
        {"text": "", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}
    ]
    predictions, _, null_odds = postprocess([example], features, start, end, n_best_size=1, version_2=True)
    assert predictions == {"q": ""} and null_odds == {"q": 0.0}


# ----------------------------------------------------------------------------------------------
# Answers on word boundaries: a predicted span is widened to the whole words of its first and last
# token (the tokenizer's pre-tokenized words: punctuation marks and CJK characters are words of
# their own), so an answer never ends inside a word.


def answer_for_pieces(tokenizer, context, pieces):
    """The answer postprocess gives when the model points at the first run of context tokens
    whose WordPiece strings are `pieces` (so each case also shows how the vocab splits it)."""
    example = SquadExample("q", "t", "which?", context, [])
    features = make_features(
        [example], tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64, progress=False
    )
    assert len(features) == 1
    tokens = [tokenizer.id_to_token(int(i)) for i in features.input_ids[0]]
    positions = np.flatnonzero(features.offsets[0, :, 0] >= 0)
    first = next(p for p in positions if tokens[p : p + len(pieces)] == pieces)
    start = np.zeros(features.input_ids.shape, dtype=np.float32)
    end = np.zeros(features.input_ids.shape, dtype=np.float32)
    start[0, first], end[0, first + len(pieces) - 1] = 10.0, 10.0
    predictions, _, _ = postprocess([example], features, start, end)
    return predictions["q"]


@pytest.mark.parametrize(
    "context, pieces, answer",
    [
        # the issue-20 bug: "Crusoe" is cr ##uso ##e; a span ending on ##uso answered "Cruso"
        ("Robinson Crusoe, by Defoe.", ["robinson", "cr", "##uso"], "Robinson Crusoe"),
        ("Robinson Crusoe, by Defoe.", ["##uso"], "Crusoe"),  # starting and ending inside the word
        ("Robinson Crusoe, by Defoe.", ["##e", ","], "Crusoe,"),  # a start inside a word goes back to it
        ("Robinson Crusoe, by Defoe.", ["def"], "Defoe"),  # the full stop is a word of its own
        ("Abraham Lincoln, the 16th president", ["abraham", "lincoln"], "Abraham Lincoln"),  # no ","
        # the offsets point into the original text: case and accents stay as written
        ("ZOË Saldaña's café", ["zoe", "sal"], "ZOË Saldaña"),
        ("ZOË Saldaña's café", ["##dana", "'"], "Saldaña'"),
        ("Cafe\u0301 owners", ["cafe"], "Cafe\u0301"),  # a decomposed accent stays with its word
        ("東京大学で", ["京", "大"], "京大"),  # CJK characters are words of their own
        # a hyphen is punctuation to BERT's tokenizer (and a boundary in run_squad.py too):
        # parts of a hyphenated word stay as predicted
        ("a state-of-the-art model", ["state", "-", "of", "-", "the"], "state-of-the"),
        ("a state-of-the-art model", ["art"], "art"),
        # so are the comma and point inside numbers; digits split into pieces are one word
        ("21,280 people", ["21"], "21"),
        ("21,280 people", ["21", ",", "280"], "21,280"),
        ("pi is 3.14159", ["3", ".", "141"], "3.14159"),
    ],
)
def test_answers_are_widened_to_whole_words(tokenizer, context, pieces, answer):
    assert answer_for_pieces(tokenizer, context, pieces) == answer


def test_a_word_split_across_windows_is_answered_whole(tokenizer):
    """The first window ends on ##uso, the next starts with ##e: the word's span comes from the
    whole context, so the first window's span still answers "Crusoe"."""
    example = SquadExample("q", "t", "which?", "a b c d e f g Robinson Crusoe", [])
    features = make_features(
        [example], tokenizer, max_seq_length=15, doc_stride=10, max_query_length=4, progress=False
    )
    tokens = [tokenizer.id_to_token(int(i)) for i in features.input_ids[0]]
    assert len(features) == 2 and tokens[-3:] == ["cr", "##uso", "[SEP]"]
    start = np.zeros(features.input_ids.shape, dtype=np.float32)
    end = np.zeros(features.input_ids.shape, dtype=np.float32)
    start[0, tokens.index("robinson")], end[0, tokens.index("##uso")] = 10.0, 10.0
    predictions, _, _ = postprocess([example], features, start, end)
    assert predictions == {"q": "Robinson Crusoe"}


def test_spans_widened_to_the_same_words_are_one_nbest_entry():
    """Hand-made offsets: "Robinson Crusoe, 1719." as [CLS] robinson cr ##uso ##e , 1719 . [SEP].
    The ends ##uso and ##e both give "Robinson Crusoe": listed once, with the better score (the
    3 best ends are ##uso, ##e and ",")."""
    from bert.squad.features import SquadFeatures

    context = "Robinson Crusoe, 1719."
    offsets = [(-1, -1), (0, 8), (9, 11), (11, 14), (14, 15), (15, 16), (17, 21), (21, 22), (-1, -1)]
    word_offsets = [(-1, -1), (0, 8), (9, 15), (9, 15), (9, 15), (15, 16), (17, 21), (21, 22), (-1, -1)]
    seq = len(offsets)
    ones = np.ones((1, seq), dtype=np.int8)
    features = SquadFeatures(
        input_ids=np.arange(seq, dtype=np.int32)[None],
        token_type_ids=ones,
        attention_mask=ones,
        start_positions=np.zeros(1, dtype=np.int32),
        end_positions=np.zeros(1, dtype=np.int32),
        example_index=np.zeros(1, dtype=np.int32),
        offsets=np.array([offsets], dtype=np.int32),
        word_offsets=np.array([word_offsets], dtype=np.int32),
        token_is_max_context=np.array([[o >= 0 for o, _ in offsets]]),
    )
    start = np.array([[0, 5, 0, 0, 0, 0, 0, 0, 0]], dtype=np.float32)
    end = np.array([[0, 0, 0, 4, 3, 1, 0, 0, 0]], dtype=np.float32)
    example = SquadExample("q", "t", "who?", context, [])
    predictions, nbest, _ = postprocess([example], features, start, end, n_best_size=3)
    assert predictions == {"q": "Robinson Crusoe"}
    assert [(e["text"], e["end_logit"]) for e in nbest["q"]] == [
        ("Robinson Crusoe", 4.0),
        ("Robinson Crusoe,", 1.0),
        ("Crusoe", 4.0),  # cr ##uso; cr ##uso ##e and ##uso ##e are the same words
    ]


def test_gold_answers_survive_the_widening_to_words(tokenizer):
    """Every gold answer of the sample world's v1.1 dev set as the token span that covers it:
    post-processing it gives the gold text at least as often as the token offsets alone would
    (the old cut). A gold answer ending inside a word would be lost by the widening."""
    examples = load_examples(Path(__file__).resolve().parents[2] / "data/sample/squad/v1.1/dev-v1.1.json")
    features = make_features(
        examples, tokenizer, doc_stride=128, max_seq_length=1024, max_query_length=16, progress=False
    )
    assert len(features) == len(examples)  # one window per question
    by_token_offsets = by_postprocess = total = 0
    for k in range(max(len(e.answers) for e in examples)):
        start = np.zeros(features.input_ids.shape, dtype=np.float32)
        end = np.zeros(features.input_ids.shape, dtype=np.float32)
        gold = {}
        for f, example in enumerate(examples):
            answer = example.answers[min(k, len(example.answers) - 1)]
            tokens = np.flatnonzero(features.offsets[f, :, 0] >= 0)
            token_starts, token_ends = features.offsets[f, tokens, 0], features.offsets[f, tokens, 1]
            first = tokens[np.searchsorted(token_ends, answer.start, side="right")]
            last = tokens[np.searchsorted(token_starts, answer.end, side="left") - 1]
            start[f, first], end[f, last] = 10.0, 10.0
            gold[example.qid] = answer.text
            by_token_offsets += (
                example.context[features.offsets[f, first, 0] : features.offsets[f, last, 1]] == answer.text
            )
        predictions, _, _ = postprocess(examples, features, start, end)
        by_postprocess += sum(predictions[qid] == text for qid, text in gold.items())
        total += len(gold)
    assert total >= 1000 and by_postprocess >= by_token_offsets
