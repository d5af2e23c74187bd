"""ModernBERT through the stages as DVC runs them, at small size: model.size modernbert-tiny
pretrained MLM-only from random, fine-tuned on SQuAD, SWAG and STS-B and predicting; a
transformers-made ModernBERT folder (BPE tokenizer.json, no vocab.txt) fetched as a `weights`
entry, continued by the pretrain stage and read back by transformers' AutoModelForMaskedLM; and
the contradictory params as one line."""

import json
from pathlib import Path

import pytest
import torch

from bert.errors import UserError
from bert.model import family
from bert.model.presets import SIZES, family_and_positions
from bert.text.tokenization import load_tokenizer
from bert.text.vocab import prepare_vocab
from stages.common.params import load_params
from tests.squad.test_stages import SAMPLE, subset
from tests.support.shard_fixtures import write_shards
from tests.support.stage_workspace import run_stage, set_params, write_params, write_random_start

SEQ = 64  # longer than modernbert-tiny's 64-token window's reach (32 each side): its band is used
TASK_SOURCES = Path(__file__).resolve().parents[1] / "data/sample"
TASKS = {"swag": "ModernBertForMultipleChoice", "stsb": "ModernBertForSequenceClassification"}
TASK = {"max_seq_length": 48, "recipe": {"epochs": 1, "global_batch_size": 16, "micro_batch_size": 16}}
PHASE = {"max_steps": 3, "global_batch_size": 8, "micro_batch_size": 8, "learning_rate": 0.001}


def run(root: Path, *args: str) -> None:
    result = run_stage(root, *args)
    assert result.returncode == 0, f"{args} failed:\n{result.stderr[-3000:]}"


def test_modernbert_from_random_pretrains_then_fine_tunes_and_predicts_squad_swag_stsb(
    tmp_path, uncased_vocab
):
    root = tmp_path / "project"
    root.mkdir()
    write_params(root, {
        "model.size": "modernbert-tiny", "examples.next_sentence": False, "pretrain.phases": {"phase1": "random"},
        "examples.phase1": {"max_seq_length": SEQ, "max_predictions_per_seq": 10},
        **{f"pretrain.phase1.{key}": value for key, value in PHASE.items()},
        "pretrain.data_workers": 0, "finetune.init": "phase1",
        "squad.run": ["v1.1"], "squad.max_seq_length": SEQ, "squad.doc_stride": 32, "squad.max_query_length": 16,
        "squad.recipe": {"epochs": 1, "global_batch_size": 8, "micro_batch_size": 8}, "predict.batch_size": 16,
        "benchmark": {"batch_size": 2, "seq_length": 32, "warmup_steps": 0, "steps": 2, "dev_windows": 16,
                      "pretraining_batch_size": 2},
        "tasks.run": dict.fromkeys(TASKS, "finetune.init"),
        **{f"tasks.{task}.{key}": value for task in TASKS for key, value in TASK.items()},
        "tasks.swag.sources": [str(TASK_SOURCES / "swag")], "tasks.stsb.sources": [str(TASK_SOURCES / "glue/STS-B")],
    })  # fmt: skip
    (root / "data/vocab").mkdir(parents=True)
    (root / "data/vocab/vocab.txt").write_bytes(uncased_vocab.read_bytes())
    write_shards(root / "data/examples/phase1", sizes=(16, 8), seq_len=SEQ, max_pred=10, drawn_masks=True,
                 next_sentence=False)  # fmt: skip
    write_random_start(root)
    subset(SAMPLE / "v1.1/train-v1.1.json", root / "data/squad/train.json", articles=2)
    subset(SAMPLE / "v1.1/dev-v1.1.json", root / "data/squad/dev.json", articles=1)

    run(root, "stages.pretrain", "phase1")
    metrics = json.loads((root / "metrics/pretrain_phase1.json").read_text())
    assert metrics["steps"] == 3 and "nsp_loss" not in metrics and metrics["mlm_loss"] > 0
    assert json.loads((root / "data/weights/phase1/config.json").read_text())["model_type"] == "modernbert"
    run(root, "stages.finetune_squad")
    squad_model = family.from_pretrained(root / "data/models/squad", "question_answering")
    assert type(squad_model).__name__ == "ModernBertForQuestionAnswering"
    run(root, "stages.predict_squad")
    dev = json.loads((root / "data/squad/dev.json").read_text())
    questions = {qa["id"] for article in dev["data"] for p in article["paragraphs"] for qa in p["qas"]}
    assert set(json.loads((root / "data/predictions/predictions.json").read_text())) == questions
    run(root, "stages.benchmark")  # against transformers' ModernBertForQuestionAnswering and ...ForMaskedLM
    timed = json.loads((root / "metrics/benchmark.json").read_text())
    assert timed["inference_speedup_vs_transformers"] > 0
    pretraining = timed["pretraining"]["phase1"]  # our masked LM's step against transformers'
    assert pretraining["seq_length"] == SEQ
    assert pretraining["speedup_vs_transformers"] > 0 and 0 < pretraining["mfu"] < 1
    assert timed["dev_inference"]["max_start_logit_difference"] < 1e-4  # the same answers as transformers
    for task, head in TASKS.items():  # a multiple-choice and a regression head from the same encoder
        for stage in ("download_task", "finetune_task", "predict_task"):
            run(root, f"stages.{stage}", task)
        saved = json.loads((root / "data/models/tasks" / task / "config.json").read_text())
        assert saved["model_type"] == "modernbert" and saved["architectures"] == [head]
        assert (root / "data/task_predictions" / task / "dev.tsv").is_file()

    # What ModernBERT cannot do is one line naming the params, before any stage runs.
    for change, named in (
        ({"examples.next_sentence": True}, "examples.next_sentence is true, but model.size modernbert-tiny"),
        ({"squad.max_seq_length": 9000}, "squad.max_seq_length is 9000, longer than the 8192 positions"),
    ):
        set_params(root, change)
        with pytest.raises(UserError, match=named) as error:
            load_params(root / "params.yaml")
        assert "\n" not in str(error.value)
        set_params(root, {"examples.next_sentence": False, "squad.max_seq_length": SEQ})


