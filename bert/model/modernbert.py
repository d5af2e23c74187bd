"""ModernBERT (Warner et al., 2024) in one file, written to be read beside bert/model/network.py.

    tokens ─► word embeddings ─► LayerNorm ─► dropout
           ─► L x encoder layer:  x = x + Attention(LN(x));  x = x + W_o·(gelu(W_v·LN(x)) * W_g·LN(x))
                                  (pre-LayerNorm; layer 0 has no attention norm: the embeddings' comes just before)
           ─► final LayerNorm ─► sequence_output [N, S, H]

What differs from BERT: no position or token-type embeddings, rotary positions in attention instead
(queries and keys turned by angles that grow with the position, θ = global_rope_theta in global
layers, local_rope_theta in local ones); every global_attn_every_n_layers-th layer attends over the
whole sequence, the others within a window (a token sees those at most local_attention // 2 away);
GeGLU feed-forward (two input projections, one gating the other); LayerNorms and linear layers
without biases unless config.json asks for them (norm_bias, attention_bias, mlp_bias); no pooler
and no next-sentence head.

As in bert/model/network.py, the padded path runs on [N, S] batches with a mask (for local layers
the band of the window, and padding); the unpadded path (`unpad=True`) packs the real tokens into
[T, H], turns each by its position within its own sequence, and attends within each sequence (flash
attention's variable-length kernel on CUDA for global layers; one banded call per sequence
otherwise); the outputs are scattered back to [N, S, H].

Heads, as transformers' ModernBert* classes have them, so that outputs are the same: the masked LM
(`ModernBertForMaskedLM`: dense, activation, LayerNorm, then the decoder tied to the word
embeddings with its own bias), extractive QA (the same dense-activation-norm head on every token,
then a start and an end logit), sequence classification or regression (that head on the pooled
sequence: its first token, or the mean of its real tokens, by classifier_pooling) and multiple
choice. `bert/model/modernbert_hf.py` maps the parameter names to transformers'.
"""

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from bert.errors import UserError
from bert.model import modernbert_hf
from bert.model.config import GLOBAL, LOCAL, MODERNBERT_ACTIVATIONS, ModernBertConfig
from bert.model.network import (
    ClassificationOutput,
    PackedSequences,
    PreTrainingOutput,
    QuestionAnsweringOutput,
    classification_loss,
    gather_rows,
    packed_attention,
    span_loss,
)

ACTIVATION_FUNCTIONS = {
    "gelu": F.gelu,
    "gelu_new": partial(F.gelu, approximate="tanh"),
    "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}
assert set(ACTIVATION_FUNCTIONS) == set(MODERNBERT_ACTIVATIONS)


def layer_norm(config: ModernBertConfig) -> nn.LayerNorm:
    return nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)


# ---------------------------------------------------------------------------------------------
# Rotary positions


def rotary_tables(positions: torch.Tensor, head_size: int, theta: float, dtype: torch.dtype):
    """cos and sin [..., head_size] of the angles position x θ^(-2i/head_size), each frequency
    written twice (for both halves of a head), in float32 and then cast to `dtype` (transformers'
    rounding, so the results match under autocast too)."""
    inverse_frequencies = 1.0 / (
        theta ** (torch.arange(0, head_size, 2, dtype=torch.float, device=positions.device) / head_size)
    )
    angles = positions[..., None].float() * inverse_frequencies
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def turn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * cos + (-second, first) * sin over the last dimension (halves first and second): each
    pair (x_i, x_{i + d/2}) turned by its angle, written in three passes (no concatenated copy)."""
    half = x.shape[-1] // 2
    turned = x * cos
    turned[..., :half].addcmul_(x[..., half:], sin[..., :half], value=-1)
    turned[..., half:].addcmul_(x[..., :half], sin[..., half:])
    return turned


class Rotate(torch.autograd.Function):
    """Turn each pair (x_i, x_{i + d/2}) of the head dimension by its angle, in float32. Its own
    backward, the turn back by the same angles, saves autograd the graph of the elementwise ops
    (their intermediates and one kernel each): rotary positions were a fifth of a CPU step."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cos, sin)
        return turn(x.float(), cos, sin).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, sin = ctx.saved_tensors
        return turn(grad.float(), cos, -sin).to(grad.dtype), None, None


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., head_size] turned by its positions' angles, cos and sin broadcasting against it."""
    return Rotate.apply(x, cos, sin)


