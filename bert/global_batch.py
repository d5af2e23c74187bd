"""How one optimizer step's global batch is split over ranks and accumulation micro-batches.

The global batch is what a run is defined by (`global_batch_size` in params.yaml); the per-device
`micro_batch_size` and the number of processes only decide how it is computed:

    global_batch_size = micro_batch_size x accumulation_steps x world_size

The data loaders (bert.pretraining_loader, bert.finetune) put an epoch's rows in an order that
depends on (seed, epoch) only, cut it into global batches, and give micro-step m of rank r the
slice `micro_slice(m, r, world_size)` of its global batch. So the rows of every optimizer step are
the same on any number of ranks, and a checkpoint's data position (epoch, global samples consumed)
resumes on another one. Micro-step-major slices (all ranks' m-th micro-batches are consecutive
rows) keep ranks balanced when the global batch is sorted by length (bert.binning).
"""

from bert.errors import UserError


def accumulation_steps(
    global_batch_size: int, micro_batch_size: int, world_size: int, params: str = ""
) -> int:
    """Micro-batches each rank runs per optimizer step. `params` prefixes the names in the error
    ("pretrain.phase1.") so that it names the params.yaml keys to change."""
    per_micro_step = micro_batch_size * world_size
    if global_batch_size % per_micro_step:
        raise UserError(
            f"params.yaml: {params}global_batch_size {global_batch_size} is not a multiple of "
            f"{params}micro_batch_size {micro_batch_size} x world size {world_size} (= {per_micro_step}); "
            "change one of them so that it divides exactly"
        )
    return global_batch_size // per_micro_step


def micro_slice(micro_step: int, rank: int, world_size: int) -> int:
    """Which micro-batch-sized slice of its global batch rank `rank` takes at `micro_step`."""
    return micro_step * world_size + rank
