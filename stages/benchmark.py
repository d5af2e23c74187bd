"""Stage benchmark: SQuAD fine-tuning and inference speed of the fine-tuned model -> metrics/benchmark.json.

    python -m stages.benchmark

Inference (ours and transformers' BertForQuestionAnswering with SDPA, same weights, same run):
sequences/s and latency p50/p99 at benchmark.batch_size and at batch 1; training: sequences/s of
a full fine-tuning step. Sequences of benchmark.seq_length tokens, finetune.precision, on CUDA
when present. Then `dev_inference`: windows/s over a seeded sample of benchmark.dev_windows
windows of the dev set (squad.* window settings), ours as predict_squad runs them, transformers
padded to squad.max_seq_length as its run_qa example does, and with dynamic padding.
"""

import importlib.util
import logging

import torch

from bert.atomic import write_json
from bert.errors import UserError, run_main
from bert.modeling import BertForQuestionAnswering
from bert.squad.benchmark import benchmark_dev_inference, benchmark_inference, dev_windows, time_training
from bert.tokenization import load_tokenizer_from_dir
from stages import layout
from stages.params import load_params

log = logging.getLogger("benchmark")
MODEL_DIR = layout.model("squad")
DEV_FILE = layout.SQUAD_DEV
METRICS_FILE = layout.metrics("benchmark")


def main() -> None:
    params = load_params()
    spec, precision = params.benchmark, params.finetune.precision
    if not (MODEL_DIR / "config.json").is_file():
        raise UserError(f"{MODEL_DIR}: no model; run the finetune_squad stage first")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    compare = importlib.util.find_spec("transformers") is not None
    if not compare:
        log.warning("transformers is not installed: no comparison (pip install transformers)")
    inference = benchmark_inference(
        MODEL_DIR, spec.batch_size, spec.seq_length, spec.steps, spec.warmup_steps, precision, device, compare
    )
    model = BertForQuestionAnswering.from_pretrained(MODEL_DIR).to(device)
    training = time_training(
        model, spec.batch_size, spec.seq_length, spec.steps, spec.warmup_steps, precision
    )
    metrics = {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)",
        "precision": precision,
        "batch_size": spec.batch_size,
        "seq_length": spec.seq_length,
        "train_sequences_per_second": training["sequences_per_second"],
        "inference": inference["ours"],
    }
    if compare:
        metrics["inference_transformers"] = inference["transformers"]
        metrics["inference_speedup_vs_transformers"] = inference["speedup"]
    if spec.dev_windows:
        squad = params.squad
        tokenizer, _ = load_tokenizer_from_dir(MODEL_DIR, params.vocab.lower_case)
        windows = dev_windows(DEV_FILE, tokenizer, squad.max_seq_length, squad.doc_stride,
                              squad.max_query_length, spec.dev_windows)  # fmt: skip
        metrics["dev_inference"] = benchmark_dev_inference(
            MODEL_DIR, windows, spec.batch_size, precision=precision, device=device, compare=compare
        )
    write_json(METRICS_FILE, metrics)
    log.info("train %.1f seq/s; inference %.1f seq/s (%.2fx transformers) -> %s",
             metrics["train_sequences_per_second"], inference["ours"]["sequences_per_second"],
             inference.get("speedup", float("nan")), METRICS_FILE)  # fmt: skip
    if "dev_inference" in metrics:
        dev = metrics["dev_inference"]
        log.info("dev set: %d windows of %.0f tokens on average; %.1f windows/s (%.2fx transformers padded "
                 "to %d, %.2fx with dynamic padding)", dev["windows"], dev["mean_window_length"],
                 dev["ours"]["windows_per_second"], dev.get("speedup", float("nan")),
                 params.squad.max_seq_length, dev.get("speedup_vs_dynamic_padding", float("nan")))  # fmt: skip


if __name__ == "__main__":
    run_main(main)