# ---------------------------------------------------------------------------------------------
# Encoder


class Attention(nn.Module):
    def __init__(self, config: ModernBertConfig, local: bool):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.local = local
        self.window_radius = config.window_radius
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.out = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_p = config.attention_dropout
        self.out_dropout = nn.Dropout(config.attention_dropout)

    def forward(
        self, x: torch.Tensor, mask: "torch.Tensor | WindowChunks | PackedSequences | None", rotary
    ) -> torch.Tensor:
        """x: [N, S, H] with its boolean mask [N, 1, S or 1, S] (True = attend) or, for a local
        layer, its WindowChunks; or packed [T, H] with its PackedSequences. rotary: the (cos, sin)
        of every token's position."""
        dropout_p = self.dropout_p if self.training else 0.0
        # [..., 3H] -> queries and keys [..., 2, heads, head_size], turned together (one angle per
        # token, the same for every head), and values [..., heads, head_size]
        qk, v = self.qkv(x).unflatten(-1, (3, self.num_heads, -1)).split((2, 1), dim=-3)
        cos, sin = (table[..., None, None, :] for table in rotary)
        (q, k), v = rotate(qk, cos, sin).unbind(-3), v.squeeze(-3)
        if isinstance(mask, PackedSequences):
            if self.local:
                y = banded_packed_attention(q, k, v, mask, self.window_radius, dropout_p)
            else:
                y = packed_attention(q, k, v, mask, dropout_p, jagged=x.is_cuda)
            return self.out_dropout(self.out(y.flatten(-2)))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [N, heads, S, head_size]
        if isinstance(mask, WindowChunks):
            y = chunked_window_attention(q, k, v, mask, dropout_p)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return self.out_dropout(self.out(y.transpose(1, 2).flatten(2)))


def band(length: int, radius: int, device: torch.device) -> torch.Tensor:
    """[length, length] True where query i may see key j in a local layer: |i - j| <= radius."""
    positions = torch.arange(length, device=device)
    return (positions[:, None] - positions[None, :]).abs() <= radius


@dataclass
class WindowChunks:
    """A local layer's attention on a padded [N, S] batch in chunks: the queries of each chunk of
    `size` tokens attend to the keys of that chunk widened by `radius` on each side, not to all S,
    so attention costs S x (size + 2 radius), not S². `mask` [N x chunks, 1, size, size + 2 radius]
    (True = attend): the window's band, the real keys, and each query itself (no empty row)."""

    size: int
    radius: int
    count: int  # chunks: ceil(S / size)
    mask: torch.Tensor

    @classmethod
    def from_mask(
        cls, attention_mask: torch.Tensor | None, n: int, s: int, radius: int, device
    ) -> "WindowChunks":
        size = max(radius, 1)
        count = -(-s // size)
        end_padding = count * size - s
        real = (
            torch.ones(n, s, dtype=torch.bool, device=device)
            if attention_mask is None
            else attention_mask.bool()
        )
        # [N, chunks, size + 2 radius]: whether each key of each chunk's widened span is a real token
        real_keys = F.pad(real, (radius, radius + end_padding), value=False).unfold(
            1, size + 2 * radius, size
        )
        query = torch.arange(size, device=device)[:, None]
        key = torch.arange(size + 2 * radius, device=device)[None, :]
        offset = key - query  # key position - query position + radius
        in_window = (offset >= 0) & (offset <= 2 * radius)
        itself = offset == radius
        mask = in_window & (real_keys[:, :, None, :] | itself)  # [N, chunks, size, size + 2 radius]
        return cls(size, radius, count, mask.flatten(0, 1)[:, None])


def chunked_window_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunks: WindowChunks, dropout_p: float
) -> torch.Tensor:
    """Sliding-window attention of [N, heads, S, head_size] queries, keys and values in chunks
    (WindowChunks): the same result as a dense SDPA with the band mask, at a fraction of its cost
    when the window is much shorter than the sequence. -> [N, heads, S, head_size]."""
    n, heads, s, d = q.shape
    size, radius, count = chunks.size, chunks.radius, chunks.count
    end_padding = count * size - s
    # [N x chunks, heads, size, d]: each chunk's queries
    q = F.pad(q, (0, 0, 0, end_padding)).view(n, heads, count, size, d).transpose(1, 2).flatten(0, 1)
    # [N x chunks, heads, size + 2 radius, d]: the keys and values of each chunk's widened span
    k, v = (
        F.pad(x, (0, 0, radius, radius + end_padding))
        .unfold(2, size + 2 * radius, size)  # [N, heads, chunks, d, span]
        .permute(0, 2, 1, 4, 3)
        .flatten(0, 1)
        for x in (k, v)
    )
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=chunks.mask, dropout_p=dropout_p)
    return y.view(n, count, heads, size, d).transpose(1, 2).reshape(n, heads, count * size, d)[:, :, :s]


