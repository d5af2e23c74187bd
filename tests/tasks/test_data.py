"""SWAG and GLUE files read as published (quirks included), task inputs built as run_classifier.py
and run_swag.py build them, and bad files refused with one line naming the file and line."""

import re
from pathlib import Path

import numpy as np
import pytest

from bert.errors import UserError
from bert.tasks.catalogue import TASKS
from bert.tasks.data import find_split_files, read_split, with_source_files
from bert.tasks.features import make_features, truncate_pair
from bert.text.tokenization import load_tokenizer
from tests.support.shard_fixtures import write_vocab

SWAG_HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
MNLI_TRAIN = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)
MNLI_DEV = MNLI_TRAIN.replace("label1\tgold_label", "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")


def write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding=encoding)
    return path


def test_swag_choices_are_sent2_then_each_ending(tmp_path):
    path = write(
        tmp_path,
        "val.csv",
        SWAG_HEADER + "\n"
        '0,anetv_x,5,"Ann rode, fast. She",Ann rode fast.,She,gold,waved.,"sang, loud.",ate.,slept.,1\n'
        "1,anetv_y,6,Bo ran. ,Bo ran.,,gen,fell.,won.,lost.,hid.,3\n",
    )
    examples = read_split(TASKS["swag"], path)
    assert examples.first == ["Ann rode fast.", "Bo ran."]
    assert examples.second[0] == ("She waved.", "She sang, loud.", "She ate.", "She slept.")
    assert examples.second[1] == ("fell.", "won.", "lost.", "hid.")  # an empty sent2
    assert examples.labels.tolist() == [1, 3] and examples.rows == [2, 3]


def test_glue_quirks(tmp_path, caplog):
    cola = read_split(
        TASKS["cola"],
        write(tmp_path, "cola.tsv", "gj04\t1\t\tThe dog barked.\ngj04\t0\t*\tDog the barked.\n"),
    )
    assert cola.first == ["The dog barked.", "Dog the barked."] and cola.labels.tolist() == [1, 0]
    assert cola.rows == [1, 2]  # no header line

    mrpc_text = '\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA "quoted" one.\tThe same.\n'
    mrpc = read_split(TASKS["mrpc"], write(tmp_path, "mrpc.tsv", mrpc_text))
    assert mrpc.first == ['A "quoted" one.'] and mrpc.second == [("The same.",)]  # no CSV quoting

    stsb_header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    stsb = read_split(
        TASKS["stsb"],
        write(tmp_path, "stsb.tsv", stsb_header + "0\tg\tf\t2012\t1\tnone\tnone\tA.\tB.\t3.800\n"),
    )
    assert stsb.labels.dtype == np.float32 and stsb.labels.tolist() == [pytest.approx(3.8)]

    qqp_header = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
    qqp = read_split(
        TASKS["qqp"],
        write(
            tmp_path, "qqp.tsv", qqp_header + "1\t1\t2\tWhy?\tHow?\t0\n2\t3\t4\tWhat\n3\t5\t6\tA?\tA?\t1\n"
        ),
    )
    assert qqp.labels.tolist() == [0, 1] and qqp.rows == [2, 4]
    assert "skipped 1 rows" in caplog.text

    train = read_split(
        TASKS["mnli"],
        write(
            tmp_path,
            "train.tsv",
            MNLI_TRAIN + "\n" + "\t".join(["0"] * 8 + ["P.", "H.", "neutral", "neutral"]) + "\n",
        ),
    )
    dev = read_split(
        TASKS["mnli"],
        write(
            tmp_path,
            "dev_matched.tsv",
            MNLI_DEV + "\n" + "\t".join(["0"] * 8 + ["P.", "H."] + ["entailment"] * 6) + "\n",
        ),
    )
    assert train.labels.tolist() == [2] and dev.labels.tolist() == [1]  # contradiction, entailment, neutral
    assert TASKS["mnli"].dev_splits == ["dev_matched", "dev_mismatched"]


