"""Set values in params.yaml from the command line, keeping its comments and layout (indentation,
long lines, `null`: only the lines of the keys set change):

    python -m scripts.set_params distributed.nnodes=4 distributed.nproc_per_node=8

Each value is read as YAML (4 is a number, true a boolean, node17 a string). The result is
checked with the stages' own schema before it replaces params.yaml, so a misspelt key or a value
out of range is one line and the file is left as it was; values it already holds leave it
untouched. The SLURM script uses it for the job's world size (a param: it changes the numbers);
where the job runs (the head node, the port, timeouts) is not a param but the environment
(docs/operations.md#execution-settings).
"""

import io
import sys
from pathlib import Path

from ruamel.yaml import YAML  # DVC's own YAML library: keeps comments and layout

from bert.atomic import atomic_file
from bert.errors import UserError, run_main
from bert.inputs import parse_yaml
from stages.common.params import PARAMS_FILE, load_params

USAGE = "usage: python -m scripts.set_params SECTION.KEY=VALUE ..."


def set_params(path: Path, assignments: list[str]) -> None:
    if not assignments:
        raise UserError(USAGE)
    round_trip = YAML()
    round_trip.width = 1 << 16  # never wrap a long URL
    round_trip.indent(mapping=2, sequence=4, offset=2)  # params.yaml's own
    round_trip.representer.add_representer(
        type(None), lambda representer, _: representer.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    before = path.read_text(encoding="utf-8")
    document = round_trip.load(before)
    for assignment in assignments:
        dotted, equals, text = assignment.partition("=")
        if not equals or not dotted:
            raise UserError(f"{assignment!r}: expected SECTION.KEY=VALUE; {USAGE}")
        *parents, last = dotted.split(".")
        node = document
        for key in parents:
            if not isinstance(node, dict) or key not in node:
                raise UserError(f"{path}: {dotted}: there is no section {key!r} to set it in")
            node = node[key]
        if not isinstance(node, dict) or last not in node:
            raise UserError(f"{path}: {dotted} is not a key of params.yaml (a new key would be ignored)")
        try:  # `[1`, `{a`, `!!int x`: what a -S value unquoted for YAML gives
            # the value as typed, escaped if it would break the line (a fuzz test found "\x1f\n")
            node[last] = parse_yaml(text, f"{dotted}={text if text.isprintable() else repr(text)}")
        except UserError as error:
            raise UserError(
                f"{error}; write a YAML value (4, true, node17, [a, b]) or quote the text in YAML: "
                f"{dotted}='\"...\"'"
            ) from None
    buffer = io.StringIO()
    round_trip.dump(document, buffer)
    if buffer.getvalue() == before:
        return  # nothing changes: the file keeps its time stamp too
    with atomic_file(path) as temporary:  # replaces params.yaml only if the schema accepts it
        temporary.write_text(buffer.getvalue(), encoding="utf-8")
        load_params(temporary)  # one line naming the key when a value does not fit


def main() -> None:
    set_params(Path(PARAMS_FILE), sys.argv[1:])


if __name__ == "__main__":
    run_main(main)
