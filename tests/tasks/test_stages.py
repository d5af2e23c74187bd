"""The SWAG and GLUE stages end to end, as DVC runs them, in a throw-away project folder: a tiny
random BERT where pretrain@phase2 puts ours (finetune.init: phase2) and the bundled sample world's sets.
download_task -> finetune_task -> predict_task -> evaluate_task -> glue_score, for a task of each
kind: multiple choice (SWAG), a score (STS-B) and two dev splits (MNLI)."""

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score

from bert.model.config import BertConfig
from bert.model.network import BertForQuestionAnswering
from bert.tasks.catalogue import TASKS
from bert.tasks.data import read_split
from bert.tasks.predictions_file import write_predictions
from tests.support.stage_workspace import run_stage, set_params, write_params

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data/sample"
SOURCES = {
    "swag": [str(SAMPLE / "swag")],
    "stsb": [str(SAMPLE / "glue/STS-B")],
    "mnli": [str(SAMPLE / "glue/MNLI")],
    "rte": [str(SAMPLE / "glue/RTE")],
}


def make_project(root: Path, vocab_file: Path, tasks: list[str]) -> Path:
    root.mkdir(parents=True)
    changes = {
        "tasks.run": dict.fromkeys(tasks, "finetune.init"),
        "finetune.log_every": 5,
        "finetune.save_every": 10,
        "predict.batch_size": 32,
    }
    for task in tasks:
        settings = {"sources": SOURCES[task], "max_seq_length": 48,
                    "recipe": {"epochs": 1, "global_batch_size": 16, "micro_batch_size": 16}}  # fmt: skip
        changes.update({f"tasks.{task}.{key}": value for key, value in settings.items()})
    write_params(root, changes)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab_file.read_text().splitlines()), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)  # fmt: skip
    # A pretrained start has an encoder and no task head (a phase's folder has none either).
    BertForQuestionAnswering(config).save_pretrained(root / "data/weights/phase2", vocab_file=vocab_file)
    return root


def run(root: Path, *args: str):
    done = run_stage(root, *args)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done


def read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def predictions(path: Path) -> list[str]:
    return [line.split("\t")[2] for line in path.read_text().splitlines()[1:]]


