"""BertForSequenceClassification and BertForMultipleChoice: transformers' logits and losses on the
MiniLM checkpoint, loading theirs and exporting ours (CPU, fp32, eval mode); how num_labels is
settled on loading; the unpadded path; and a tiny BERT that learns a synthetic task with each."""

import json
import logging
import re

import pytest
import torch

from bert.errors import UserError
from bert.model.config import BertConfig
from bert.model.network import BertForMultipleChoice, BertForSequenceClassification, BertModel
from bert.tasks.metrics import accuracy, pearson
from bert.text.tokenization import load_tokenizer
from bert.training.optim import warmup_poly_schedule
from tests.model.test_hf import padded_batch

transformers = pytest.importorskip("transformers")
torch.set_num_threads(2)

# SWAG-like: a context and candidate endings, one of them sensible.
CONTEXTS = ["The chef opened the oven and", "She laced up her running shoes, then"]
ENDINGS = [
    ["took out a golden loaf of bread.", "sang to the moon.", "it"],
    ["went for a jog around the park.", "ate the shoes.", "slept until noon on the roof of the barn."],
]

# name: (our class, the transformers class, constructor kwargs, the batch it reads, labels)
HEADS = {
    "2 labels": (BertForSequenceClassification, "BertForSequenceClassification", {"num_labels": 2}),
    "3 labels": (BertForSequenceClassification, "BertForSequenceClassification", {"num_labels": 3}),
    "regression": (BertForSequenceClassification, "BertForSequenceClassification", {"num_labels": 1}),
    "multiple choice": (BertForMultipleChoice, "BertForMultipleChoice", {}),
}
LABELS = {
    "2 labels": torch.tensor([0, 1, 1, 0]),
    "3 labels": torch.tensor([2, 0, 1, 2]),
    "regression": torch.tensor([0.5, 3.1, -1.0, 2.2]),  # STS-B-like similarity scores
    "multiple choice": torch.tensor([0, 2]),
}


def choice_batch(vocab_file):
    """[N, C, S]: each (context, ending) pair tokenised with our tokenizer, padded to the longest."""
    tokenizer = load_tokenizer(vocab_file)
    encodings = [[tokenizer.encode(c, e) for e in endings] for c, endings in zip(CONTEXTS, ENDINGS)]
    length = max(len(e.ids) for row in encodings for e in row)
    input_ids = torch.zeros(len(CONTEXTS), len(ENDINGS[0]), length, dtype=torch.long)
    token_type_ids, attention_mask = torch.zeros_like(input_ids), torch.zeros_like(input_ids)
    for n, row in enumerate(encodings):
        for c, encoding in enumerate(row):
            size = len(encoding.ids)
            input_ids[n, c, :size] = torch.tensor(encoding.ids)
            token_type_ids[n, c, :size] = torch.tensor(encoding.type_ids)
            attention_mask[n, c, :size] = 1
    assert attention_mask.sum(-1).min() < length  # some pairs really are padded
    return input_ids, token_type_ids, attention_mask


@pytest.fixture(scope="module")
def batches(uncased_vocab):
    return {"sequences": padded_batch(uncased_vocab), "choices": choice_batch(uncased_vocab)}


def inputs_of(head: str, batches) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return batches["choices" if head == "multiple choice" else "sequences"]


def hf_outputs(model, batch, labels):
    input_ids, token_type_ids, attention_mask = batch
    return model(
        input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask, labels=labels
    )


def as_if_fine_tuned(classifier: torch.nn.Linear) -> None:
    """A head as training leaves it: weights well off their initialisation, biases not zero (a
    fresh head's are, and would leave the biases' mapping untested)."""
    with torch.no_grad():
        classifier.weight.normal_(std=0.2)
        classifier.bias.normal_(std=0.5)


def ours_logged(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "bert.model.hf"]


