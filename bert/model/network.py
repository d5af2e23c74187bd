"""Google's BERT (Devlin et al., 2018) in one file, written to be read.

    tokens ─► embeddings (word + token type + position, LayerNorm, dropout)
           ─► L x encoder layer:  x = LN(x + Attention(x));  x = LN(x + W2·gelu(W1·x))   (post-LayerNorm)
           ─► sequence_output [N, S, H]  and  pooled_output = tanh(W·h_[CLS]) [N, H]

The default path runs on padded [N, S] batches and hides padding from attention with a mask. The
unpadded path (`unpad=True`, as MosaicBERT and NVIDIA do) packs the real tokens into [T, H] first:
embeddings, matmuls, LayerNorms and the feed-forward then only touch real tokens, and attention
runs within each sequence (flash attention's variable-length kernel on CUDA, one call per sequence
on CPU); the outputs are scattered back to [N, S, H], so the heads and the results are the same.

Heads: `BertForPreTraining` (masked LM with the decoder tied to the word embeddings, evaluated
only at the masked positions, plus next-sentence prediction), `BertForQuestionAnswering` (a start
and an end logit per token), `BertForSequenceClassification` (labels, or one real number, per
sequence from the pooled [CLS]: GLUE) and `BertForMultipleChoice` (a score per candidate
sequence, softmax over the candidates: SWAG). Parameter values, and therefore outputs, are exactly
those of Google's BERT and of Hugging Face `transformers`; `bert/model/hf.py` maps the parameter names,
so `from_pretrained` / `save_pretrained` read and write Hugging Face BERT directories.
"""

import logging
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bert.errors import UserError
from bert.model import hf
from bert.model.config import ACTIVATIONS, BertConfig

log = logging.getLogger(__name__)

# The activation of each name config.json may give (bert.model.config.ACTIVATIONS).
ACTIVATION_FUNCTIONS = {
    "gelu": F.gelu,  # exact erf GELU, as in Google's BERT
    "gelu_new": partial(F.gelu, approximate="tanh"),
    "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
}
assert set(ACTIVATION_FUNCTIONS) == set(ACTIVATIONS)


_APEX_REPORTED: set[str] = set()  # one log line per reason, not one per layer


def make_layer_norm(config: BertConfig, apex: bool) -> nn.Module:
    """nn.LayerNorm, or apex's fused kernel when asked for and usable (same parameters)."""
    if apex:
        try:
            from apex.normalization import FusedLayerNorm

            return FusedLayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        except Exception as error:  # not installed, or built without its CUDA extensions
            reason = f"{type(error).__name__}: {error}"
            if reason not in _APEX_REPORTED:
                _APEX_REPORTED.add(reason)
                log.warning("apex's FusedLayerNorm is not usable (%s); using torch.nn.LayerNorm", reason)
    return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)