def test_a_task_of_each_kind_end_to_end(tmp_path, uncased_vocab):
    tasks = ["swag", "stsb", "mnli"]
    root = make_project(tmp_path / "project", uncased_vocab, tasks)
    for task in tasks:
        for stage in ("download_task", "finetune_task", "predict_task", "evaluate_task"):
            run(root, f"stages.{stage}", task)
        model = root / "data/models/tasks" / task
        assert {"config.json", "model.safetensors", "vocab.txt"} <= {p.name for p in model.iterdir()}
        trained = read(root / f"metrics/finetune_task/{task}.json")
        assert trained["steps"] >= 1 and trained["loss"] > 0 and trained["mfu"] > 0  # [N, C, S] batches too
        assert (root / f"dvclive/finetune_task/{task}/plots/metrics/train/loss.tsv").is_file()
    architectures = {
        task: read(root / f"data/models/tasks/{task}/config.json")["architectures"] for task in tasks
    }
    assert architectures == {"swag": ["BertForMultipleChoice"], "stsb": ["BertForSequenceClassification"],
                             "mnli": ["BertForSequenceClassification"]}  # fmt: skip

    # The figures are the reference implementations' on the predictions the stage wrote.
    swag = read(root / "metrics/tasks/swag.json")
    gold = read_split(TASKS["swag"], root / "data/tasks/swag/val.csv").labels
    predicted = [int(p) for p in predictions(root / "data/task_predictions/swag/dev.tsv")]
    assert swag["accuracy"] == pytest.approx(100 * accuracy_score(gold, predicted))
    stsb = read(root / "metrics/tasks/stsb.json")
    gold = read_split(TASKS["stsb"], root / "data/tasks/stsb/dev.tsv").labels
    scores = np.array(predictions(root / "data/task_predictions/stsb/dev.tsv"), float)
    assert stsb["pearson"] == pytest.approx(100 * pearsonr(gold, scores)[0], abs=1e-3)
    assert stsb["spearman"] == pytest.approx(100 * spearmanr(gold, scores)[0], abs=1e-3)
    mnli = read(root / "metrics/tasks/mnli.json")
    assert {"accuracy_matched", "accuracy_mismatched"} <= set(mnli) and set(mnli["examples"]) == {
        "dev_matched",
        "dev_mismatched",
    }
    assert mnli["dev_in_train"] == {"dev_matched": 0, "dev_mismatched": 0}  # the sample's splits are apart

    run(root, "stages.glue_score")
    glue = read(root / "metrics/glue.json")
    assert glue["tasks"] == ["stsb", "mnli"]  # SWAG is not a GLUE task
    stsb_score = (stsb["pearson"] + stsb["spearman"]) / 2
    mnli_score = (mnli["accuracy_matched"] + mnli["accuracy_mismatched"]) / 2
    assert glue["glue_score"] == pytest.approx((stsb_score + mnli_score) / 2)

    # RTE from MNLI's model (its head fresh: other labels), over two seeds: the medians, their
    # spread, and the GLUE score's spread over the seeds.
    set_params(root, {"tasks.run.rte": "mnli", "tasks.rte.sources": SOURCES["rte"], "tasks.rte.max_seq_length": 48,
                      "tasks.rte.recipe": {"epochs": 1, "global_batch_size": 16, "micro_batch_size": 16},
                      "tasks.rte.seeds": [7, 3]})  # fmt: skip
    run(root, "stages.download_task", "rte")
    # The curves of runs of before (the one run without seeds, a seed since dropped), which DVC
    # keeps in the folder (persist: true): the stage leaves only its own seeds' there.
    curves = root / "dvclive/finetune_task/rte"
    for stale in ("plots/metrics/train/loss.tsv", "metrics.json", "seed-9/metrics.json", "seed-9.json"):
        (curves / stale).parent.mkdir(parents=True, exist_ok=True)
        (curves / stale).write_text("{}", encoding="utf-8")
    log = run(root, "stages.finetune_task", "rte").stderr
    assert sorted(entry.name for entry in curves.iterdir()) == ["seed-3", "seed-3.json", "seed-7"]
    assert "RTE starts from MNLI's model (data/models/tasks/mnli), its head re-initialised" in log
    assert "rte seed 7: init=tasks.mnli" in log and "rte seed 3: init=tasks.mnli" in log
    rte_model = root / "data/models/tasks/rte"
    assert (
        read(rte_model / "seeds.json") == {"seeds": [7, 3]}
        and (rte_model / "seed-3/model.safetensors").is_file()
    )
    assert (rte_model / "model.safetensors").read_bytes() != (
        rte_model / "seed-3/model.safetensors"
    ).read_bytes()
    assert (root / "dvclive/finetune_task/rte/seed-3.json").is_file() and read(
        root / "metrics/finetune_task/rte.json"
    )["steps"] >= 1
    for stage in ("predict_task", "evaluate_task"):
        run(root, f"stages.{stage}", "rte")
    assert (root / "data/task_predictions/rte/seed-3/dev.tsv").is_file()
    rte = read(root / "metrics/tasks/rte.json")
    by_seed = [rte["seeds"][seed]["accuracy"] for seed in ("7", "3")]
    assert rte["accuracy"] == pytest.approx(np.median(by_seed)) and rte["spread"][
        "accuracy"
    ] == pytest.approx(np.ptp(by_seed))
    run(root, "stages.glue_score")
    glue = read(root / "metrics/glue.json")
    assert glue["glue_score"] == pytest.approx((stsb_score + mnli_score + rte["accuracy"]) / 3)
    assert glue["glue_score_spread"] == pytest.approx(np.ptp(glue["glue_score_by_seed"]))
    assert glue["task_score_spread"] == {"rte": pytest.approx(rte["spread"]["accuracy"])}

    # Run again: the final checkpoint is there, nothing is left to train, the same model comes out.
    first = (root / "data/models/tasks/stsb/model.safetensors").read_bytes()
    again = run(root, "stages.finetune_task", "stsb")
    assert "resumed from step" in again.stderr
    assert (root / "data/models/tasks/stsb/model.safetensors").read_bytes() == first


def relabelled(row: str) -> str:
    fields, label = row.rsplit("\t", 1)
    return f"{fields}\t{'entailment' if label == 'not_entailment' else 'not_entailment'}"