@pytest.mark.parametrize("head", HEADS)
def test_transformers_fine_tuned_heads_give_their_logits_and_loss(
    head, minilm_dir, batches, tmp_path, caplog
):
    ours_cls, theirs_name, kwargs = HEADS[head]
    torch.manual_seed(0)
    theirs = getattr(transformers, theirs_name).from_pretrained(minilm_dir, **kwargs).eval()
    as_if_fine_tuned(theirs.classifier)
    theirs.save_pretrained(tmp_path / "theirs")
    if head == "2 labels":  # transformers writes no id2label for its default of 2 labels...
        assert "id2label" not in json.loads((tmp_path / "theirs" / "config.json").read_text())
    with caplog.at_level(logging.WARNING, logger="bert.model.hf"):
        ours = ours_cls.from_pretrained(tmp_path / "theirs")  # ...so the classifier tells the count
    assert not ours_logged(caplog)  # nothing missing, nothing unused
    if ours_cls is BertForSequenceClassification:
        assert ours.num_labels == kwargs["num_labels"]

    batch, labels = inputs_of(head, batches), LABELS[head]
    with torch.no_grad():
        out = ours(*batch, labels=labels)
        expected = hf_outputs(theirs, batch, labels)
    assert out.logits.shape == (len(labels), kwargs.get("num_labels", batch[0].shape[1]))
    torch.testing.assert_close(out.logits, expected.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.loss, expected.loss, atol=1e-5, rtol=0)
    assert out.logits.std() > 0.1  # a real head, not a degenerate match


@pytest.mark.parametrize("head", HEADS)
def test_exported_heads_load_in_transformers_with_the_same_logits(head, minilm_dir, batches, tmp_path):
    ours_cls, theirs_name, kwargs = HEADS[head]
    torch.manual_seed(1)
    ours = ours_cls.from_pretrained(minilm_dir, **kwargs)  # a fresh head on the pretrained encoder
    as_if_fine_tuned(ours.classifier)
    ours.save_pretrained(tmp_path / "ours")
    auto = {
        "BertForSequenceClassification": transformers.AutoModelForSequenceClassification,
        "BertForMultipleChoice": transformers.AutoModelForMultipleChoice,
    }[theirs_name]
    theirs, info = auto.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert type(theirs).__name__ == theirs_name  # config.json's architectures
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    if "num_labels" in kwargs:
        problem_type = "regression" if kwargs["num_labels"] == 1 else "single_label_classification"
        assert theirs.config.num_labels == kwargs["num_labels"]
        assert theirs.config.problem_type == problem_type

    batch, labels = inputs_of(head, batches), LABELS[head]
    with torch.no_grad():
        out = ours(*batch, labels=labels)
        expected = hf_outputs(theirs.eval(), batch, labels)
    torch.testing.assert_close(out.logits, expected.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.loss, expected.loss, atol=1e-5, rtol=0)
    assert out.logits.std() > 0.1


@pytest.mark.parametrize("head", HEADS)
def test_unpadded_heads_give_the_padded_logits(head, minilm_dir, batches):
    ours_cls, _, kwargs = HEADS[head]
    torch.manual_seed(2)
    padded = ours_cls.from_pretrained(minilm_dir, **kwargs)
    torch.manual_seed(2)
    unpadded = ours_cls.from_pretrained(minilm_dir, unpad=True, **kwargs)
    assert torch.equal(unpadded.classifier.weight, padded.classifier.weight)  # the caller's seed
    batch, labels = inputs_of(head, batches), LABELS[head]
    assert (batch[2] == 0).any()  # padding for the unpadded path to leave out
    with torch.no_grad():
        expected, out = padded(*batch, labels=labels), unpadded(*batch, labels=labels)
    torch.testing.assert_close(out.logits, expected.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.loss, expected.loss, atol=1e-5, rtol=0)


def test_fresh_heads_follow_the_callers_seed(minilm_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="bert.model.hf"):
        torch.manual_seed(3)
        first = BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=3)
    assert ours_logged(caplog) == [f"{minilm_dir}: not in the checkpoint, freshly initialised: classifier.weight, classifier.bias"]  # fmt: skip
    torch.manual_seed(3)
    again = BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=3)
    torch.manual_seed(4)
    other = BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=3)
    assert torch.equal(first.classifier.weight, again.classifier.weight)
    assert not torch.equal(first.classifier.weight, other.classifier.weight)
    assert torch.equal(first.bert.pooler.weight, other.bert.pooler.weight)  # MiniLM's own pooler


def small_config() -> BertConfig:
    return BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
    )


