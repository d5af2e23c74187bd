"""How one optimizer step's global batch is split over ranks and accumulation micro-batches.

The global batch is what a run is defined by (`global_batch_size` in params.yaml); the per-device
`micro_batch_size` and the number of processes only decide how it is computed:

    global_batch_size = micro_batch_size x accumulation_steps x world_size

The data loaders (bert.pretraining.loader, bert.training.finetune) put an epoch's rows in an order that
depends on (seed, epoch) only, cut it into global batches, and give micro-step m of rank r the
slice `micro_slice(m, r, world_size)` of its global batch. So the rows of every optimizer step are
the same on any number of ranks, and a checkpoint's data position (epoch, global samples consumed)
resumes on another one. Micro-step-major slices (all ranks' m-th micro-batches are consecutive
rows) keep ranks balanced when the global batch is sorted by length (bert.training.binning).
"""


def accumulation_steps(global_batch_size: int, micro_batch_size: int, world_size: int) -> int:
    """Micro-batches each rank runs per optimizer step. (The stages check the split first, naming
    the params: stages.common.params.Params.check_global_batch.)"""
    per_micro_step = micro_batch_size * world_size
    if global_batch_size % per_micro_step:
        raise ValueError(
            f"a global batch of {global_batch_size} does not split into micro-batches of {micro_batch_size} "
            f"on {world_size} processes (a multiple of {per_micro_step} would)"
        )
    return global_batch_size // per_micro_step


def micro_slice(micro_step: int, rank: int, world_size: int) -> int:
    """Which micro-batch-sized slice of its global batch rank `rank` takes at `micro_step`."""
    return micro_step * world_size + rank