def test_evaluate_task_says_how_many_dev_examples_the_train_split_holds(tmp_path):
    """A dev split that repeats train examples (a re-split gone wrong) is scored, and says so: the
    texts compared with their whitespace runs as one space, the labels aside."""
    task, data = TASKS["rte"], tmp_path / "data/tasks/rte"
    data.mkdir(parents=True)
    train = (SAMPLE / "glue/RTE/train.tsv").read_text(encoding="utf-8")
    (data / "train.tsv").write_text(train, encoding="utf-8")
    header, first, second, third, *_ = train.splitlines()
    copies = [first, second.replace(" ", "  "), relabelled(third)]
    own = (SAMPLE / "glue/RTE/dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    (data / "dev.tsv").write_text("\n".join([header, *copies, *own]) + "\n", encoding="utf-8")
    gold = read_split(task, data / "dev.tsv")
    (tmp_path / "data/task_predictions/rte").mkdir(parents=True)
    write_predictions(tmp_path / "data/task_predictions/rte/dev.tsv", task, gold.labels, gold.rows)
    log = run(tmp_path, "stages.evaluate_task", "rte").stderr
    metrics = read(tmp_path / "metrics/tasks/rte.json")
    assert metrics["dev_in_train"] == {"dev": 3} and metrics["examples"] == {"dev": 3 + len(own)}
    assert metrics["accuracy"] == 100.0
    assert f"RTE: dev examples whose texts the train split holds too: dev 3 of {3 + len(own)}" in log


def test_download_unpacks_a_glue_zip_and_checks_the_files(tmp_path, uncased_vocab):
    root = make_project(tmp_path / "project", uncased_vocab, ["stsb"])
    archive = tmp_path / "STS-B.zip"
    with zipfile.ZipFile(archive, "w") as zipped:  # as GLUE publishes it: STS-B/train.tsv, ...
        for path in sorted((SAMPLE / "glue/STS-B").iterdir()):
            zipped.write(path, f"STS-B/{path.name}")
        zipped.writestr("STS-B/LICENSE.txt", "not a split")
    set_params(root, {"tasks.stsb.sources": [str(archive)]})
    run(root, "stages.download_task", "stsb")
    assert sorted(p.name for p in (root / "data/tasks/stsb").iterdir()) == ["dev.tsv", "train.tsv"]
    assert (root / "data/tasks/stsb/dev.tsv").read_bytes() == (SAMPLE / "glue/STS-B/dev.tsv").read_bytes()

    # The files of another task: one line naming the file, nothing published.
    set_params(root, {"tasks.stsb.sources": [str(SAMPLE / "glue/RTE")]})
    (root / "data/tasks/stsb").rename(root / "previous")
    failed = run_stage(root, "stages.download_task", "stsb")
    assert failed.returncode == 1 and not (root / "data/tasks/stsb").exists()
    assert failed.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "train.tsv: no column 'score' in its header" in failed.stderr
    assert "this is not STS-B's train.tsv" in failed.stderr


def test_two_ranks_train_the_model_one_rank_trains(tmp_path, uncased_vocab):
    """DDP through torchrun (gloo on CPU): the same global batches, so the same weights to float
    tolerance (dropout off: its masks are drawn per rank)."""
    from safetensors.torch import load_file

    trained = {}
    for ranks in (1, 2):
        root = make_project(tmp_path / f"ranks-{ranks}", uncased_vocab, ["rte"])
        init = BertForQuestionAnswering.from_pretrained(root / "data/weights/phase2")
        init.config.hidden_dropout_prob = init.config.attention_probs_dropout_prob = 0.0
        init.save_pretrained(root / "data/weights/phase2", vocab_file=uncased_vocab)
        set_params(root, {"tasks.rte.recipe": {"micro_batch_size": 8},
                          "distributed.nproc_per_node": ranks})  # fmt: skip
        run(root, "stages.download_task", "rte")
        log = run(root, "stages.finetune_task", "rte").stderr
        assert f"x {3 - ranks} accum x {ranks} ranks" in log
        trained[ranks] = load_file(root / "data/models/tasks/rte/model.safetensors")
    for name, weight in trained[1].items():
        torch.testing.assert_close(trained[2][name], weight, rtol=1e-4, atol=1e-5, msg=name)
