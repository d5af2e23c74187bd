"""The rows of every optimizer step depend on (seed, epoch, step) only: the same on any number of
ranks and accumulation steps, binned or not, and after a resume on another world size. Checked
on the loaders themselves, as every rank of a run would read them (no model, no processes)."""

import h5py
import numpy as np
import pytest

from bert.pretraining.loader import PretrainingData
from bert.squad.features import SquadFeatures
from bert.training.binning import window_batches
from bert.training.finetune import FineTuningBatches
from bert.training.global_batch import accumulation_steps
from bert.training.loop import _Batches
from tests.support.shard_fixtures import write_shards

GLOBAL = 32
SPLITS = [(1, 32), (2, 16), (1, 16), (2, 8), (4, 4)]  # (world size, micro-batch): accumulation 1, 1, 2, 2, 2
STEPS = 80  # past the first binning window (64 global batches) and into the second epoch (71 steps)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """2300 rows of random lengths; each row's first masked-token label is its id (the loader
    passes the labels through as they are)."""
    shards = write_shards(
        tmp_path_factory.mktemp("shards"), sizes=(1300, 1000), seq_len=16, max_pred=2, min_length=6
    )
    first = 0
    for path in shards:
        with h5py.File(path, "r+") as f:
            labels = f["masked_lm_ids"][:]
            labels[:, 0] = first + np.arange(len(labels))
            f["masked_lm_ids"][:] = labels
            first += len(labels)
    return shards


def pretraining_steps(shards, world_size, micro, binning, steps, epoch=0, samples=0):
    """The sorted row ids of each of `steps` optimizer steps, read by every rank and micro-step
    through the training loop's own epoch and position keeping (bert.training.loop._Batches), and
    the position (epoch, samples) each rank would write into a checkpoint after them."""
    ranks = []
    for rank in range(world_size):
        data = PretrainingData(
            shards, GLOBAL, micro, seed=3, rank=rank, world_size=world_size, length_binning=binning
        )
        ranks.append(_Batches(data, world_size, epoch, samples))
    accumulation = accumulation_steps(GLOBAL, micro, world_size)
    result = []
    for _ in range(steps):
        rows = []
        for _ in range(accumulation):
            for batches in ranks:
                batch = next(batches)
                rows += batch["masked_lm_ids"][:, 0].tolist()
        assert len(rows) == GLOBAL
        result.append(sorted(rows))
    positions = {(b.epoch, b.samples) for b in ranks}
    assert len(positions) == 1  # every rank is at the same place
    return result, positions.pop()


@pytest.mark.parametrize("binning", [False, True])
def test_every_split_of_the_global_batch_trains_the_same_rows_per_step(shards, binning):
    assert window_batches(GLOBAL) == 64
    reference, position = pretraining_steps(shards, 1, GLOBAL, binning, STEPS)
    assert position == (1, (STEPS - 2300 // GLOBAL) * GLOBAL)  # into epoch 1
    assert len({row for step in reference[:71] for row in step}) == 71 * GLOBAL  # each row once an epoch
    for world_size, micro in SPLITS[1:]:
        steps, split_position = pretraining_steps(shards, world_size, micro, binning, STEPS)
        assert split_position == position, (world_size, micro)
        assert steps == reference, (world_size, micro)


@pytest.mark.parametrize("binning", [False, True])
@pytest.mark.parametrize(
    "before, after",
    [((2, 16), (1, 16)), ((1, 32), (2, 16)), ((1, 16), (4, 4))],
    ids=["2x16 -> 1x16x2", "1 -> 2 ranks", "1x16x2 -> 4x4x2"],
)
def test_a_resume_on_another_world_size_sees_the_rows_of_the_uninterrupted_run(
    shards, binning, before, after
):
    straight, _ = pretraining_steps(shards, *before, binning, STEPS)
    for stop in (3, 67):  # in the first binning window; in the second (and then past the epoch's end)
        _, (epoch, samples) = pretraining_steps(shards, *before, binning, stop)
        resumed, _ = pretraining_steps(shards, *after, binning, STEPS - stop, epoch, samples)
        assert resumed == straight[stop:], stop


def test_the_global_batch_must_split_evenly():
    assert accumulation_steps(4096, 8, 64) == 8
    with pytest.raises(ValueError, match="a global batch of 32 does not split into micro-batches of 16 on 3"):
        accumulation_steps(32, 16, 3)


@pytest.mark.parametrize("binning", [False, True])
def test_squad_windows_of_each_step_do_not_depend_on_the_split(binning):
    num, seq = 700, 24
    lengths = 4 + np.random.default_rng(0).integers(0, seq - 4, num)
    attention = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int8)
    ids = (np.arange(num)[:, None] * 100 + np.arange(seq)[None, :]).astype(np.int32)
    zeros = np.zeros(num, dtype=np.int32)
    features = SquadFeatures(ids, attention * 0, attention, zeros, zeros, zeros, None, None, None)

    def steps(world_size, micro, start_step=0):
        ranks = [
            FineTuningBatches(features.training_arrays(), 16, micro, 5, r, world_size, binning)
            for r in range(world_size)
        ]
        for data in ranks:
            data.skip_samples(start_step * 16)
        iterators = [iter(data) for data in ranks]
        accumulation = ranks[0].accumulation_steps
        result = []
        for _ in range(ranks[0].batches_per_epoch - start_step):
            windows = [
                int(w)
                for _ in range(accumulation)
                for it in iterators
                for w in next(it)["input_ids"][:, 0] // 100
            ]
            result.append(sorted(windows))
        return result

    reference = steps(1, 16)
    assert len(reference) == 700 // 16
    for world_size, micro in [(2, 8), (1, 8), (2, 4), (4, 2)]:
        assert steps(world_size, micro) == reference
        assert steps(world_size, micro, start_step=41) == reference[41:]  # resumed near the end