def init_weights(module: nn.Module, std: float) -> None:
    """Google's initialisation: weights from a normal distribution truncated at two standard
    deviations, zero biases; LayerNorms start as the identity (their own default)."""
    for submodule in module.modules():
        if isinstance(submodule, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(submodule.weight, std=std, a=-2 * std, b=2 * std)
        if isinstance(submodule, nn.Linear) and submodule.bias is not None:
            nn.init.zeros_(submodule.bias)


class Embeddings(nn.Module):
    def __init__(self, config: BertConfig, apex_layer_norm: bool = False):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = make_layer_norm(config, apex_layer_norm)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[N, S] ids -> [N, S, H]; or packed [T] ids with their `positions` -> [T, H]."""
        if positions is None:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        return self.dropout(self.layer_norm(x))


@dataclass
class PackedSequences:
    """Where the real tokens of a padded [N, S] batch sit once packed into [T] (the unpadded path):
    sequence i is packed tokens offsets[i]:offsets[i + 1]."""

    indices: torch.Tensor  # [T] flat indices n * S + s of the real tokens, row-major
    offsets: torch.Tensor  # [N + 1] int64, the cumulative sequence lengths ("cu_seqlens")
    max_seqlen: int

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "PackedSequences":
        lengths = attention_mask.sum(1)
        indices = attention_mask.flatten().nonzero().squeeze(1)
        offsets = F.pad(lengths.cumsum(0), (1, 0))
        return cls(indices, offsets, int(lengths.max()))  # one host sync per forward, not per layer

    @cached_property
    def lengths(self) -> list[int]:
        """Each sequence's length, on the host."""
        return self.offsets.diff().tolist()


class SelfAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        # Query, key and value projections as one matmul; hf.py splits it into BERT's three.
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor | PackedSequences | None,
        queries: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: [N, S, H] -> [N, S, H]; or, given `queries` [N, Q, H] (rows of x), their outputs
        [N, Q, H] only, still attending over all of x."""
        if isinstance(key_mask, PackedSequences):
            return self.forward_packed(x, key_mask)
        n, s, h = x.shape
        split_heads = partial(_split_heads, num_heads=self.num_heads)
        if queries is None:
            # [N, S, 3H] -> three [N, heads, S, head_size]
            q, k, v = self.qkv(x).view(n, s, 3, self.num_heads, h // self.num_heads).permute(2, 0, 3, 1, 4)
        else:
            # The query projection for the queried rows only; keys and values for every token.
            q = split_heads(F.linear(queries, self.qkv.weight[:h], self.qkv.bias[:h]))
            k, v = F.linear(x, self.qkv.weight[h:], self.qkv.bias[h:]).view(n, s, 2, h).unbind(2)
            k, v = split_heads(k), split_heads(v)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=key_mask, dropout_p=self.dropout_p if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).flatten(2))

    def forward_packed(self, x: torch.Tensor, packed: PackedSequences) -> torch.Tensor:
        """x: [T, H] packed tokens; each attends to the tokens of its own sequence only."""
        t, h = x.shape
        q, k, v = self.qkv(x).view(t, 3, self.num_heads, h // self.num_heads).unbind(1)
        dropout_p = self.dropout_p if self.training else 0.0
        y = packed_attention(q, k, v, packed, dropout_p, jagged=x.is_cuda)
        return self.out(y.reshape(t, h))


def _split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """[N, S, H] -> [N, heads, S, head_size]."""
    n, s, h = x.shape
    return x.view(n, s, num_heads, h // num_heads).transpose(1, 2)


def packed_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packed: PackedSequences, dropout_p: float, jagged: bool
) -> torch.Tensor:
    """Attention of packed [T, heads, head_size] tokens within their own sequences -> [T, heads,
    head_size]. jagged: one SDPA call on jagged nested tensors, which runs flash attention's
    variable-length kernel on CUDA. Otherwise one SDPA call per sequence: on CPU jagged SDPA
    falls back to generic code 10x slower than this loop."""
    if jagged:
        q, k, v = (
            torch.nested.nested_tensor_from_jagged(
                part.contiguous(), packed.offsets, max_seqlen=packed.max_seqlen
            ).transpose(1, 2)  # [N, heads, j, head_size]
            for part in (q, k, v)
        )
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p).transpose(1, 2).values()
    # [heads, T, head_size] made contiguous once, so each sequence's [heads, length, head_size] has
    # dense matrices; split, not slices: its backward is one concatenation, not a zero-filled [T] each
    per_sequence = zip(*(x.transpose(0, 1).contiguous().split(packed.lengths, dim=1) for x in (q, k, v)))
    outputs = [F.scaled_dot_product_attention(*parts, dropout_p=dropout_p) for parts in per_sequence]
    return torch.cat(outputs, dim=1).transpose(0, 1)


class EncoderLayer(nn.Module):
    def __init__(self, config: BertConfig, apex_layer_norm: bool = False):
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_norm = make_layer_norm(config, apex_layer_norm)
        self.ffn_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACTIVATION_FUNCTIONS[config.hidden_act]
        self.ffn_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.ffn_norm = make_layer_norm(config, apex_layer_norm)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor | PackedSequences | None,
        query_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: [N, S, H] (or packed [T, H]) -> the same shape; given `query_positions` [N, Q],
        the outputs at those positions only, [N, Q, H]: every row of a layer's output depends on
        all of its input, but on no other row of its output."""
        queries = None if query_positions is None else gather_rows(x, query_positions)
        residual = x if queries is None else queries
        x = self.attention_norm(residual + self.dropout(self.attention(x, key_mask, queries)))
        return self.ffn_norm(x + self.dropout(self.ffn_out(self.act(self.ffn_in(x)))))


def gather_rows(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x [N, S, H], positions [N, Q] -> x[n, positions[n, q]] as [N, Q, H]."""
    return x.gather(1, positions.long()[:, :, None].expand(-1, -1, x.shape[2]))


class BertPreTrainedModel(nn.Module):
    """What the models share: their config, parameter count and Hugging Face I/O."""

    config: BertConfig

    def num_parameters(self) -> int:
        """Number of distinct parameters (the tied MLM decoder counts once)."""
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def from_pretrained(cls, directory: str | Path, **kwargs):
        """Load a Hugging Face BERT directory (config.json + model.safetensors or
        pytorch_model.bin). Weights the checkpoint lacks (a pooler, a task head) keep their fresh
        initialisation, with a warning. The model comes back in eval mode, as in `transformers`.
        `kwargs` go to the constructor (e.g. `apex_layer_norm=True`), except that
        BertForSequenceClassification's `num_labels` may be left out (or None) for a folder that
        holds a classifier: its size is then the folder's (see hf.load_pretrained)."""
        return hf.load_pretrained(cls, directory, **kwargs)

    def save_pretrained(
        self,
        directory: str | Path,
        vocab_file: str | Path | None = None,
        lower_case: bool = True,
        label_names: tuple[str, ...] | None = None,
        carried: dict[str, torch.Tensor] | None = None,
    ):
        """Write a Hugging Face BERT directory that `transformers` loads with identical outputs:
        config.json, model.safetensors and, given `vocab_file`, vocab.txt + tokenizer_config.json.
        `label_names`: a classifier's classes in order, for config.json's id2label (else LABEL_i).
        `carried`: tensors of the start this model does not hold, kept unchanged (hf.untrained_tensors)."""
        hf.save_pretrained(self, directory, vocab_file, lower_case, label_names, carried)


class BertModel(BertPreTrainedModel):
    def __init__(
        self,
        config: BertConfig,
        with_pooler: bool = True,
        apex_layer_norm: bool = False,
        unpad: bool = False,
    ):
        super().__init__()
        self.config = config
        self.unpad = unpad  # run the encoder on packed real tokens (see forward_unpadded)
        self.embeddings = Embeddings(config, apex_layer_norm)
        self.layers = nn.ModuleList(
            EncoderLayer(config, apex_layer_norm) for _ in range(config.num_hidden_layers)
        )
        # The pooler feeds NSP; question answering has no use for it (nor has HF's QA model).
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if with_pooler else None
        init_weights(self, config.initializer_range)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """input_ids, token_type_ids, attention_mask: [N, S] (mask 1 = real token, 0 = padding).
        Returns sequence_output [N, S, H] and pooled_output [N, H] (None without a pooler).

        output_positions [N, Q]: the positions whose outputs the caller needs (pretraining: the
        masked tokens). The last layer then computes only those rows and [CLS]'s (for the pooler),
        and sequence_output is [N, Q, H], the rows in the order asked for; Q = 0 for [CLS] only
        (the classification heads)."""
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise UserError(
                f"sequence length {input_ids.shape[1]} exceeds max_position_embeddings "
                f"{self.config.max_position_embeddings} of the model config"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # Padding is hidden from every query as a key: [N, 1, 1, S], True = attend.
        key_mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        every_row = self.layers if output_positions is None else self.layers[:-1]
        if self.unpad and attention_mask is not None:
            x = self.forward_unpadded(input_ids, token_type_ids, attention_mask, every_row)
        else:
            x = self.embeddings(input_ids, token_type_ids)
            for layer in every_row:
                x = layer(x, key_mask)
        if output_positions is None:
            pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None
            return x, pooled
        cls_position = output_positions.new_zeros(len(output_positions), 1)  # also for Q = 0
        x = self.layers[-1](x, key_mask, torch.cat([cls_position, output_positions], dim=1))
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None
        return x[:, 1:], pooled

    def forward_unpadded(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        layers: nn.ModuleList,
    ) -> torch.Tensor:
        """Embeddings and `layers` on the real tokens only: gather them into [T], run on [T, H],
        scatter the result back to [N, S, H] (zeros at padding)."""
        n, s = input_ids.shape
        packed = PackedSequences.from_mask(attention_mask)
        x = self.embeddings(
            input_ids.flatten()[packed.indices],
            token_type_ids.flatten()[packed.indices],
            positions=packed.indices % s,
        )
        for layer in layers:
            x = layer(x, packed)
        return x.new_zeros(n * s, x.shape[1]).index_copy(0, packed.indices, x).view(n, s, -1)


@dataclass
class PreTrainingOutput:
    loss: torch.Tensor | None  # mlm_loss + nsp_loss (those given)
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    mlm_logits: torch.Tensor  # [M, V], one row per valid masked slot, in row-major slot order
    mlm_labels: torch.Tensor | None  # [M]
    nsp_logits: torch.Tensor | None  # [N, 2]; class 0 = B follows A, 1 = B is random; None: MLM only


class BertForPreTraining(BertPreTrainedModel):
    """The masked LM and, with `next_sentence` (BERT's objective), next-sentence prediction on the
    pooled [CLS]. Without it (MLM only, as RoBERTa) the model has neither the NSP classifier nor
    the pooler, which only NSP reads: no parameter goes untrained (DistributedDataParallel requires
    it), and the saved folder is what `transformers` loads as BertForMaskedLM."""

    def __init__(
        self,
        config: BertConfig,
        apex_layer_norm: bool = False,
        unpad: bool = False,
        next_sentence: bool = True,
    ):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, with_pooler=next_sentence, apex_layer_norm=apex_layer_norm, unpad=unpad)
        self.act = ACTIVATION_FUNCTIONS[config.hidden_act]
        self.mlm_transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.mlm_norm = make_layer_norm(config, apex_layer_norm)
        # The decoder's weight is the word embedding matrix; only its bias is the head's own.
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.nsp_classifier = nn.Linear(config.hidden_size, 2) if next_sentence else None
        init_weights(self.mlm_transform, config.initializer_range)
        if next_sentence:
            init_weights(self.nsp_classifier, config.initializer_range)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        masked_lm_positions: torch.Tensor,
        masked_lm_ids: torch.Tensor | None = None,
        next_sentence_labels: torch.Tensor | None = None,
    ) -> PreTrainingOutput:
        """masked_lm_positions / masked_lm_ids: [N, P] as in the HDF5 shards; a slot is used
        where its position is not 0 (position 0 holds [CLS], which is never masked)."""
        # Only [CLS] (for NSP) and the ~15% masked tokens are read by the heads, so the last
        # encoder layer computes those rows only, and the vocabulary projection (the costliest
        # matmul of a small BERT) runs on the masked ones only, not on every position.
        masked_output, pooled_output = self.bert(
            input_ids, token_type_ids, attention_mask, output_positions=masked_lm_positions
        )
        used = masked_lm_positions != 0
        masked_hidden = masked_output[used]  # [M, H], in row-major slot order
        masked_hidden = self.mlm_norm(self.act(self.mlm_transform(masked_hidden)))
        mlm_logits = F.linear(masked_hidden, self.bert.embeddings.word_embeddings.weight, self.mlm_bias)
        nsp_logits = self.nsp_classifier(pooled_output) if self.nsp_classifier is not None else None

        mlm_labels = mlm_loss = nsp_loss = None
        if masked_lm_ids is not None:
            mlm_labels = masked_lm_ids[used].long()
            mlm_loss = F.cross_entropy(mlm_logits.float(), mlm_labels)
        if next_sentence_labels is not None:
            if nsp_logits is None:
                raise ValueError("next_sentence_labels given to a BertForPreTraining without NSP")
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_labels.long().view(-1))
        given = [part for part in (mlm_loss, nsp_loss) if part is not None]
        loss = sum(given) if given else None
        return PreTrainingOutput(loss, mlm_loss, nsp_loss, mlm_logits, mlm_labels, nsp_logits)


