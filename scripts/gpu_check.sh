#!/usr/bin/env bash
# The GPU checks in one run (a CUDA machine, from the repository root):
#   bash scripts/gpu_check.sh [OUT_DIR]
# 1. the CUDA tests (unpadded attention on flash's variable-length kernel, fused AdamW, training in
#    fp32/bf16/fp16 with loss scaling) and the CPU tests of the same modules;
# 2. bench/report.py in bf16: BERT-base and -large pretraining phase 1/2, SQuAD fine-tuning and
#    inference: sequences/s, model TFLOP/s, MFU against the matmul peak measured in the run (and
#    against the data sheet's), the ratio to transformers, into OUT_DIR/report.{json,md};
# 3. the pretraining step at large, bf16, phase 1 and phase 2 shapes: our padded path (SDPA's
#    memory-efficient kernel: the mask rules flash out), our unpadded path (flash's variable-length
#    kernel) and transformers, in the same run, with the profile of one step of ours (top operators,
#    the matmuls' share and rate);
# 4. a ModernBERT-base masked-LM training step in bf16 at 512 and 1,024 tokens, ours against
#    transformers' ModernBertForMaskedLM, into OUT_DIR/modernbert_step.txt.
# Each part is capped by `timeout` (seconds: TIMEOUT_TESTS, TIMEOUT_REPORT, TIMEOUT_STEP), so a hung
# or slow part still leaves the others' results in OUT_DIR.
# PYTHON defaults to python3; it needs torch with CUDA, h5py, tokenizers, pyarrow, tqdm, pytest and
# transformers (the rest of requirements.txt is for the pipeline, not for these checks).
set -uo pipefail
PYTHON=${PYTHON:-python3}
OUT=${1:-bench/results}
TIMEOUT_TESTS=${TIMEOUT_TESTS:-240}
TIMEOUT_REPORT=${TIMEOUT_REPORT:-300}
TIMEOUT_STEP=${TIMEOUT_STEP:-120}
mkdir -p "$OUT"
export PYTHONPATH=.
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"
# The pipeline's own packages (dvclive, dvc, nltk) need not be on a bare GPU image: the one test
# here that runs a whole stage (and so logs through DVCLive) is left out without them.
deselect=()
"$PYTHON" -c "import dvclive" 2>/dev/null || deselect=(--deselect tests/training/test_fastpath.py::test_stage_runs_binned_and_unpadded)
timeout "$TIMEOUT_TESTS" "$PYTHON" -m pytest -q -p no:cacheprovider -rs "${deselect[@]}" tests/training/test_fastpath.py tests/model/test_modeling.py \
    tests/training/test_optim.py tests/training/test_training.py::test_learns_on_repeated_batches 2>&1 | tee "$OUT/tests.txt" || status=1
timeout "$TIMEOUT_REPORT" "$PYTHON" bench/report.py --sizes base,large --precision bf16 --out-dir "$OUT" 2>&1 | tee "$OUT/report.txt" || status=1
for shape in "phase1 64 128" "phase2 16 512"; do
    read -r phase batch seq_len <<< "$shape"
    timeout "$TIMEOUT_STEP" "$PYTHON" bench/pretrain_step.py --size large --batch "$batch" --seq-len "$seq_len" --precision bf16 \
        --optimizer lamb --models ours,ours_unpadded,transformers --rounds 5 \
        --profile 15 --json "$OUT/large_${phase}_variants.json" > "$OUT/large_${phase}.txt" 2>&1 || status=1
    head -8 "$OUT/large_${phase}.txt"
done
timeout "$TIMEOUT_STEP" "$PYTHON" bench/modernbert_step.py --device cuda --precision bf16 --batch 16 --rounds 5 \
    > "$OUT/modernbert_step.txt" 2>&1 || status=1
cat "$OUT/modernbert_step.txt"
exit $status
