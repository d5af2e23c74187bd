"""Stage benchmark: speed and MFU of the pipeline's model -> metrics/benchmark.json.

    python -m stages.benchmark

MFU is model FLOPs per second (bert.model.flops) over the dense matmul peak measured in the same run at
the row's own shapes (bert.model.flops.matmul_peak), for: pretraining phase 1 and phase 2 (a full LAMB
or AdamW step, pretrain.*, at examples.phase*.max_seq_length, benchmark.pretraining_batch_size sequences,
ours against transformers.BertForPreTraining, or for a ModernBERT ours against
transformers.ModernBertForMaskedLM, fastest of benchmark.steps rounds), and the fine-tuned SQuAD model's training step
and inference below, of either family. Inference (ours and transformers' question-answering class
of the model's family with SDPA, same weights, same run):
sequences/s and latency p50/p99 at benchmark.batch_size and at batch 1; training: sequences/s of
a full fine-tuning step. Sequences of benchmark.seq_length tokens, finetune.precision, on CUDA
when present. Then `dev_inference`: windows/s over a seeded sample of benchmark.dev_windows
windows of the dev set (squad.* window settings), ours as predict_squad runs them, transformers
padded to squad.max_seq_length as its run_qa example does, and with dynamic padding.
"""

import importlib.util
import logging
from functools import partial

import torch

from bert.atomic import write_json
from bert.errors import UserError, run_main
from bert.model import family
from bert.model.flops import best_peak, datasheet_peak, matmul_peak, mfu, question_answering_flops
from bert.pretraining.benchmark import masked_per_sequence, time_pretraining
from bert.squad.benchmark import benchmark_dev_inference, benchmark_inference, dev_windows, time_training
from bert.text.tokenization import load_tokenizer_from_dir
from stages.common import layout
from stages.common.params import load_params

log = logging.getLogger("benchmark")
MODEL_DIR = layout.model(layout.SQUAD)
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
    config = family.resolve_config(MODEL_DIR)
    inference, metrics = finetuned_figures(spec, precision, config, device, compare)
    metrics["pretraining"] = pretraining_phases(params, config, device, compare)
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
    log_summary(metrics, inference, spec, params.squad.max_seq_length)


def finetuned_figures(spec, precision: str, config, device: torch.device, compare: bool) -> tuple[dict, dict]:
    """The fine-tuned SQuAD model's inference (ours, and transformers' when `compare`) and training
    step at benchmark.batch_size x benchmark.seq_length: (what benchmark_inference measured, the
    metrics of ours, their MFUs over the best matmul peak measured before and after them)."""
    tokens = spec.batch_size * spec.seq_length
    peak_before = matmul_peak(config, tokens, device, precision)
    inference = benchmark_inference(
        MODEL_DIR, spec.batch_size, spec.seq_length, spec.steps, spec.warmup_steps, precision, device, compare
    )
    model = family.from_pretrained(MODEL_DIR, "question_answering").to(device)
    training = time_training(
        model, spec.batch_size, spec.seq_length, spec.steps, spec.warmup_steps, precision
    )
    peak = best_peak(peak_before, matmul_peak(config, tokens, device, precision))
    train_flops = training["sequences_per_second"] * question_answering_flops(config, spec.seq_length)
    inference_flops = inference["ours"]["sequences_per_second"] * question_answering_flops(
        config, spec.seq_length, training=False
    )
    return inference, {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)",
        "precision": precision,
        "batch_size": spec.batch_size,
        "seq_length": spec.seq_length,
        "matmul_peak_tflops": peak.tflops,
        "datasheet_peak_tflops": datasheet_peak(device, precision),
        "train_sequences_per_second": training["sequences_per_second"],
        "train_model_tflops_per_second": train_flops / 1e12,
        "train_mfu": mfu(train_flops, 1.0, peak.tflops),
        "inference": {
            **inference["ours"],
            "model_tflops_per_second": inference_flops / 1e12,
            "mfu": mfu(inference_flops, 1.0, peak.tflops),
        },
    }


