"""ModernBERT against transformers' own implementation, both ways (CPU, fp32, eval mode): folders
made by transformers load into ours with the same hidden states and MLM logits, padded and
unpadded; every model we save loads in transformers' matching ModernBert* class with our outputs.
Tiny random configs of several shapes, sequences longer than the local window, ragged batches."""

import json

import pytest
import torch

from bert.errors import UserError
from bert.model import family
from bert.model.config import ModernBertConfig, resolve_config
from bert.model.modernbert import (
    ModernBertForMaskedLM,
    ModernBertForMultipleChoice,
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
    ModernBertModel,
)
from bert.model.modernbert_hf import hf_name
from bert.model.network import BertForPreTraining
from bert.model.presets import MODERNBERT_PRESETS, SIZES

transformers = pytest.importorskip("transformers")
torch.set_num_threads(2)

SPECIAL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
# Sequences of 24 tokens against windows of 6 to 16: the local layers see a band, not everything.
SHAPES = {
    "biases, global every 2nd, cls": dict(
        num_hidden_layers=4, global_attn_every_n_layers=2, local_attention=8, norm_bias=True,
        attention_bias=True, mlp_bias=True, classifier_bias=True, classifier_pooling="cls",
    ),
    "no biases, global every 3rd, mean": dict(
        num_hidden_layers=4, global_attn_every_n_layers=3, local_attention=6, classifier_pooling="mean",
        decoder_bias=False, global_rope_theta=1000.0, local_rope_theta=50.0,
    ),
    "tanh gelu, one global layer, mean": dict(
        num_hidden_layers=3, global_attn_every_n_layers=4, local_attention=16, classifier_pooling="mean",
        hidden_activation="gelu_pytorch_tanh", classifier_activation="silu", norm_bias=True,
    ),
}  # fmt: skip
TINY = dict(
    vocab_size=97, hidden_size=32, intermediate_size=40, num_attention_heads=4, max_position_embeddings=64
)


def hf_config(shape: str, **extra):
    return transformers.ModernBertConfig(
        **TINY, **SPECIAL, **SHAPES[shape], attn_implementation="sdpa", **extra
    )


def ragged_batch(rows=3, length=24, seed=0):
    """Token ids [rows, length] and a right-padded mask: one full row, one half, one short."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, TINY["vocab_size"], (rows, length), generator=generator)
    mask = torch.ones_like(input_ids)
    for row, real in enumerate([length, length // 2 + 1, 5][:rows]):
        mask[row, real:] = 0
        input_ids[row, real:] = 0
    return input_ids, mask


def perturbed(model, seed=1):
    """Every parameter moved off its initialisation (LayerNorms off 1 and 0, biases off 0), so that a
    parameter read from the wrong place shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def hf_names(tensors: dict) -> dict:
    return {hf_name(name): tensor for name, tensor in tensors.items()}


@pytest.fixture(scope="module", params=list(SHAPES))
def transformers_folder(request, tmp_path_factory):
    """A ModernBertForMaskedLM made and saved by transformers, and the transformers model."""
    torch.manual_seed(0)
    model = perturbed(transformers.ModernBertForMaskedLM(hf_config(request.param)))
    folder = tmp_path_factory.mktemp("hf") / "modernbert"
    model.save_pretrained(folder)
    return folder, model