@pytest.mark.parametrize("head", ["3 labels", "regression", "multiple choice"])
def test_save_then_load_is_exact(head, tmp_path):
    ours_cls, _, kwargs = HEADS[head]
    torch.manual_seed(5)
    model = ours_cls(small_config(), **kwargs)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))  # nothing left at its init value
    model.save_pretrained(tmp_path / "model")
    loaded = ours_cls.from_pretrained(tmp_path / "model")
    assert loaded.config == model.config and type(loaded) is ours_cls
    for (name, expected), (loaded_name, value) in zip(
        model.state_dict().items(), loaded.state_dict().items()
    ):
        assert name == loaded_name and torch.equal(value, expected), name
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["architectures"] == [ours_cls.__name__]
    if head == "multiple choice":
        assert "id2label" not in config and "problem_type" not in config
    else:
        assert loaded.num_labels == model.num_labels
        assert config["id2label"] == {str(i): f"LABEL_{i}" for i in range(model.num_labels)}
        assert config["label2id"] == {f"LABEL_{i}": i for i in range(model.num_labels)}
        assert config["problem_type"] == ("regression" if head == "regression" else "single_label_classification")  # fmt: skip


def test_num_labels_come_from_the_folder_or_must_agree_with_it(tmp_path, caplog):
    torch.manual_seed(6)
    BertForSequenceClassification(small_config(), num_labels=3).save_pretrained(tmp_path / "mnli")
    assert BertForSequenceClassification.from_pretrained(tmp_path / "mnli").num_labels == 3
    assert BertForSequenceClassification.from_pretrained(tmp_path / "mnli", num_labels=3).num_labels == 3
    mismatch = (
        rf"^{re.escape(str(tmp_path / 'mnli'))}: fine-tuned for 3 labels .* not the num_labels=2 asked for"
    )
    with pytest.raises(UserError, match=mismatch):
        BertForSequenceClassification.from_pretrained(tmp_path / "mnli", num_labels=2)

    # A pretrained encoder: no classifier, so num_labels is the caller's to give.
    BertModel(small_config()).save_pretrained(tmp_path / "pretrained")
    with pytest.raises(UserError, match=r"no classifier .* pass num_labels"):
        BertForSequenceClassification.from_pretrained(tmp_path / "pretrained")
    # An id2label without a classifier (old transformers wrote its default of 2 into every
    # config.json) describes no weights: the labels asked for win, with a warning.
    config_file = tmp_path / "pretrained" / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "id2label": {"0": "LABEL_0", "1": "LABEL_1"}}))
    with caplog.at_level(logging.WARNING, logger="bert.model.hf"):
        fresh = BertForSequenceClassification.from_pretrained(tmp_path / "pretrained", num_labels=3)
    assert (
        fresh.num_labels == 3 and "id2label has 2 labels, but the weights hold no classifier" in caplog.text
    )

    config_file = tmp_path / "mnli" / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "id2label": {"0": "LABEL_0", "1": "LABEL_1"}}))
    with pytest.raises(UserError, match="id2label has 2 labels but the classifier in the weights has 3"):
        BertForSequenceClassification.from_pretrained(tmp_path / "mnli")
    config_file.write_text(json.dumps({**config, "problem_type": "multi_label_classification"}))
    with pytest.raises(UserError, match="'multi_label_classification' with 3 labels is not supported"):
        BertForSequenceClassification.from_pretrained(tmp_path / "mnli")
    with pytest.raises(UserError, match="num_labels is 0"):
        BertForSequenceClassification(small_config(), num_labels=0)


