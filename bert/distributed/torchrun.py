"""torchrun as the training launcher runs it on each node (`python -m bert.distributed.torchrun <torchrun's
options> -m <module> ...`): torch's own torchrun, with three differences.

- Each rank's output goes to a file of its own in `--log-dir`: rank<R>.log (stderr: the logs,
  warnings and tracebacks) and rank<R>.stdout.log, rank<R>.restart<K>.log after the K-th restart
  (torchrun's --max-restarts); local rank 0's also to the console.
- torchrun's own messages (its agent's warnings) go to torchrun-node<N>.log there, not the console.
- A failure prints no traceback: its facts (the first rank that failed, its host, its signal or
  exception, its log file; a signal to torchrun; a rendezvous error) go as JSON to the file that
  BERT_TORCHRUN_REPORT names, from which the stage writes one line (bert.distributed.launch), and the
  exit status is 1.

A rank tells torchrun why it failed through the file TORCHELASTIC_ERROR_FILE names
(record_rank_error, called by bert.distributed.launch.launch).
"""

import contextlib
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

REPORT_ENV = "BERT_TORCHRUN_REPORT"


def rank_log(log_dir: Path, rank: int, restart: int = 0, stream: str = "") -> Path:
    """The file of rank `rank`'s stderr (stream "") or stdout (stream "stdout") in attempt `restart`."""
    attempt = f".restart{restart}" if restart else ""
    return Path(log_dir) / f"rank{rank}{attempt}{'.' + stream if stream else ''}.log"


def record_rank_error(error: BaseException) -> None:
    """In a rank under torchrun: leave `error` (one line) where torchrun reads why the rank failed."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    from bert.errors import UserError

    message = str(error) if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
    with contextlib.suppress(OSError):  # else the failure is reported without its message
        Path(path).write_text(json.dumps({"message": message.strip(), "timestamp": str(int(time.time()))}))


def main(argv: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, LogsDest, SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args, parse_args

    args = parse_args(argv)
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    agent_log = logging.FileHandler(log_dir / f"torchrun-node{args.node_rank}.log", mode="w")
    agent_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("torch.distributed.elastic", "torch.distributed.launcher", "torch.distributed.run"):
        logger = logging.getLogger(name)
        logger.handlers, logger.propagate = [agent_log], False

    class RankLogs(DefaultLogsSpecs):
        """One file per rank and stream, named by the global rank, in log_dir itself."""

        def reify(self, envs: dict[int, dict[str, str]]) -> LogsDest:
            stdouts, stderrs, tee_stdouts, tee_stderrs, error_files = {}, {}, {}, {}, {}
            for local_rank, env in envs.items():
                rank, restart = int(env["RANK"]), int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
                stdouts[local_rank] = str(rank_log(log_dir, rank, restart, "stdout"))
                stderrs[local_rank] = str(rank_log(log_dir, rank, restart))
                error_files[local_rank] = str(log_dir / f"rank{rank}.error.json")
                Path(error_files[local_rank]).unlink(missing_ok=True)  # a former run's
                env["TORCHELASTIC_ERROR_FILE"] = error_files[local_rank]
                if local_rank == 0:
                    tee_stdouts[0], tee_stderrs[0] = stdouts[0], stderrs[0]
            return LogsDest(stdouts, stderrs, tee_stdouts, tee_stderrs, error_files)

    if args.standalone:  # as torchrun's own run() does
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", f"bert-{os.getpid()}"
    if args.master_port is None:
        args.master_port = 29500
    config, command, command_args = config_from_args(args)
    config.logs_specs = RankLogs(log_dir=str(log_dir))
    config.log_line_prefix_template = "[rank${rank}]: "  # the lines of local rank 0 on the console
    report = {"host": socket.gethostname(), "node_rank": args.node_rank}
    try:
        elastic_launch(config=config, entrypoint=command)(*command_args)
        return 0
    except ChildFailedError as failed:
        first_rank, first = failed.get_first_failure()
        signal_name = first.signal_name() if first.exitcode < 0 else None
        report.update(rank=first_rank, pid=first.pid, exitcode=first.exitcode, signal=signal_name,
                      message=first.message if os.path.isfile(first.error_file) else None,
                      log=str(rank_log(log_dir, first_rank, config.max_restarts and _restarts(log_dir, first_rank))),
                      failed_ranks=sorted(failed.failures))  # fmt: skip
    except SignalException as stopped:
        report.update(torchrun_signal=stopped.sigval.name)
    except Exception as error:  # a rendezvous that failed (the store, the network): its first line
        lines = str(error).strip().splitlines() or [""]
        report.update(error=f"{type(error).__name__}: {lines[0]}")
    if os.environ.get(REPORT_ENV):
        Path(os.environ[REPORT_ENV]).write_text(json.dumps(report))
    return 1


def _restarts(log_dir: Path, rank: int) -> int:
    """The attempt whose log a failed rank wrote last: the highest restart<K> present."""
    found = [int(p.name.split(".restart")[1].split(".")[0]) for p in log_dir.glob(f"rank{rank}.restart*.log")]
    return max([0, *found])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