@dataclass
class QuestionAnsweringOutput:
    loss: torch.Tensor | None  # mean of the start and end cross-entropies
    start_logits: torch.Tensor  # [N, S]
    end_logits: torch.Tensor  # [N, S]


class BertForQuestionAnswering(BertPreTrainedModel):
    def __init__(self, config: BertConfig, apex_layer_norm: bool = False, unpad: bool = False):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, with_pooler=False, apex_layer_norm=apex_layer_norm, unpad=unpad)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)  # a start and an end logit per token
        init_weights(self.qa_outputs, config.initializer_range)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
    ) -> QuestionAnsweringOutput:
        sequence_output, _ = self.bert(input_ids, token_type_ids, attention_mask)
        start_logits, end_logits = self.qa_outputs(sequence_output).unbind(-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, attention_mask, start_positions, end_positions)
        return QuestionAnsweringOutput(loss, start_logits, end_logits)


def span_loss(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    attention_mask: torch.Tensor,
    start_positions: torch.Tensor,
    end_positions: torch.Tensor,
) -> torch.Tensor:
    """The mean of the start and end cross-entropies of the [N, S] logits. As in transformers: a
    position past the end of the sequence (an answer cut off by the window) is clamped to S and
    ignored; a negative one is clamped to 0. Unlike transformers (and Google's run_squad), padding
    is left out of the softmax: it never holds an answer, and so a window's loss does not depend on
    how wide its batch is (cut to the longest window, length-binned, or padded to max_seq_length)."""
    s = start_logits.shape[1]
    padding = attention_mask == 0
    start_loss, end_loss = (
        F.cross_entropy(
            logits.float().masked_fill(padding, -torch.inf),
            positions.long().clamp(0, s),
            ignore_index=s,
        )
        for logits, positions in ((start_logits, start_positions), (end_logits, end_positions))
    )
    return (start_loss + end_loss) / 2