@pytest.mark.parametrize("unpad", [False, True], ids=["padded", "unpadded"])
def test_a_transformers_folder_gives_its_hidden_states_and_mlm_logits(transformers_folder, unpad):
    folder, theirs = transformers_folder
    ours = ModernBertForMaskedLM.from_pretrained(folder, unpad=unpad)
    input_ids, mask = ragged_batch()
    real = mask.bool()
    with torch.no_grad():
        want_hidden = theirs.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        want_logits = theirs(input_ids=input_ids, attention_mask=mask).logits
        got_hidden = ours.model(input_ids, mask)
        # every real token but [CLS] as a masked position: the MLM head on all of them
        positions = torch.arange(1, input_ids.shape[1]).repeat(len(input_ids), 1) * mask[:, 1:]
        got_logits = ours(input_ids, None, mask, positions).mlm_logits
    torch.testing.assert_close(got_hidden[real], want_hidden[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(got_logits, want_logits[:, 1:][real[:, 1:]], atol=1e-5, rtol=0)
    if unpad:
        assert not got_hidden[~real].any()  # padding comes back as zeros


def our_outputs(model, input_ids, mask):
    with torch.no_grad():
        if isinstance(model, ModernBertModel):
            return [model(input_ids, mask)]
        if isinstance(model, ModernBertForQuestionAnswering):
            output = model(input_ids, None, mask)
            return [output.start_logits, output.end_logits]
        return [model(input_ids, None, mask).logits]


def their_outputs(model, input_ids, mask):
    with torch.no_grad():
        output = model(input_ids=input_ids, attention_mask=mask)
    if isinstance(model, transformers.ModernBertModel):
        return [output.last_hidden_state]
    if isinstance(model, transformers.ModernBertForQuestionAnswering):
        return [output.start_logits, output.end_logits]
    return [output.logits]


HEADS = {
    "encoder": (lambda config: ModernBertModel(config), "ModernBertModel"),
    "question answering": (lambda config: ModernBertForQuestionAnswering(config), "ModernBertForQuestionAnswering"),
    "classification": (lambda config: ModernBertForSequenceClassification(config, 3), "ModernBertForSequenceClassification"),
    "regression": (lambda config: ModernBertForSequenceClassification(config, 1), "ModernBertForSequenceClassification"),
    "multiple choice": (lambda config: ModernBertForMultipleChoice(config), "ModernBertForMultipleChoice"),
}  # fmt: skip


@pytest.mark.parametrize("shape", list(SHAPES)[:2])
@pytest.mark.parametrize("head", list(HEADS))
def test_what_we_save_loads_in_transformers_with_our_outputs(tmp_path, shape, head):
    config = ModernBertConfig(**TINY, **SPECIAL, **SHAPES[shape])
    build, their_class = HEADS[head]
    torch.manual_seed(0)
    ours = perturbed(build(config))
    ours.save_pretrained(tmp_path / "ours")
    theirs = (
        getattr(transformers, their_class)
        .from_pretrained(tmp_path / "ours", attn_implementation="sdpa")
        .eval()
    )
    input_ids, mask = ragged_batch()
    if head == "multiple choice":  # two examples of three choices each
        other_ids, other_mask = ragged_batch(seed=1)
        input_ids, mask = torch.stack([input_ids, other_ids]), torch.stack([mask, other_mask.flip(0)])
    want = our_outputs(ours, input_ids, mask)
    got = their_outputs(theirs, input_ids, mask)
    real = mask.bool()
    for mine, their in zip(want, got, strict=True):
        if mine.shape[:2] == real.shape:  # per-token outputs: padding is no one's answer
            mine, their = mine[real], their[real]
        torch.testing.assert_close(their, mine, atol=1e-5, rtol=0)
    # and our own reload gives the same
    again = type(ours).from_pretrained(tmp_path / "ours")
    for mine, reloaded in zip(want, our_outputs(again, input_ids, mask), strict=True):
        torch.testing.assert_close(reloaded, mine, atol=0, rtol=0)


def test_multiple_choice_pools_the_first_real_token_of_left_padded_choices(tmp_path):
    """classifier_pooling "cls": transformers' multiple-choice class pools each choice's first real
    token (its sequence classifier, position 0); with padding on the left they differ."""
    config = ModernBertConfig(**TINY, **SPECIAL, **SHAPES["biases, global every 2nd, cls"])
    torch.manual_seed(0)
    ours = perturbed(ModernBertForMultipleChoice(config))
    ours.save_pretrained(tmp_path / "ours")
    theirs = transformers.ModernBertForMultipleChoice.from_pretrained(
        tmp_path / "ours", attn_implementation="sdpa"
    )
    input_ids, mask = (tensor.flip(-1)[None] for tensor in ragged_batch())  # one example, three choices
    with torch.no_grad():
        got = ours(input_ids, None, mask).logits
        want = theirs.eval()(input_ids=input_ids, attention_mask=mask).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_our_masked_lm_loads_in_transformers_with_our_logits(tmp_path):
    config = ModernBertConfig(**TINY, **SPECIAL, **SHAPES["no biases, global every 3rd, mean"])
    torch.manual_seed(0)
    ours = perturbed(ModernBertForMaskedLM(config))
    ours.save_pretrained(tmp_path / "mlm")
    saved = json.loads((tmp_path / "mlm" / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and saved["architectures"] == ["ModernBertForMaskedLM"]
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(
        tmp_path / "mlm", attn_implementation="sdpa"
    ).eval()
    assert theirs.config.layer_types == config.layer_types
    input_ids, mask = ragged_batch()
    positions = torch.tensor([[3, 9, 20], [1, 12, 0], [4, 0, 0]])
    with torch.no_grad():
        got = ours(input_ids, None, mask, positions).mlm_logits
        want = theirs(input_ids=input_ids, attention_mask=mask).logits
    rows = torch.arange(3)[:, None].expand_as(positions)[positions != 0]
    torch.testing.assert_close(got, want[rows, positions[positions != 0]], atol=1e-5, rtol=0)


@pytest.mark.parametrize("rows", [3, 1], ids=["ragged", "unpadded batch"])
def test_both_paths_train_as_transformers(rows):
    """The MLM loss's gradients, ours padded and unpadded against transformers' on the same
    weights: our rotary positions and the unmasked global layers of a batch without padding have
    backward passes of their own."""
    config = ModernBertConfig(**TINY, **SPECIAL, **SHAPES["biases, global every 2nd, cls"])
    torch.manual_seed(0)
    padded = perturbed(ModernBertForMaskedLM(config)).train()
    unpadded = ModernBertForMaskedLM(config, unpad=True)
    unpadded.load_state_dict(padded.state_dict())
    theirs = transformers.ModernBertForMaskedLM(hf_config("biases, global every 2nd, cls")).train()
    theirs.load_state_dict(hf_names(padded.state_dict()), strict=False)  # its decoder is tied
    input_ids, mask = ragged_batch(rows)
    positions = torch.tensor([[3, 9, 20], [1, 12, 0], [4, 0, 0]])[:rows]
    labels = torch.tensor([[5, 6, 7], [8, 9, 0], [10, 0, 0]])[:rows]
    for model in (padded, unpadded):
        model(input_ids, None, mask, positions, labels).loss.backward()
    dense_labels = torch.full_like(input_ids, -100).scatter(1, positions, labels)
    dense_labels[:, 0] = -100  # slot position 0 is unused
    theirs(input_ids=input_ids, attention_mask=mask, labels=dense_labels).loss.backward()
    want = dict(theirs.named_parameters())
    for model in (padded, unpadded):
        for name, parameter in hf_names(dict(model.named_parameters())).items():
            torch.testing.assert_close(parameter.grad, want[name].grad, atol=1e-5, rtol=1e-4, msg=name)


def test_the_old_and_new_config_spellings_are_one_config(tmp_path):
    """transformers 4 wrote thetas and global_attn_every_n_layers; 5 writes rope_parameters and layer_types."""
    new = hf_config("no biases, global every 3rd, mean").to_dict()
    old = {key: value for key, value in new.items() if key not in ("layer_types", "rope_parameters")}
    old.update(global_rope_theta=1000.0, local_rope_theta=50.0)
    assert ModernBertConfig.from_dict(new) == ModernBertConfig.from_dict(old)
    config = ModernBertConfig.from_dict(new)
    assert config.layer_types == [
        "full_attention",
        "sliding_attention",
        "sliding_attention",
        "full_attention",
    ]
    assert (config.global_rope_theta, config.local_rope_theta, config.window_radius) == (1000.0, 50.0, 3)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(local_attention=0), "local_attention is 0; it must be a whole number >= 1"),
        (dict(hidden_size=30), "hidden_size 30 / num_attention_heads 4 must be a whole, even head size"),
        (dict(classifier_pooling="max"), 'classifier_pooling is "max"; it must be "cls" or "mean"'),
        (dict(pad_token_id=97), "pad_token_id is 97; it must be a token id in [0, vocab_size 97)"),
        (dict(norm_bias="no"), 'norm_bias is "no"; it must be true or false'),
        (dict(layer_types=["full_attention"]), 'layer_types is ["full_attention"]; it must list 4'),
        (dict(rope_parameters={"full_attention": {"rope_type": "yarn"}}), 'rope_type is "yarn"; only'),
    ],
)
def test_a_bad_config_json_is_one_line_naming_it(tmp_path, change, message):
    values = {"model_type": "modernbert", **TINY, **SPECIAL, "num_hidden_layers": 4, **change}
    (tmp_path / "config.json").write_text(json.dumps(values))
    with pytest.raises(UserError) as error:
        resolve_config(tmp_path)
    assert str(error.value).startswith(f"{tmp_path / 'config.json'}: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_presets_and_model_size(tmp_path):
    with torch.device("meta"):  # shapes only
        base = family.fresh(resolve_config("modernbert-base", 50368), "encoder")
        large = family.fresh(resolve_config("modernbert-large", 50368), "encoder")
    # the released models' sizes (149M and 395M parameters)
    assert round(base.num_parameters() / 1e6) == 149 and round(large.num_parameters() / 1e6) == 395
    tiny = resolve_config("modernbert-tiny", 500)
    assert tiny.local_attention < 128 and "sliding_attention" in tiny.layer_types
    assert (tiny.pad_token_id, tiny.cls_token_id, tiny.sep_token_id) == (0, 2, 3)  # our WordPiece's
    assert set(MODERNBERT_PRESETS) == {"modernbert-tiny", "modernbert-base", "modernbert-large"}
    assert SIZES[:4] == ("tiny", "mini", "base", "large") and set(MODERNBERT_PRESETS) <= set(
        SIZES
    )  # model.size's check
    # a config.json (or its folder) picks its family by model_type; BERT stays the default
    hf_config("biases, global every 2nd, cls").save_pretrained(tmp_path)
    assert isinstance(resolve_config(tmp_path, 120), ModernBertConfig)
    assert resolve_config(tmp_path, 120).vocab_size == 120
    assert isinstance(family.fresh(resolve_config("tiny", 500), "pretraining"), BertForPreTraining)


@pytest.fixture(scope="module")
def our_folder(tmp_path_factory):
    config = ModernBertConfig(**TINY, **SPECIAL, **SHAPES["biases, global every 2nd, cls"])
    folder = tmp_path_factory.mktemp("ours") / "mlm"
    ModernBertForMaskedLM(config).save_pretrained(folder)
    return folder


def test_family_loads_a_folder_by_its_model_type(our_folder):
    model = family.from_pretrained(our_folder, "question_answering")
    assert isinstance(model, ModernBertForQuestionAnswering)
    assert torch.equal(
        model.head.dense.weight, ModernBertForMaskedLM.from_pretrained(our_folder).head.dense.weight
    )


def _rewrite(folder, tmp_path, edit_config=None, edit_weights=None):
    from safetensors.torch import load_file, save_file

    bad = tmp_path / "bad"
    bad.mkdir()
    values = json.loads((folder / "config.json").read_text())
    weights = load_file(folder / "model.safetensors")
    (bad / "config.json").write_text(json.dumps(edit_config(values) if edit_config else values))
    save_file(edit_weights(weights) if edit_weights else weights, bad / "model.safetensors")
    return bad


def _without(weights, name):
    del weights[name]
    return weights


@pytest.mark.parametrize(
    "edit_config, edit_weights, message",
    [
        (lambda v: {**v, "model_type": "bert"}, None, 'model_type is "bert", not "modernbert"'),
        (None, lambda w: _without(w, "model.layers.1.attn.Wqkv.weight"), "the weights lack 'model.layers.1.attn.Wqkv.weight'"),
        (None, lambda w: {**w, "model.layers.9.mlp.Wi.weight": torch.zeros(1)}, "hold 'model.layers.9.mlp.Wi.weight'"),
        (lambda v: {**v, "intermediate_size": 50}, None, "'model.layers.0.mlp.Wi.weight' has shape [80, 32], but config.json makes it [100, 32]"),
    ],
    ids=["model_type", "missing", "extra", "mis-shaped"],
)  # fmt: skip
def test_a_folder_that_is_not_a_modernbert_is_one_line_naming_it(
    our_folder, tmp_path, edit_config, edit_weights, message
):
    bad = _rewrite(our_folder, tmp_path, edit_config, edit_weights)
    with pytest.raises(UserError) as error:
        ModernBertForMaskedLM.from_pretrained(bad)
    assert str(bad) in str(error.value) and message in str(error.value)
    assert "\n" not in str(error.value)


def test_init_random_writes_a_modernbert_that_transformers_reads(tmp_path):
    """model.size: modernbert-tiny through the init_random stage's function: a ModernBERT over our
    WordPiece vocabulary, read by transformers' AutoModelForMaskedLM."""
    from stages.init_random import write_random_weights

    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(195))]) + "\n"
    )
    model = write_random_weights(tmp_path / "random", vocab, "modernbert-tiny", 0, True)
    assert isinstance(model, ModernBertForMaskedLM) and model.config.vocab_size == 200
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "random").eval()
    assert type(theirs).__name__ == "ModernBertForMaskedLM"
    assert (tmp_path / "random" / "vocab.txt").read_text() == vocab.read_text()


@pytest.mark.parametrize("radius", [1, 3, 5])
def test_chunked_local_attention_equals_the_dense_band(radius):
    """The chunked path (on CUDA where the window is short) against SDPA with the dense band mask,
    on a ragged batch whose length is no multiple of the chunk: the same outputs and gradients."""
    from bert.model.modernbert import WindowChunks, band, chunked_window_attention

    generator = torch.Generator().manual_seed(radius)
    q, k, v = (torch.randn(3, 2, 23, 4, generator=generator, requires_grad=True) for _ in range(3))
    _, mask = ragged_batch(length=23)
    real = mask.bool()
    dense_mask = band(23, radius, q.device) & (real[:, None, None, :] | torch.eye(23, dtype=torch.bool))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask)
    chunks = WindowChunks.from_mask(mask, 3, 23, radius, q.device)
    got = chunked_window_attention(q, k, v, chunks, 0.0)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    weights = torch.randn(want.shape, generator=generator) * real[:, None, :, None]  # real rows only
    want_grads = torch.autograd.grad((want * weights).sum(), (q, k, v))
    got_grads = torch.autograd.grad((got * weights).sum(), (q, k, v))
    for mine, theirs in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)