def banded_packed_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packed: PackedSequences, radius: int, dropout_p: float
) -> torch.Tensor:
    """A local layer's attention of packed [T, heads, head_size] tokens: within each sequence,
    within the window. One SDPA call per sequence (its band as the mask; none where the whole
    sequence fits in the window), as packed_attention does on CPU."""
    per_sequence = zip(*(x.transpose(0, 1).contiguous().split(packed.lengths, dim=1) for x in (q, k, v)))
    outputs = []
    for parts in per_sequence:
        length = parts[0].shape[1]
        mask = band(length, radius, q.device) if length > radius + 1 else None
        outputs.append(F.scaled_dot_product_attention(*parts, attn_mask=mask, dropout_p=dropout_p))
    return torch.cat(outputs, dim=1).transpose(0, 1)


class EncoderLayer(nn.Module):
    def __init__(self, config: ModernBertConfig, index: int):
        super().__init__()
        self.kind = config.layer_types[index]
        # Layer 0's input is the embeddings' LayerNorm output already: no second norm (as released).
        self.attention_norm = layer_norm(config) if index > 0 else nn.Identity()
        self.attention = Attention(config, local=self.kind == LOCAL)
        self.mlp_norm = layer_norm(config)
        # GeGLU: one projection to 2I, split into the value and its gate.
        self.mlp_in = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.act = ACTIVATION_FUNCTIONS[config.hidden_activation]
        self.mlp_dropout = nn.Dropout(config.mlp_dropout)
        self.mlp_out = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor, masks: dict, rotary: dict) -> torch.Tensor:
        """x: [N, S, H] or packed [T, H] -> the same shape; masks and rotary by layer kind."""
        x = x + self.attention(self.attention_norm(x), masks[self.kind], rotary[self.kind])
        value, gate = self.mlp_in(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.mlp_out(self.mlp_dropout(self.act(value) * gate))


def draw(linear: nn.Module, std: float, config: ModernBertConfig) -> None:
    """transformers' initialisation of a ModernBERT weight: normal, truncated at
    initializer_cutoff_factor standard deviations; a zero bias."""
    cutoff = config.initializer_cutoff_factor * std
    nn.init.trunc_normal_(linear.weight, std=std, a=-cutoff, b=cutoff)
    if getattr(linear, "bias", None) is not None:
        nn.init.zeros_(linear.bias)


def init_encoder(model: "ModernBertModel") -> None:
    """std initializer_range for the embeddings and the input projections, that / sqrt(2 L) for
    the projections back into the residual stream; LayerNorms start as the identity (their own)."""
    config = model.config
    std = config.initializer_range
    draw(model.embeddings.word_embeddings, std, config)
    for layer in model.layers:
        draw(layer.attention.qkv, std, config)
        draw(layer.attention.out, std / math.sqrt(2.0 * config.num_hidden_layers), config)
        draw(layer.mlp_in, std, config)
        draw(layer.mlp_out, std / math.sqrt(2.0 * config.num_hidden_layers), config)


def init_head(head: "PredictionHead", classifier: nn.Linear | None, config: ModernBertConfig) -> None:
    """The head's dense layer as an output projection; a task classifier with std 1 / sqrt(H)."""
    draw(head.dense, config.initializer_range / math.sqrt(2.0 * config.num_hidden_layers), config)
    if classifier is not None:
        draw(classifier, config.hidden_size**-0.5, config)


class Embeddings(nn.Module):
    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.norm = layer_norm(config)
        self.dropout = nn.Dropout(config.embedding_dropout)
        # Whether the lookup's gradient is sparse (ModernBertForMaskedLM's tied decoder). Not
        # nn.Embedding's own `sparse`: DDP would then expect a sparse gradient for the weight, whose
        # gradient is the decoder's dense one with these rows added.
        self.sparse_lookup_grad = False

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        # (dense while torch.compile traces: inductor takes no sparse tensors)
        sparse = self.sparse_lookup_grad and not torch.compiler.is_compiling()
        lookup = F.embedding(input_ids, self.word_embeddings.weight, sparse=sparse)
        return self.dropout(self.norm(lookup))


class ModernBertPreTrainedModel(nn.Module):
    """What the models share: their config, parameter count and Hugging Face I/O."""

    config: ModernBertConfig

    def num_parameters(self) -> int:
        """Number of distinct parameters (the tied MLM decoder counts once)."""
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def from_pretrained(cls, directory, **kwargs):
        """Load a Hugging Face ModernBERT folder (config.json + model.safetensors), as
        transformers' ModernBert*.from_pretrained; see modernbert_hf.load_pretrained."""
        return modernbert_hf.load_pretrained(cls, directory, **kwargs)

    def save_pretrained(
        self,
        directory,
        vocab_file=None,
        lower_case: bool = True,
        label_names: tuple[str, ...] | None = None,
        carried: dict | None = None,
    ) -> None:
        """Write a folder that transformers' matching ModernBert* class loads with the same outputs
        (the arguments of BertPreTrainedModel.save_pretrained; `carried` is always empty here:
        ModernBERT's objective trains every tensor of its pretraining model)."""
        if carried:
            raise ValueError(f"nothing to carry for {type(self).__name__}, given {', '.join(carried)}")
        modernbert_hf.save_pretrained(self, directory, vocab_file, lower_case, label_names)


class ModernBertModel(ModernBertPreTrainedModel):
    def __init__(self, config: ModernBertConfig, unpad: bool = False):
        super().__init__()
        self.config = config
        self.unpad = unpad  # run the encoder on packed real tokens
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = layer_norm(config)
        self.thetas = {GLOBAL: config.global_rope_theta, LOCAL: config.local_rope_theta}
        init_encoder(self)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        output_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """input_ids, attention_mask: [N, S] (mask 1 = real token, 0 = padding) -> sequence_output
        [N, S, H] after the final norm (zeros at padding on the unpadded path); given
        `output_positions` [N, Q], only those rows, [N, Q, H] (on the padded path the final norm
        runs on them only)."""
        n, s = input_ids.shape
        if s > self.config.max_position_embeddings:
            raise UserError(
                f"sequence length {s} exceeds max_position_embeddings "
                f"{self.config.max_position_embeddings} of the model config"
            )
        if self.unpad and attention_mask is not None:
            packed = PackedSequences.from_mask(attention_mask)
            positions = packed.indices % s  # each token's position within its own sequence
            x = self.embeddings(input_ids.flatten()[packed.indices])
            x = self.final_norm(self.run_layers(x, {GLOBAL: packed, LOCAL: packed}, positions))
            x = x.new_zeros(n * s, x.shape[1]).index_copy(0, packed.indices, x).view(n, s, -1)
            return x if output_positions is None else gather_rows(x, output_positions)
        x = self.embeddings(input_ids)
        x = self.run_layers(
            x, self.padded_masks(attention_mask, n, s, x.device), torch.arange(s, device=x.device)
        )
        if output_positions is not None:
            x = gather_rows(x, output_positions)
        return self.final_norm(x)

    def run_layers(self, x: torch.Tensor, masks: dict, positions: torch.Tensor) -> torch.Tensor:
        """The encoder layers, with each kind's rotary tables computed once for all its layers."""
        head_size = self.config.head_size
        rotary = {
            kind: rotary_tables(positions, head_size, theta, x.dtype) for kind, theta in self.thetas.items()
        }
        for layer in self.layers:
            x = layer(x, masks, rotary)
        return x

    def padded_masks(self, attention_mask: torch.Tensor | None, n: int, s: int, device: torch.device) -> dict:
        """Each kind's boolean attention mask (True = attend) for a padded [N, S] batch. Global:
        the real keys [N, 1, 1, S]. Local: those within the window; a padding query far from every
        real key also sees itself, so that no row is empty (an empty row is NaN, and NaN at a
        padding key would leak through the next layer's zero weights). On CUDA where the window is
        short against the sequence, in chunks (WindowChunks); else one [N, 1, S, S] mask."""
        radius = self.config.window_radius
        # No padding: global layers attend without a mask (a faster kernel). Not read while
        # torch.compile traces: a branch on the mask's values would break its graph.
        if attention_mask is not None and not torch.compiler.is_compiling() and bool(attention_mask.all()):
            attention_mask = None
        # In chunks on CUDA where their keys (size + 2 radius) are at most half the sequence: the
        # dense mask's memory grows with S². On CPU the dense band mask measured faster, even at
        # 1,024 tokens against a 128-token window (docs/performance.md).
        if device.type == "cuda" and 2 * (3 * max(radius, 1)) <= s:
            return {
                GLOBAL: None if attention_mask is None else attention_mask.bool()[:, None, None, :],
                LOCAL: WindowChunks.from_mask(attention_mask, n, s, radius, device),
            }
        window = band(s, radius, device)
        if attention_mask is None:
            return {GLOBAL: None, LOCAL: window}
        real_keys = attention_mask.bool()[:, None, None, :]
        itself = torch.eye(s, dtype=torch.bool, device=device)
        return {GLOBAL: real_keys, LOCAL: window & (real_keys | itself)}


class PredictionHead(nn.Module):
    """dense -> activation -> LayerNorm, before the decoder or a task classifier (transformers'
    ModernBertPredictionHead)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = ACTIVATION_FUNCTIONS[config.classifier_activation]
        self.norm = layer_norm(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(x)))


# ---------------------------------------------------------------------------------------------
# Heads. Their forward takes the arguments of bert.model.network's heads, in the same order, so
# that the training code calls either family alike; token_type_ids is accepted and not read
# (ModernBERT has no token types, and its tokenizers give none).


class ModernBertForMaskedLM(ModernBertPreTrainedModel):
    """The masked LM, ModernBERT's only pretraining objective (no next-sentence prediction)."""

    def __init__(self, config: ModernBertConfig, unpad: bool = False):
        super().__init__()
        self.config = config
        self.model = ModernBertModel(config, unpad=unpad)
        self.head = PredictionHead(config)
        # The decoder's weight is the word embedding matrix; only its bias is the head's own.
        self.decoder_bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.decoder_bias else None
        # The lookup's gradient sparse: the engine then adds its rows to the decoder's dense gradient
        # (one copy) instead of zero-filling a [vocabulary, H] gradient of its own and summing the two.
        self.model.embeddings.sparse_lookup_grad = True
        init_head(self.head, None, config)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        attention_mask: torch.Tensor,
        masked_lm_positions: torch.Tensor,
        masked_lm_ids: torch.Tensor | None = None,
        next_sentence_labels: torch.Tensor | None = None,
    ) -> PreTrainingOutput:
        """masked_lm_positions / masked_lm_ids: [N, P] as in the HDF5 shards; a slot is used
        where its position is not 0 (position 0 holds [CLS], which is never masked). The final
        norm, the head and the vocabulary projection run on the masked tokens only."""
        if next_sentence_labels is not None:
            raise UserError("next-sentence labels given to ModernBERT, which has no next-sentence head")
        masked_output = self.model(input_ids, attention_mask, output_positions=masked_lm_positions)
        used = masked_lm_positions != 0
        hidden = self.head(masked_output[used])  # [M, H], in row-major slot order
        mlm_logits = F.linear(hidden, self.model.embeddings.word_embeddings.weight, self.decoder_bias)
        mlm_labels = mlm_loss = None
        if masked_lm_ids is not None:
            mlm_labels = masked_lm_ids[used].long()
            mlm_loss = F.cross_entropy(mlm_logits.float(), mlm_labels)
        return PreTrainingOutput(mlm_loss, mlm_loss, None, mlm_logits, mlm_labels, None)