def test_labels_heads_and_dropout_as_the_task_gives_them(tmp_path):
    torch.manual_seed(7)
    names = ("entailment", "neutral", "contradiction")
    BertForSequenceClassification(small_config(), num_labels=3).save_pretrained(
        tmp_path / "mnli", label_names=names
    )
    config = json.loads((tmp_path / "mnli" / "config.json").read_text())
    assert config["id2label"] == {"0": "entailment", "1": "neutral", "2": "contradiction"}
    assert config["label2id"] == {"entailment": 0, "neutral": 1, "contradiction": 2}
    assert transformers.BertForSequenceClassification.from_pretrained(tmp_path / "mnli").config.id2label[2] == "contradiction"  # fmt: skip
    with pytest.raises(ValueError, match="2 label names for a classifier of 3 labels"):
        BertForSequenceClassification(small_config(), num_labels=3).save_pretrained(tmp_path / "x", label_names=names[:2])  # fmt: skip

    # A SWAG model has one output per choice: loaded as a classifier it would pass for a regression.
    BertForMultipleChoice(small_config()).save_pretrained(tmp_path / "swag")
    with pytest.raises(
        UserError, match=r"swag: a BertForMultipleChoice .*, not a BertForSequenceClassification"
    ):
        BertForSequenceClassification.from_pretrained(tmp_path / "swag", num_labels=1)
    with pytest.raises(
        UserError, match=r"mnli: a BertForSequenceClassification .*, not a BertForMultipleChoice"
    ):
        BertForMultipleChoice.from_pretrained(tmp_path / "mnli")
    BertModel(small_config()).save_pretrained(tmp_path / "encoder")  # any head starts from an encoder
    assert BertForMultipleChoice.from_pretrained(tmp_path / "encoder").classifier.out_features == 1

    config = small_config()
    assert BertForMultipleChoice(config).dropout.p == config.hidden_dropout_prob
    config.classifier_dropout = 0.3  # transformers' field: the heads' own dropout when set
    assert BertForSequenceClassification(config, num_labels=2).dropout.p == 0.3
    assert BertForMultipleChoice(config).dropout.p == 0.3


# Learnable synthetic tasks, on ids of our vocabulary layout (bert.text.tokenization.SPECIAL_TOKENS:
# [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4) and twenty ordinary words 5..24.
CLS, SEP, FIRST_WORD, VOCAB = 2, 3, 5, 25
MARK = FIRST_WORD  # the word the classification and regression tasks look for
MAX_WORDS = 12


def marked_sequences(n: int, generator: torch.Generator, max_marks: int):
    """[CLS] 4..12 words [SEP], padded to [N, 14]; MARK is 0..max_marks of the words (counts [N])."""
    lengths = torch.randint(4, MAX_WORDS + 1, (n,), generator=generator)
    real = torch.arange(MAX_WORDS) < lengths[:, None]
    counts = torch.randint(0, max_marks + 1, (n,), generator=generator)
    words = torch.randint(FIRST_WORD + 1, VOCAB, (n, MAX_WORDS), generator=generator)
    # The rank of each real position in a random order of them: MARK at the first `count` ranks.
    rank = torch.rand(n, MAX_WORDS, generator=generator).masked_fill(~real, 2.0).argsort(1).argsort(1)
    words = torch.where(rank < counts[:, None], MARK, words).masked_fill(~real, 0)
    input_ids = torch.cat([torch.full((n, 1), CLS), words, torch.zeros(n, 1, dtype=torch.long)], 1)
    input_ids[torch.arange(n), lengths + 1] = SEP
    attention_mask = (torch.arange(MAX_WORDS + 2) < lengths[:, None] + 2).long()
    return input_ids, torch.zeros_like(input_ids), attention_mask, counts


def choices(n: int, generator: torch.Generator, num_choices: int = 4):
    """[CLS] context [SEP] ending [SEP] for each of 4 one-word endings ([N, 4, 5]); the right ending
    repeats the context's word, the others are other words."""
    words = torch.rand(n, VOCAB - FIRST_WORD, generator=generator).argsort(1)[:, : num_choices + 1]
    words += FIRST_WORD  # distinct words per example
    labels = torch.randint(0, num_choices, (n,), generator=generator)
    context, endings = words[:, :1].expand(n, num_choices), words[:, 1:].clone()
    endings[torch.arange(n), labels] = context[:, 0]
    cls, sep = torch.full((n, num_choices), CLS), torch.full((n, num_choices), SEP)
    input_ids = torch.stack([cls, context, sep, endings, sep], dim=2)
    token_type_ids = torch.tensor([0, 0, 0, 1, 1]).expand_as(input_ids)
    return input_ids, token_type_ids, torch.ones_like(input_ids), labels


