"""The SQuAD stages end to end, as DVC runs them, in a throw-away project folder: a tiny random
BERT saved as a Hugging Face directory where pretrain@phase2 puts ours (finetune.init: phase2) and a few
questions of the bundled sample world. finetune_squad -> predict_squad -> evaluate_squad -> benchmark."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bert.model.config import BertConfig
from bert.model.network import BertForQuestionAnswering
from tests.support.stage_workspace import set_params, write_params

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data/sample/squad"
INIT = "data/weights/phase2"


def subset(source: Path, target: Path, articles: int) -> None:
    dataset = json.loads(source.read_text(encoding="utf-8"))
    dataset["data"] = dataset["data"][:articles]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(dataset), encoding="utf-8")


def make_project(root: Path, vocab_file: Path, version: str) -> Path:
    root.mkdir(parents=True)
    squad = {"run": [version], "max_seq_length": 64, "doc_stride": 32, "max_query_length": 16}
    finetune = {"init": "phase2", "log_every": 1, "save_every": 2}
    benchmark = {"batch_size": 2, "seq_length": 32, "warmup_steps": 0, "steps": 2, "dev_windows": 16}
    write_params(root, {**{f"squad.{key}": value for key, value in squad.items()},
                        **{f"finetune.{key}": value for key, value in finetune.items()},
                        "squad.recipe": {"epochs": 1, "global_batch_size": 4, "micro_batch_size": 4},
                        **{f"benchmark.{key}": value for key, value in benchmark.items()},
                        "predict.batch_size": 8, "examples.phase1.max_seq_length": 32,
                        "examples.phase2.max_seq_length": 64, "examples.phase2.max_predictions_per_seq": 10})  # fmt: skip
    subset(SAMPLE / version / f"train-{version}.json", root / "data/squad/train.json", articles=8)
    subset(SAMPLE / version / f"dev-{version}.json", root / "data/squad/dev.json", articles=3)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab_file.read_text().splitlines()), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)  # fmt: skip
    BertForQuestionAnswering(config).save_pretrained(root / INIT, vocab_file=vocab_file, lower_case=True)
    return root


def run(root: Path, module: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{module} failed:\n{done.stderr[-3000:]}"
    return done


def read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_finetune_predict_evaluate(tmp_path, uncased_vocab, version):
    root = make_project(tmp_path / "project", uncased_vocab, version)
    run(root, "stages.finetune_squad")
    model = root / "data/models/squad"
    assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"} <= {
        p.name for p in model.iterdir()
    }
    assert (root / "dvclive/finetune_squad/plots/metrics/train/loss.tsv").is_file()
    trained = read(root / "metrics/finetune_squad.json")
    assert trained["steps"] >= 1 and trained["sequences_per_second"] > 0 and trained["loss"] > 0
    assert trained["cpu_threads"] == 1  # OMP_NUM_THREADS of `run`: the model bytes depend on it
    assert trained["mfu"] > 0 and trained["tokens_per_second"] > 0  # the loop's throughput figures
    assert list((root / "data/checkpoints/squad").glob("step-*.pt"))

    run(root, "stages.predict_squad")
    predictions_dir = root / "data/predictions"
    dev = read(root / "data/squad/dev.json")
    qids = {qa["id"] for article in dev["data"] for p in article["paragraphs"] for qa in p["qas"]}
    predictions, nbest = (
        read(predictions_dir / "predictions.json"),
        read(predictions_dir / "nbest_predictions.json"),
    )
    assert set(predictions) == set(nbest) == qids
    assert all(
        predictions[q] == next((e["text"] for e in nbest[q] if e["text"]), "") or predictions[q] == ""
        for q in qids
    )
    assert (predictions_dir / "null_odds.json").is_file() == (version == "v2.0")

    run(root, "stages.evaluate_squad")
    metrics = read(root / "metrics/squad.json")
    args = ["data/squad/dev.json", "data/predictions/predictions.json"]
    if version == "v2.0":
        args += ["--na-prob-file", "data/predictions/null_odds.json"]
    official = json.loads(run(root, "bert.squad", *args).stdout)
    assert metrics["version"] == version and metrics["questions"] == len(qids)
    renamed = {"exact": "exact_match", "total": "questions"}
    official = {"questions": len(qids), **{renamed.get(k, k): v for k, v in official.items()}}
    assert official == {k: v for k, v in metrics.items() if k not in ("version", "empty_answers")}
    assert metrics["empty_answers"] == 100 * sum(answer == "" for answer in predictions.values()) / len(qids)
    if version == "v2.0":
        assert {"HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"} <= set(metrics)


def test_finetune_resumes_and_benchmark(tmp_path, uncased_vocab):
    root = make_project(tmp_path / "project", uncased_vocab, "v1.1")
    run(root, "stages.finetune_squad")
    first = (root / "data/models/squad/model.safetensors").read_bytes()
    again = run(root, "stages.finetune_squad")  # the final checkpoint is there: nothing left to train
    assert "resumed from step" in again.stderr
    assert (root / "data/models/squad/model.safetensors").read_bytes() == first

    # Another way of running the finished run (`dvc exp run -S finetune.unpad=true`) trains it again.
    set_params(root, {"finetune.unpad": True})
    variant = run(root, "stages.finetune_squad")
    assert "finished with other settings (unpad False -> True); training it again" in variant.stderr
    assert "resumed from step" not in variant.stderr
    set_params(root, {"finetune.unpad": False})

    # New initial weights of the same shape (say, pretraining ran again) start afresh.
    initial = root / INIT / "model.safetensors"
    size = initial.stat().st_size
    model = BertForQuestionAnswering.from_pretrained(root / INIT)
    with torch.no_grad():
        model.qa_outputs.weight.add_(1.0)
    model.save_pretrained(root / INIT, vocab_file=uncased_vocab, lower_case=True)
    assert initial.stat().st_size == size
    fresh = run(root, "stages.finetune_squad")
    assert (
        "written by a run with other params (files [model.safetensors changed])" in fresh.stderr
        and "resumed from step" not in fresh.stderr
    )
    assert "its checkpoints moved to data/checkpoints/squad/previous-" in fresh.stderr
    assert (root / "data/models/squad/model.safetensors").read_bytes() != first

    run(root, "stages.benchmark")
    bench = read(root / "metrics/benchmark.json")
    assert bench["seq_length"] == 32 and bench["batch_size"] == 2
    for side in ("inference", "inference_transformers"):
        assert {"sequences_per_second", "latency_p50_ms", "latency_p99_ms", "batch1_latency_p50_ms",
                "batch1_latency_p99_ms"} <= set(bench[side])  # fmt: skip
    assert bench["train_sequences_per_second"] > 0 and bench["inference_speedup_vs_transformers"] > 0
    # MFU: model FLOP/s over the matmul peak measured in the run (a CPU has no data-sheet peak here).
    peak = bench["matmul_peak_tflops"]
    assert peak > 0 and bench["datasheet_peak_tflops"] is None
    assert bench["train_mfu"] == pytest.approx(bench["train_model_tflops_per_second"] / peak)
    assert bench["inference"]["mfu"] == pytest.approx(bench["inference"]["model_tflops_per_second"] / peak)
    # Pretraining at the phases' shapes (examples.phase*: 0.15 x length, at most max_predictions_per_seq),
    # ours against transformers.
    assert [(p["seq_length"], p["masked_per_sequence"]) for p in bench["pretraining"].values()] == [
        (32, 5),
        (64, 10),
    ]
    for phase in bench["pretraining"].values():
        assert phase["mfu"] == pytest.approx(phase["model_tflops_per_second"] / phase["matmul_peak_tflops"])
        assert phase["sequences_per_second"] > 0 and phase["speedup_vs_transformers"] > 0
    dev = bench["dev_inference"]  # the dev set's own windows, timed as predict_squad runs them
    assert dev["windows"] == 16 and 0 < dev["mean_window_length"] <= 64
    assert dev["max_start_logit_difference"] < 1e-4  # the same model in both libraries: same answers
    for side in ("ours", "transformers", "transformers_dynamic_padding"):
        assert dev[side]["windows_per_second"] > 0


def test_missing_init_is_one_clear_line(tmp_path, uncased_vocab):
    root = make_project(tmp_path / "project", uncased_vocab, "v1.1")
    set_params(root, {"finetune.init": "random"})  # needs data/weights/random, which this project lacks
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "stages.finetune_squad"], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error: data/weights/random: no config.json + vocab.txt (or tokenizer.json) for finetune.init=random; "
        "run `dvc repro init_random`"
    )


def test_batches_split_ranks_reshuffle_epochs_and_resume():
    from bert.squad.features import SquadFeatures
    from bert.training.finetune import FineTuningBatches
    from bert.training.run import steps_for_epochs

    num, seq = 23, 10
    lengths = 3 + torch.arange(num) % 6
    attention = (torch.arange(seq)[None, :] < lengths[:, None]).numpy().astype("int8")
    ids = (torch.arange(num)[:, None] * 100 + torch.arange(seq)[None, :]).numpy().astype("int32")
    zeros = torch.zeros(num, dtype=torch.int32).numpy()
    features = SquadFeatures(ids, attention * 0, attention, zeros, zeros, zeros, None, None, None)

    def rows(batches):
        return [sorted((b["input_ids"][:, 0] // 100).tolist()) for b in batches]

    alone = FineTuningBatches(features.training_arrays(), global_batch_size=4, micro_batch_size=4, seed=1)
    ranks = [
        FineTuningBatches(features.training_arrays(), 4, 2, seed=1, rank=r, world_size=2) for r in (0, 1)
    ]
    assert len(alone) == len(ranks[0]) == 5  # 23 windows: five global batches of 4, three left out
    together = [sorted(a + b) for a, b in zip(rows(ranks[0]), rows(ranks[1]))]
    assert together == rows(alone)  # the two ranks share out exactly the single process's batches
    first_epoch = rows(alone)
    alone.set_epoch(1)
    assert rows(alone) != first_epoch and len({r for batch in first_epoch for r in batch}) == 20
    alone.set_epoch(0)
    alone.skip_samples(8)  # resume after two global batches
    assert rows(alone) == first_epoch[2:]
    for batch in FineTuningBatches(
        features.training_arrays(), global_batch_size=4, micro_batch_size=4, seed=1
    ):
        assert batch["input_ids"].shape[1] == batch["attention_mask"].sum(1).max()  # cut to the longest
    assert steps_for_epochs(23, epochs=2, global_batch_size=12) == 2  # one global batch of 12 per epoch
    assert steps_for_epochs(23, epochs=0.5, global_batch_size=4) == 3  # 5 per epoch, rounded up


def test_prediction_runs_longest_first_in_trimmed_batches_and_keeps_the_order():
    from bert.squad.features import SquadFeatures
    from bert.squad.predict import predict_logits

    num, seq = 11, 24
    lengths = torch.tensor([5, 24, 9, 17, 6, 24, 12, 7, 20, 8, 15])
    attention = (torch.arange(seq)[None, :] < lengths[:, None]).numpy().astype("int8")
    g = torch.Generator().manual_seed(0)
    ids = (torch.randint(5, 50, (num, seq), generator=g).numpy() * attention).astype("int32")
    types = ((torch.arange(seq)[None, :] >= 3).numpy() * attention).astype("int8")
    zeros = torch.zeros(num, dtype=torch.int32).numpy()
    features = SquadFeatures(ids, types, attention, zeros, zeros, zeros, None, None, None)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)  # fmt: skip
    model = BertForQuestionAnswering(config).eval()
    shapes = []
    hook = model.register_forward_hook(
        lambda module, args, kwargs, output: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    start, end = predict_logits(model, features, batch_size=4, device="cpu", precision="fp32", progress=False)
    hook.remove()

    # Longest first, each batch cut to its longest window: 4 x 24, 4 x 15, 3 x 7 (in the given
    # order, every batch would hold a 24- or 20-token window).
    assert shapes == [(4, 24), (4, 15), (3, 7)]
    for row in range(num):  # each window's logits are those of the window run alone, in place
        alone = model(*(torch.from_numpy(a[row : row + 1]).long() for a in (ids, types, attention)))
        real = int(lengths[row])
        torch.testing.assert_close(torch.from_numpy(start[row, :real]), alone.start_logits[0, :real].detach())
        torch.testing.assert_close(torch.from_numpy(end[row, :real]), alone.end_logits[0, :real].detach())


def _windows(lengths: list[int], seq: int, seed: int = 0):
    from bert.squad.features import SquadFeatures

    lengths = torch.tensor(lengths)
    num = len(lengths)
    attention = (torch.arange(seq)[None, :] < lengths[:, None]).numpy().astype("int8")
    g = torch.Generator().manual_seed(seed)
    ids = (torch.randint(5, 50, (num, seq), generator=g).numpy() * attention).astype("int32")
    ids[:, 0] = torch.arange(num).numpy() + 1000  # row identity, for the batch tests
    types = ((torch.arange(seq)[None, :] >= 3).numpy() * attention).astype("int8")
    starts = (torch.randint(0, 1 << 30, (num,), generator=g) % lengths).numpy().astype("int32")
    ends = torch.minimum(torch.from_numpy(starts).long() + 2, lengths - 1).numpy().astype("int32")
    return SquadFeatures(ids, types, attention, starts, ends, starts * 0, None, None, None)


def test_length_binned_batches_cover_each_window_once_with_less_padding_and_resume():
    from bench.padding import padding_waste
    from bert.training.finetune import FineTuningBatches

    g = torch.Generator().manual_seed(3)
    features = _windows((20 + torch.randint(0, 360, (1000,), generator=g)).tolist(), seq=384)

    def batches(micro_batch_size: int = 8, **kwargs) -> list[dict]:
        return list(FineTuningBatches(features.training_arrays(), 8, micro_batch_size, seed=5, **kwargs))

    def rows(batches: list[dict]) -> list[list[int]]:
        return [sorted((b["input_ids"][:, 0] - 1000).tolist()) for b in batches]

    binned, plain = batches(length_binning=True), batches()
    assert len(binned) == len(plain) == 125
    assert sorted(r for batch in rows(binned) for r in batch) == list(range(1000))  # each window once
    print(f"padding: binned {padding_waste(binned):.3f}, random batches {padding_waste(plain):.3f}")
    assert padding_waste(binned) < 0.05 < 0.3 < padding_waste(plain)
    assert rows(binned) == rows(batches(length_binning=True))  # seeded
    two_ranks = [batches(micro_batch_size=4, length_binning=True, rank=r, world_size=2) for r in (0, 1)]
    assert [sorted(a + b) for a, b in zip(rows(two_ranks[0]), rows(two_ranks[1]))] == rows(binned)
    resumed = FineTuningBatches(features.training_arrays(), 8, 8, seed=5, length_binning=True)
    resumed.skip_samples(8 * 70)  # inside the second binning window
    assert rows(list(resumed)) == rows(binned)[70:]
    resumed.set_epoch(1)
    assert rows(list(resumed)) != rows(binned)  # reshuffled every epoch


def test_question_answering_loss_does_not_depend_on_the_batch_width():
    features = _windows([5, 24, 9, 17, 6, 12], seq=32)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)  # fmt: skip
    model = BertForQuestionAnswering(config)
    arrays = [torch.from_numpy(a).long() for a in (features.input_ids, features.token_type_ids,
              features.attention_mask, features.start_positions, features.end_positions)]  # fmt: skip

    def loss_and_grads(width: int, rows: slice = slice(None)):
        model.zero_grad()
        inputs = [a[rows, :width] if a.ndim == 2 else a[rows] for a in arrays]
        loss = model(*inputs).loss
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    full, full_grads = loss_and_grads(32)
    cut, cut_grads = loss_and_grads(24)  # the longest window
    torch.testing.assert_close(cut, full)
    for a, b in zip(cut_grads, full_grads):
        torch.testing.assert_close(a, b)
    alone = torch.stack(
        [loss_and_grads(int(features.attention_mask[r].sum()), slice(r, r + 1))[0] for r in range(6)]
    )
    torch.testing.assert_close(full, alone.mean())  # the batch loss is the mean of each window's own


def test_unpadded_fine_tuning_trains_the_same_model(tmp_path, uncased_vocab):
    """finetune.unpad runs the encoder on packed real tokens: without dropout (whose masks are
    drawn in another shape) it trains the same weights as the padded path."""
    from safetensors.torch import load_file

    trained = {}
    for unpad in (False, True):
        root = make_project(tmp_path / f"unpad-{unpad}", uncased_vocab, "v1.1")
        init = BertForQuestionAnswering.from_pretrained(root / INIT)
        init.config.hidden_dropout_prob = init.config.attention_probs_dropout_prob = 0.0
        init.save_pretrained(root / INIT, vocab_file=uncased_vocab, lower_case=True)
        set_params(root, {"finetune.unpad": unpad})
        log = run(root, "stages.finetune_squad").stderr
        assert ("encoder on packed real tokens" in log) == unpad
        trained[unpad] = load_file(root / "data/models/squad/model.safetensors")
    assert trained[False].keys() == trained[True].keys()
    for name, weight in trained[False].items():
        torch.testing.assert_close(trained[True][name], weight, atol=1e-4, rtol=0, msg=name)
    initial = load_file(tmp_path / "unpad-True" / INIT / "model.safetensors")
    moved = max((trained[True][name] - initial[name]).abs().max() for name in initial)
    assert moved > 1e-3  # it trained: the comparison is not of two copies of the initial weights
