"""How pretraining instances are made (`ExampleConfig`): each of params.yaml's examples.<phase> is
this type, each field's range and the rule across fields here. A module of its own, so that every
stage can read params.yaml's schema without importing (or rerunning on an edit of) the code that
makes the instances (bert.pretraining.instances)."""

from dataclasses import dataclass
from typing import Annotated, Literal

from bert.errors import SettingsError
from bert.ranges import Count, Probability, Range, out_of_range


@dataclass(frozen=True)
class ExampleConfig:
    """How pretraining instances are made from sentences: params.yaml's examples.<phase> (its
    lengths; the rest written once in examples for every phase). The defaults are BERT's reference
    settings, for this module's command line and the library used alone; the pipeline gives every
    field from params.yaml."""

    max_seq_length: Annotated[int, Range(low=8)] = 128  # tokens per instance, [CLS] and [SEP]s included
    max_predictions_per_seq: Count = 20  # masked positions per instance, at most
    masked_lm_prob: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = (
        0.15  # of the tokens masked
    )
    short_seq_prob: Probability = 0.1  # instances drawn shorter than max_seq_length, as fine-tuning sees them
    dupe_factor: Count = 5  # passes over the sentences, each with other pairs and masks
    whole_word_mask: bool = False  # mask every piece of a word together
    # static: masks drawn here, stored in the shards | dynamic: unmasked pairs stored, the loader masks them each epoch
    masking: Literal["static", "dynamic"] = "static"
    next_sentence: bool = True  # False: MLM-only packed sentences (create_packed), no NSP labels

    def __post_init__(self):
        problem = out_of_range(self)
        if problem:
            raise SettingsError("examples", lambda prefix: prefix + problem)
        if self.max_predictions_per_seq > self.max_seq_length:
            raise SettingsError(
                "examples",
                lambda prefix: (
                    f"{prefix}max_predictions_per_seq is {self.max_predictions_per_seq}; it must be at "
                    f"most {prefix}max_seq_length ({self.max_seq_length})"
                ),
            )

    @property
    def dynamic_masking(self) -> bool:
        return self.masking == "dynamic"