class ModernBertTaskModel(ModernBertPreTrainedModel):
    """The encoder, the prediction head, dropout and a linear classifier of `outputs` scores per
    row: what the fine-tuning heads share (transformers' names, so their tensors keep them)."""

    def __init__(self, config: ModernBertConfig, outputs: int, unpad: bool = False):
        super().__init__()
        self.config = config
        self.model = ModernBertModel(config, unpad=unpad)
        self.head = PredictionHead(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, outputs)
        init_head(self.head, self.classifier, config)

    def scores(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] encoder rows -> [..., outputs]."""
        return self.classifier(self.dropout(self.head(hidden)))


class ModernBertForQuestionAnswering(ModernBertTaskModel):
    def __init__(self, config: ModernBertConfig, unpad: bool = False):
        super().__init__(config, 2, unpad)  # a start and an end logit per token

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        attention_mask: torch.Tensor,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
    ) -> QuestionAnsweringOutput:
        sequence_output = self.model(input_ids, attention_mask)
        start_logits, end_logits = self.scores(sequence_output).unbind(-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, attention_mask, start_positions, end_positions)
        return QuestionAnsweringOutput(loss, start_logits, end_logits)


def pooled_sequence(
    model: ModernBertModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    cls_at_first_real: bool = False,
) -> torch.Tensor:
    """[N, H] per sequence by classifier_pooling: its first token ("cls"; only that row through
    the final norm), or the mean of its real tokens ("mean"). `cls_at_first_real`: the "cls" row is
    each sequence's first real token, not position 0 (the same where padding is on the right, as
    ours always is; transformers' multiple-choice class pools so, its sequence classifier not)."""
    if model.config.classifier_pooling == "cls":
        first = attention_mask.argmax(-1) if cls_at_first_real else input_ids.new_zeros(len(input_ids))
        return model(input_ids, attention_mask, output_positions=first[:, None])[:, 0]
    mask = attention_mask[:, :, None].to(torch.float32)
    return (model(input_ids, attention_mask) * mask).sum(1) / mask.sum(1)