def test_a_transformers_modernbert_folder_is_continued_and_read_back_by_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    root = tmp_path / "project"
    released = root / "released/tiny-modernbert"
    vocab = prepare_vocab("train", tmp_path / "bpe", True, kind="bpe", vocab_size=300, min_frequency=1,
                          sentences=lambda: (f"w{i} river station harbour {i}" for i in range(200)))  # fmt: skip
    size = load_tokenizer(vocab).get_vocab_size()
    config = transformers.ModernBertConfig(
        vocab_size=size, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=2,
        max_position_embeddings=64, local_attention=8, global_attn_every_n_layers=2,
        pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.ModernBertForMaskedLM(config).save_pretrained(released)
    (released / "tokenizer.json").write_bytes(vocab.read_bytes())
    write_params(root, {
        "weights": {"tiny-modernbert": "released/tiny-modernbert"}, "vocab.source": "weights",
        "pretrain.phases": {"phase1": "tiny-modernbert"}, "finetune.init": "phase1",
        "examples.next_sentence": False, "examples.phase1": {"max_seq_length": 32, "max_predictions_per_seq": 5},
        **{f"pretrain.phase1.{key}": value for key, value in PHASE.items()}, "pretrain.data_workers": 0,
    })  # fmt: skip
    run(root, "stages.download_weights", "tiny-modernbert")
    fetched = root / "data/weights/tiny-modernbert"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in fetched.iterdir()}
    assert not (fetched / "vocab.txt").exists()
    refuse_folders_that_do_not_fit(transformers, config, vocab, tmp_path)
    run(root, "stages.vocab")
    write_shards(root / "data/examples/phase1", sizes=(16,), seq_len=32, max_pred=5, drawn_masks=True,
                 next_sentence=False)  # fmt: skip
    run(root, "stages.pretrain", "phase1")

    continued = root / "data/weights/phase1"
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(continued).eval()
    assert theirs.config.model_type == "modernbert" and type(theirs).__name__ == "ModernBertForMaskedLM"
    ours = family.from_pretrained(continued, "pretraining")
    before = family.from_pretrained(fetched, "pretraining")
    input_ids = torch.tensor([[2, 17, 30, 4, 41, 3, 8, 9, 3]])
    positions = torch.tensor([[3, 6]])
    with torch.no_grad():
        their_logits = theirs(input_ids=input_ids).logits[0, [3, 6]]
        our_logits = ours(input_ids, None, torch.ones_like(input_ids), positions).mlm_logits
        start_logits = before(input_ids, None, torch.ones_like(input_ids), positions).mlm_logits
    torch.testing.assert_close(our_logits, their_logits, atol=1e-5, rtol=0)
    assert not torch.allclose(our_logits, start_logits)  # the stage trained it

    # Next-sentence examples for a released ModernBERT: one line, found where the model is read.
    set_params(root, {"examples.next_sentence": True})
    refused = run_stage(root, "stages.pretrain", "phase1")
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "examples.next_sentence is true, but data/weights/tiny-modernbert" in refused.stderr


def refuse_folders_that_do_not_fit(transformers, config, vocab: Path, tmp_path: Path) -> None:
    """download_weights' check of a ModernBERT folder: a tokenizer with more tokens than the model's
    vocab_size, and weights of another shape than config.json's, are each one line."""
    from stages.download_weights import check_folder

    small = transformers.ModernBertConfig(**{**config.to_dict(), "vocab_size": config.vocab_size - 10})
    transformers.ModernBertForMaskedLM(small).save_pretrained(tmp_path / "small")
    (tmp_path / "small/tokenizer.json").write_bytes(vocab.read_bytes())
    with pytest.raises(
        UserError, match=f"tokenizer.json: {config.vocab_size} tokens, more than config.json's"
    ):
        check_folder(tmp_path / "small")
    edited = json.loads((tmp_path / "small/config.json").read_text()) | {"intermediate_size": 64}
    (tmp_path / "small/config.json").write_text(json.dumps(edited))
    with pytest.raises(UserError, match="layers.0.mlp.Wi.weight' has shape .* do not belong together"):
        check_folder(tmp_path / "small")


def test_a_preset_s_positions_are_its_config_s():
    """stages/common/params.py reads a preset's positions without torch; they are the config's own."""
    for size in SIZES:
        assert family_and_positions(size) == (
            family.model_type(size),
            family.resolve_config(size, 100).max_position_embeddings,
        )