@dataclass
class ClassificationOutput:
    loss: torch.Tensor | None  # cross-entropy; for a regression (one label) the mean squared error
    logits: torch.Tensor  # [N, num_labels]; multiple choice: [N, C], one score per choice


def pooled_output(
    bert: BertModel, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """The pooled [CLS] [N, H], all the classification heads read: no output position besides
    [CLS], so the last encoder layer computes that row only (see BertModel.forward)."""
    no_positions = input_ids.new_zeros(len(input_ids), 0)
    _, pooled = bert(input_ids, token_type_ids, attention_mask, output_positions=no_positions)
    return pooled


def head_dropout(config: BertConfig) -> float:
    """The dropout before a task head's classifier, as transformers chooses it."""
    return config.hidden_dropout_prob if config.classifier_dropout is None else config.classifier_dropout


class BertForSequenceClassification(BertPreTrainedModel):
    """A label per sequence (or pair) from the pooled [CLS], as for GLUE. As in `transformers`,
    num_labels=1 is a regression (STS-B's similarity): one real output, mean squared error."""

    def __init__(
        self, config: BertConfig, num_labels: int, apex_layer_norm: bool = False, unpad: bool = False
    ):
        super().__init__()
        if num_labels < 1:
            raise UserError(f"num_labels is {num_labels}; a classifier needs at least 1 (1 = regression)")
        self.config = config
        self.num_labels = num_labels
        self.bert = BertModel(config, with_pooler=True, apex_layer_norm=apex_layer_norm, unpad=unpad)
        self.dropout = nn.Dropout(head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        init_weights(self.classifier, config.initializer_range)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> ClassificationOutput:
        """labels [N]: class indices, or for a regression the targets (floats)."""
        pooled = pooled_output(self.bert, input_ids, token_type_ids, attention_mask)
        logits = self.classifier(self.dropout(pooled))
        loss = None if labels is None else classification_loss(logits, labels)
        return ClassificationOutput(loss, logits)


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over [N, labels] logits; for one output (a regression) the mean squared error."""
    if logits.shape[1] == 1:
        return F.mse_loss(logits[:, 0].float(), labels.float().view(-1))
    return F.cross_entropy(logits.float(), labels.long().view(-1))


class BertForMultipleChoice(BertPreTrainedModel):
    """One of C candidates per example, as for SWAG: each (context, candidate) pair is a sequence
    of its own, scored by one logit from its pooled [CLS]; the softmax runs over the C scores."""

    def __init__(self, config: BertConfig, apex_layer_norm: bool = False, unpad: bool = False):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, with_pooler=True, apex_layer_norm=apex_layer_norm, unpad=unpad)
        self.dropout = nn.Dropout(head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, 1)
        init_weights(self.classifier, config.initializer_range)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> ClassificationOutput:
        """input_ids, token_type_ids, attention_mask: [N, C, S]; labels [N]: the right choice."""
        n, c, _ = input_ids.shape
        flat = (x.flatten(0, 1) for x in (input_ids, token_type_ids, attention_mask))  # [N * C, S]
        logits = self.classifier(self.dropout(pooled_output(self.bert, *flat))).view(n, c)
        loss = None if labels is None else F.cross_entropy(logits.float(), labels.long().view(-1))
        return ClassificationOutput(loss, logits)
