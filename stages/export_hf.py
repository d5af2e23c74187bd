"""Stage export_hf: the final phase-2 model as a Hugging Face directory (an MLM-only one, from
examples.next_sentence: false, is what transformers loads as BertForMaskedLM).

    python -m stages.export_hf

data/models/phase2 -> data/weights/phase2 (where finetune.init: phase2 starts from; config.json, model.safetensors, vocab.txt, tokenizer_config.json
with do_lower_case from params.vocab.lower_case), then reloaded and compared, so a broken export fails here.
"""

import logging
from pathlib import Path

import torch

from bert.errors import UserError, run_main
from bert.model.network import BertForPreTraining
from stages import layout
from stages.params import load_params

log = logging.getLogger("export_hf")
SOURCE, TARGET = layout.model("phase2"), layout.weights("phase2")


def main() -> None:
    params = load_params()
    if not (SOURCE / "config.json").is_file():
        raise UserError(f"{SOURCE}: no model; run the pretrain_phase2 stage first")
    vocab_file = SOURCE / "vocab.txt"
    if not vocab_file.is_file():
        raise UserError(
            f"{vocab_file}: missing; re-run pretrain_phase2 (it saves the vocabulary with the model)"
        )
    model = BertForPreTraining.from_pretrained(SOURCE, next_sentence=params.examples.next_sentence)
    model.save_pretrained(TARGET, vocab_file=vocab_file, lower_case=params.vocab.lower_case)
    check_reloads(model, TARGET)
    log.info("wrote %s (%.1fM parameters)", TARGET, model.num_parameters() / 1e6)


def check_reloads(model: BertForPreTraining, directory: Path) -> None:
    """The exported directory gives the same outputs as the model it came from."""
    reloaded = BertForPreTraining.from_pretrained(directory, next_sentence=model.nsp_classifier is not None)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, model.config.vocab_size, (2, 12), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    attention_mask = torch.ones_like(input_ids)
    positions = torch.tensor([[1, 4, 0], [2, 3, 7]])
    with torch.no_grad():
        want = model.eval()(input_ids, token_type_ids, attention_mask, positions)
        got = reloaded.eval()(input_ids, token_type_ids, attention_mask, positions)
    same_nsp = want.nsp_logits is None or torch.equal(want.nsp_logits, got.nsp_logits)  # None: MLM only
    if not (torch.equal(want.mlm_logits, got.mlm_logits) and same_nsp):
        raise UserError(f"{directory}: the exported model does not reproduce {SOURCE}'s outputs")


if __name__ == "__main__":
    run_main(main)