def pretraining_phases(params, config, device: torch.device, compare: bool) -> dict:
    """pretraining_figures of each phase the model (BERT or ModernBERT) could have been pretrained
    at; none when benchmark.pretraining_batch_size is 0."""
    figures = {}
    for phase in layout.PHASES if params.benchmark.pretraining_batch_size else ():
        seq_len = getattr(params.examples, phase).max_seq_length
        if seq_len > config.max_position_embeddings:  # a model that pretraining could not have made
            log.warning("pretraining %s not timed: examples.%s.max_seq_length %d exceeds the model's "
                        "max_position_embeddings %d", phase, phase, seq_len, config.max_position_embeddings)  # fmt: skip
            continue
        figures[phase] = pretraining_figures(params, phase, config, device, compare)
    return figures


def log_summary(metrics: dict, inference: dict, spec, squad_max_seq_length: int) -> None:
    log.info("matmul peak %.3f TFLOP/s; train %.1f seq/s (MFU %.1f%%); inference %.1f seq/s (MFU %.1f%%, "
             "%.2fx transformers) -> %s", metrics["matmul_peak_tflops"], metrics["train_sequences_per_second"],
             100 * metrics["train_mfu"], inference["ours"]["sequences_per_second"],
             100 * metrics["inference"]["mfu"], inference.get("speedup", float("nan")), METRICS_FILE)  # fmt: skip
    for phase, figures in metrics["pretraining"].items():
        log.info("pretraining %s (%d x %d): %.1f seq/s, MFU %.1f%% of %.3f TFLOP/s, %.2fx transformers", phase,
                 spec.pretraining_batch_size, figures["seq_length"], figures["sequences_per_second"], 100 * figures["mfu"],
                 figures["matmul_peak_tflops"], figures.get("speedup_vs_transformers", float("nan")))  # fmt: skip
    if "dev_inference" in metrics:
        dev = metrics["dev_inference"]
        log.info("dev set: %d windows of %.0f tokens on average; %.1f windows/s (%.2fx transformers padded "
                 "to %d, %.2fx with dynamic padding)", dev["windows"], dev["mean_window_length"],
                 dev["ours"]["windows_per_second"], dev.get("speedup", float("nan")),
                 squad_max_seq_length, dev.get("speedup_vs_dynamic_padding", float("nan")))  # fmt: skip


def pretraining_figures(params, phase: str, config, device: torch.device, compare: bool) -> dict:
    """A pretraining step of the model's config (random weights) at the phase's shape, as pretrain runs it."""
    spec, examples = params.benchmark, getattr(params.examples, phase)
    seq_len, precision = examples.max_seq_length, params.pretrain.precision
    masked = masked_per_sequence(seq_len, examples.masked_lm_prob, examples.max_predictions_per_seq)
    sweep = partial(matmul_peak, config, spec.pretraining_batch_size * seq_len, device, precision)
    before = sweep()  # and after each round (time_pretraining): the best sweep counts
    models = ("ours", "transformers") if compare else ("ours",)
    result = time_pretraining(config, spec.pretraining_batch_size, seq_len, masked, models, steps=1, warmup=spec.warmup_steps,
                              rounds=spec.steps, precision=precision, device=device,
                              optimizer=params.recipe(phase).optimizer, measure_peak=sweep)  # fmt: skip
    peak = max(before.tflops, result["matmul_peak"]["tflops"])
    ours = result["models"]["ours"]
    figures = {
        "batch_size": spec.pretraining_batch_size,
        "seq_length": seq_len,
        "masked_per_sequence": masked,
        "precision": precision,
        "matmul_peak_tflops": peak,
        "sequences_per_second": ours["sequences_per_second"],
        "model_tflops_per_second": ours["model_tflops_per_second"],
        "mfu": ours["model_tflops_per_second"] / peak,
    }
    if compare:
        figures["speedup_vs_transformers"] = result["speedup"]
    return figures


if __name__ == "__main__":
    run_main(main)