class ModernBertForSequenceClassification(ModernBertTaskModel):
    """A label per sequence (or pair), or one real number (num_labels=1, a regression), from the
    pooled sequence through the prediction head (as transformers' class)."""

    def __init__(self, config: ModernBertConfig, num_labels: int, unpad: bool = False):
        if num_labels < 1:
            raise UserError(f"num_labels is {num_labels}; a classifier needs at least 1 (1 = regression)")
        super().__init__(config, num_labels, unpad)
        self.num_labels = num_labels

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> ClassificationOutput:
        pooled = pooled_sequence(self.model, input_ids, attention_mask)
        logits = self.scores(pooled)
        return ClassificationOutput(None if labels is None else classification_loss(logits, labels), logits)


class ModernBertForMultipleChoice(ModernBertTaskModel):
    """One of C candidates per example: each (context, candidate) sequence scored by one logit
    from its pooled sequence; the softmax runs over the C scores."""

    def __init__(self, config: ModernBertConfig, unpad: bool = False):
        super().__init__(config, 1, unpad)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> ClassificationOutput:
        """input_ids, attention_mask: [N, C, S]; labels [N]: the right choice."""
        n, c, _ = input_ids.shape
        pooled = pooled_sequence(
            self.model, input_ids.flatten(0, 1), attention_mask.flatten(0, 1), cls_at_first_real=True
        )
        logits = self.scores(pooled).view(n, c)
        loss = None if labels is None else F.cross_entropy(logits.float(), labels.long().view(-1))
        return ClassificationOutput(loss, logits)