@pytest.mark.parametrize(
    "task, text, message",
    [
        ("rte", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tmaybe\n", "line 2: label 'maybe' is not one of RTE's labels (entailment, not_entailment)"),
        ("rte", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\n", "line 2 has 3 fields, the header 4"),
        ("rte", "index\tsentence1\tsentence2\tlabel\n0\t\tB.\tentailment\n", "line 2: column 'sentence1' is empty"),
        ("rte", "index\tquestion\tsentence\tlabel\n0\tA?\tB.\tentailment\n", "no column 'sentence1' in its header (index, question, sentence, label); this is not RTE's"),
        ("stsb", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n0\tg\tf\ty\t1\tn\tn\tA.\tB.\t5.5\n", "line 2: score '5.5' is not a number in [0, 5]"),
        ("cola", "gj04\t1\tThe dog barked.\n", "line 1 has 3 fields, the header 4"),
        ("qqp", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\tA?\tB?\t0\textra\n", "line 2 has 7 fields"),
        ("swag", SWAG_HEADER + "\n0,v,1,s,A.,B,gold,a,b,c,d,4\n", "line 2: label '4' is not one of SWAG's labels"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_file_and_line(tmp_path, task, text, message):
    path = write(tmp_path, "split.tsv", text)
    with pytest.raises(UserError) as error:
        read_split(TASKS[task], path)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_split_files_are_found_in_a_download_folder(tmp_path):
    (tmp_path / "MNLI").mkdir()
    for name in ("train.tsv", "dev_matched.tsv", "dev_mismatched.tsv", "test_matched.tsv"):
        (tmp_path / "MNLI" / name).write_text("")
    found = find_split_files(TASKS["mnli"], tmp_path)
    assert {split: path.name for split, path in found.items()} == TASKS["mnli"].splits
    with pytest.raises(UserError, match="no dev.tsv among the downloaded files for RTE"):
        find_split_files(TASKS["rte"], tmp_path)


def test_split_files_may_have_other_names(tmp_path):
    """A re-split names its files as it likes (tasks.<task>.splits): found by those names."""
    for name in ("train-80.tsv", "held-out.tsv"):
        (tmp_path / name).write_text("")
    renamed = with_source_files(
        TASKS["rte"], {"dev": "held-out.tsv", "train": "train-80.tsv"}, "tasks.rte.splits"
    )
    assert renamed.splits == {"train": "train-80.tsv", "dev": "held-out.tsv"}  # the task's order
    assert {split: path.name for split, path in find_split_files(renamed, tmp_path).items()} == renamed.splits
    for files, message in [
        ({"train": "train.tsv"}, "tasks.rte.splits names the splits train; RTE has train, dev: give each"),
        (
            {"train": "a/train.tsv", "dev": "dev.tsv"},
            "tasks.rte.splits.train is 'a/train.tsv'; give a file name",
        ),
        ({"train": "x.tsv", "dev": "x.tsv"}, "tasks.rte.splits names one file for two splits"),
    ]:
        with pytest.raises(UserError, match=re.escape(message)):
            with_source_files(TASKS["rte"], files, "tasks.rte.splits")


def test_truncation_cuts_the_longer_text_from_its_end():
    assert truncate_pair([1, 2, 3, 4, 5], [6, 7], 5) == ([1, 2, 3], [6, 7], True)
    assert truncate_pair([1, 2], [3, 4], 3) == ([1, 2], [3], True)  # a tie: the second loses one
    assert truncate_pair([1], [2], 5) == ([1], [2], False)


def test_features_match_the_reference_layout(tmp_path):
    tokenizer = load_tokenizer(write_vocab(tmp_path / "vocab.txt"))
    pair = read_split(
        TASKS["rte"],
        write(tmp_path, "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\tw1 w2 w3\tw4 w5\tentailment\n"),
    )
    features = make_features(pair, tokenizer, max_seq_length=8, multiple_choice=False, progress=False)
    cls_, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    expected = [cls_, *tokenizer.encode("w1 w2 w3", add_special_tokens=False).ids, sep]
    expected += [*tokenizer.encode("w4 w5", add_special_tokens=False).ids, sep]
    assert features.input_ids.shape == (1, 8)
    assert features.input_ids[0, : len(expected)].tolist() == expected
    assert features.token_type_ids[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert features.attention_mask[0].sum() == len(expected) == 8 and features.truncated == 0

    swag = read_split(
        TASKS["swag"],
        write(tmp_path, "val.csv", SWAG_HEADER + "\n0,v,1,s,w1 w2,w3,gold,w4,w5,w6 w7 w8,w9,2\n"),
    )
    choices = make_features(swag, tokenizer, max_seq_length=8, multiple_choice=True, progress=False)
    assert choices.input_ids.shape == (1, 4, 8) and choices.labels.tolist() == [2]
    assert choices.truncated == 1  # "w3 w6 w7 w8" does not fit beside "w1 w2" in 8
    assert choices.attention_mask[0].sum(-1).tolist() == [7, 7, 8, 7]