def train_tiny(model, make_batch, steps: int = 200, lr: float = 1e-3):
    """A plain AdamW loop with BERT's schedule (10% warm-up, linear decay), a fresh batch of 32 a step."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = warmup_poly_schedule(optimizer, steps // 10, steps, power=1.0)
    model.train()
    for _ in range(steps):
        loss = model(*make_batch(32)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    return model.eval()


def learn(task: str, seed: int = 0) -> float:
    """Train a tiny BERT (the `tiny` preset, dropout on) from scratch on `task` and score it on
    512 fresh examples: accuracy, or Pearson's r for the regression."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    config = BertConfig.preset("tiny", vocab_size=VOCAB)
    if task == "classification":  # does MARK occur? (0 or 1 times: the count is the label)
        model = BertForSequenceClassification(config, num_labels=2)

        def make_batch(n):
            return marked_sequences(n, generator, max_marks=1)
    elif task == "regression":  # how often does MARK occur?
        model = BertForSequenceClassification(config, num_labels=1)

        def make_batch(n):
            *inputs, counts = marked_sequences(n, generator, max_marks=4)
            return (*inputs, counts.float())
    else:  # which ending repeats the context's word?
        model = BertForMultipleChoice(config)

        def make_batch(n):
            return choices(n, generator)

    held_out = make_batch(512)
    # Counting, whatever the length, takes the regression a little longer than the others. Over
    # seeds 0..19 the worst scores were 1.0 (classification), 0.92 (regression), 0.93 (choice).
    train_tiny(model, make_batch, steps=250 if task == "regression" else 200)
    with torch.no_grad():
        logits = model(*held_out[:3]).logits
    if task == "regression":
        return pearson(logits[:, 0].numpy(), held_out[3].numpy())
    return accuracy(logits.argmax(1).numpy(), held_out[3].numpy())


def test_a_tiny_bert_learns_to_classify_sequences():
    assert learn("classification") >= 0.9


def test_a_tiny_bert_learns_a_regression():
    assert learn("regression") >= 0.9


def test_a_tiny_bert_learns_multiple_choice():
    assert learn("multiple choice") >= 0.9


def test_a_task_starting_from_another_tasks_model_keeps_its_head_only_for_the_same_labels(tmp_path, caplog):
    """RTE from MNLI's model (three classes, not RTE's two): the encoder and pooler carried, the head
    fresh; RTE from QNLI's (entailment / not_entailment, as RTE): the head kept too; SWAG (multiple
    choice) from MNLI's: the encoder only. The log says which."""
    from bert.tasks.catalogue import TASKS
    from bert.tasks.model import head_carries_over, load_task_model_from_task

    assert not head_carries_over(TASKS["rte"], TASKS["mnli"]) and head_carries_over(
        TASKS["rte"], TASKS["qnli"]
    )
    assert not head_carries_over(TASKS["stsb"], TASKS["mnli"]) and not head_carries_over(
        TASKS["swag"], TASKS["mnli"]
    )
    torch.manual_seed(6)
    for source in ("mnli", "qnli"):
        model = BertForSequenceClassification(small_config(), num_labels=TASKS[source].num_labels)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter))
        model.save_pretrained(tmp_path / source, label_names=TASKS[source].labels)
    with caplog.at_level(logging.INFO, logger="bert.tasks.model"):
        from_mnli = load_task_model_from_task(TASKS["rte"], TASKS["mnli"], tmp_path / "mnli")
        from_qnli = load_task_model_from_task(TASKS["rte"], TASKS["qnli"], tmp_path / "qnli")
        swag = load_task_model_from_task(TASKS["swag"], TASKS["mnli"], tmp_path / "mnli")
    mnli = BertForSequenceClassification.from_pretrained(tmp_path / "mnli")
    qnli = BertForSequenceClassification.from_pretrained(tmp_path / "qnli")
    assert from_mnli.num_labels == 2 and torch.equal(from_mnli.bert.pooler.weight, mnli.bert.pooler.weight)
    assert torch.equal(from_mnli.bert.layers[1].ffn_out.weight, mnli.bert.layers[1].ffn_out.weight)
    assert torch.equal(from_qnli.classifier.weight, qnli.classifier.weight)  # kept: the same classes
    assert isinstance(swag, BertForMultipleChoice) and swag.classifier.weight.shape == (1, 16)
    assert torch.equal(
        swag.bert.embeddings.word_embeddings.weight, mnli.bert.embeddings.word_embeddings.weight
    )
    logged = [record.getMessage() for record in caplog.records if record.name == "bert.tasks.model"]
    assert logged[0].startswith("RTE starts from MNLI's model") and logged[0].endswith(
        "its head re-initialised: MNLI's labels (contradiction, entailment, neutral) are not RTE's "
        "(entailment, not_entailment)"
    )
    assert logged[1].endswith("its head kept: the same labels")
