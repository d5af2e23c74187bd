"""Which engine runs the data stages' tasks (bert.parallel): params.yaml `compute`. Kept apart
from bert.parallel, so that reading params (every stage) does not import the engine."""

import os
import urllib.parse
from dataclasses import dataclass

SCHEDULERS = ("local", "dask")  # or the address of a Dask scheduler


@dataclass(frozen=True)
class Compute:
    """Which engine runs a stage's tasks, and on how many worker processes (0 = every core; for
    a scheduler address, the cluster's workers decide)."""

    scheduler: str = "local"
    num_workers: int = 1

    @classmethod
    def of(cls, compute: "Compute | int") -> "Compute":
        """A Compute as is; a number as that many local workers (the library's shorthand)."""
        return cls("local", compute) if isinstance(compute, int) else compute

    @property
    def workers(self) -> int:
        return self.num_workers or os.cpu_count() or 1

    def describe(self) -> str:
        if self.scheduler == "local":
            return f"{self.workers} local worker{'s' if self.workers > 1 else ''}"
        if self.scheduler == "dask":
            return f"a Dask LocalCluster of {self.workers} workers"
        return f"the Dask scheduler at {self.scheduler}"


def is_scheduler_address(scheduler: str) -> bool:
    """tcp://host:8786 and the like: a running Dask scheduler."""
    return "://" in scheduler


SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")  # the protocols Dask's comms speak


def scheduler_address_problem(address: str) -> str | None:
    """What is wrong with a Dask scheduler address (scheme://host[:port]), or None: checked before
    any work, rather than found when the stage tries to connect."""
    parts = urllib.parse.urlsplit(address)
    if parts.scheme not in SCHEDULER_SCHEMES:
        return f"unknown scheme {parts.scheme + '://'!r}; a Dask scheduler's address is tcp://host:port or tls://host:port"
    if parts.scheme == "inproc":
        return None
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port == -1 or port == 0:
        return f"the port {parts.netloc.rpartition(':')[2]!r} is not a number from 1 to 65535; Dask's default is 8786"
    if not parts.hostname or parts.path or parts.query or parts.fragment:
        return f"expected {parts.scheme}://host:port (e.g. {parts.scheme}://node1:8786)"
    return None
