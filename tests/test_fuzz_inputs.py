"""Property-based fuzzing of every input door (issue 28), with hypothesis.

Each test starts from a real file (data/sample, or the tiny model and vocabulary the other tests
use), mutates it as files go wrong in practice — cut short, bytes flipped or inserted, saved in
another encoding, a JSON or YAML value swapped for one of another type, a huge field, an empty
file, an HTML page in its place — and runs the reader the stages use, or for two doors the real
stage command in a throw-away folder. The property: the reader either accepts the file or raises
a UserError whose message is one `error:` line naming the file, never a staging path; any other
exception (a traceback) fails the test; a stage exits 1 with one `error:` line and publishes
nothing.

Profiles (BERT_FUZZ): `quick` (the default: derandomized, a few dozen examples per door; part of
`make test`) and `long` (`make fuzz`: thousands per door, random). A failing example the long
profile finds becomes a fixed row of tests/test_bad_inputs.py.
"""

import json
import os
import shutil
import signal
import zipfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="pip install -r requirements-test.txt")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bert.corpus.task_text import task_documents  # noqa: E402
from bert.errors import UserError  # noqa: E402
from bert.inputs import check_content, read_yaml, read_zip_members  # noqa: E402
from bert.model.config import BertConfig  # noqa: E402
from bert.model.hf import read_weight_index  # noqa: E402
from bert.source_tree import Rules, open_regular, printable, walk_source  # noqa: E402
from bert.squad.dataset import dataset_version, examples_from_json, read_json  # noqa: E402
from bert.tasks.catalogue import task_named  # noqa: E402
from bert.tasks.data import read_split  # noqa: E402
from bert.text.tokenization import load_tokenizer  # noqa: E402
from tests.support.shard_fixtures import VOCAB, tiny_hf_folder  # noqa: E402
from tests.support.stage_workspace import REPO, repo_params, run_stage, set_params, write_params  # noqa: E402

COMMON = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
settings.register_profile("quick", max_examples=25, derandomize=True, **COMMON)
settings.register_profile("long", max_examples=2000, print_blob=True, **COMMON)
PROFILE = os.environ.get("BERT_FUZZ", "quick")
QUICK = PROFILE == "quick"
fuzz = settings.get_profile(PROFILE)

SAMPLE = REPO / "data/sample"
HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Sign in to continue</body></html>\n"
)


# ---- mutations ----------------------------------------------------------------------------------


def byte_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """The ways a file's bytes go wrong: cut short, bytes flipped, bytes inserted, another
    encoding, a huge run of one byte (a field over any limit), empty, an HTML page instead."""

    def flip(changes):
        out = bytearray(data)
        for at, value in changes:
            out[at % len(out)] = value
        return bytes(out)

    def insert(at_and_bytes):
        at, extra = at_and_bytes
        return data[: at % (len(data) + 1)] + extra + data[at % (len(data) + 1) :]

    def reencode(encoding):
        return data.decode("utf-8", errors="replace").encode(encoding, errors="replace")

    huge = st.tuples(st.integers(0, len(data)), st.sampled_from([b"x", b'"', b"\t", b"{", b"["])).map(
        lambda pick: insert((pick[0], pick[1] * 300_000))
    )
    return st.one_of(
        st.integers(0, max(len(data) - 1, 0)).map(lambda n: data[:n]),
        st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), min_size=1, max_size=8).map(flip),
        st.tuples(st.integers(0, 10**9), st.binary(min_size=1, max_size=16)).map(insert),
        st.sampled_from(["latin-1", "utf-16", "cp1252", "utf-32"]).map(reencode),
        huge,
        st.just(b""),
        st.just(HTML_PAGE),
    )


ANY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def swap_values(document, data: st.DataObject, swaps: int = 3):
    """`document` (parsed JSON/YAML) with up to `swaps` values, at paths drawn into it, replaced by
    values of any type: the type errors a hand-edited or foreign file has."""
    for _ in range(data.draw(st.integers(1, swaps))):
        parent, key, node = None, None, document
        while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            parent, key = node, data.draw(st.sampled_from(keys))
            node = node[key]
        if parent is None:
            document = data.draw(ANY_VALUE)
        else:
            parent[key] = data.draw(ANY_VALUE)
    return document


def assert_one_line_or_accepted(read) -> None:
    """The property: `read()` accepts the input, or raises a UserError that run_main prints as one
    `error:` line (later lines, as params.yaml's list of problems, are indented details) naming no
    staging copy. Any other exception propagates and fails the test, with hypothesis's example."""
    try:
        read()
    except UserError as error:
        message = str(error)
        assert message.strip(), "an empty message"
        assert not any(line.startswith("error:") for line in message.splitlines()), message
        assert ".partial" not in message and ".tmp-" not in message, message


def file_with(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# ---- the doors, read in-process -----------------------------------------------------------------

RTE_DEV = (SAMPLE / "glue/RTE/dev.tsv").read_bytes()
SWAG_VAL = (SAMPLE / "swag/val.csv").read_bytes()
SQUAD_DEV = (SAMPLE / "squad/v2.0/dev-v2.0.json").read_bytes()


@fuzz
@given(data=byte_mutations(RTE_DEV))
def test_glue_tsv(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("rte"), "dev.tsv", data)
    assert_one_line_or_accepted(lambda: read_split(task_named("rte"), path, source="sources/RTE/dev.tsv"))


@fuzz
@given(data=byte_mutations(SWAG_VAL))
def test_swag_csv(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("swag"), "val.csv", data)
    assert_one_line_or_accepted(lambda: read_split(task_named("swag"), path))


@fuzz
@given(data=byte_mutations(SQUAD_DEV))
def test_squad_json_bytes(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("squad"), "dev.json", data)

    def read():
        dataset = read_json(path)
        dataset_version(dataset) if isinstance(dataset, dict) else None
        examples_from_json(dataset, str(path))

    assert_one_line_or_accepted(read)


@fuzz
@given(data=st.data())
def test_squad_json_types(data):
    dataset = swap_values(json.loads(SQUAD_DEV), data, swaps=4)

    def read():
        if isinstance(dataset, dict):
            dataset_version(dataset)
        examples_from_json(dataset, "dev.json")

    assert_one_line_or_accepted(read)


@fuzz
@given(data=st.data())
def test_task_corpus_json_types(tmp_path_factory, data):
    """A kind: task corpus reads a SQuAD file for its text (bert.corpus.task_text), not the SQuAD reader."""
    squad = json.loads(SQUAD_DEV)
    dataset = swap_values(squad | {"data": squad["data"][:2]}, data, swaps=4)
    path = file_with(tmp_path_factory.mktemp("task-text"), "dev.json", json.dumps(dataset).encode())
    assert_one_line_or_accepted(
        lambda: list(task_documents(path, ["context", "question"], "sources/dev.json"))
    )


@fuzz
@given(data=byte_mutations(RTE_DEV))
def test_task_corpus_tsv_bytes(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("task-text"), "dev.tsv", data)
    assert_one_line_or_accepted(
        lambda: list(task_documents(path, ["sentence1", "sentence2"], "sources/dev.tsv"))
    )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return tiny_hf_folder(tmp_path_factory.mktemp("tiny") / "model")


@fuzz
@given(data=st.data())
def test_config_json_types(tiny_model, tmp_path_factory, data):
    config = swap_values(json.loads((tiny_model / "config.json").read_text()), data)
    path = file_with(tmp_path_factory.mktemp("config"), "config.json", json.dumps(config).encode())
    assert_one_line_or_accepted(lambda: BertConfig.from_json_file(path))


@fuzz
@given(data=st.data())
def test_config_json_bytes(tiny_model, tmp_path_factory, data):
    mutated = data.draw(byte_mutations((tiny_model / "config.json").read_bytes()))
    path = file_with(tmp_path_factory.mktemp("config"), "config.json", mutated)
    assert_one_line_or_accepted(lambda: BertConfig.from_json_file(path))


@fuzz
@given(data=byte_mutations(("\n".join(VOCAB) + "\n").encode()))
def test_vocab_file(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("vocab"), "vocab.txt", data)
    assert_one_line_or_accepted(lambda: load_tokenizer(path))


def params_text() -> bytes:
    import yaml

    return yaml.safe_dump(repo_params()).encode()


@fuzz
@given(data=byte_mutations(params_text()))
def test_params_yaml_bytes(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("params"), "params.yaml", data)
    assert_one_line_or_accepted(lambda: read_yaml(path))


@fuzz
@given(data=st.data())
def test_params_yaml_types(tmp_path_factory, monkeypatch_module, data):
    """The whole of load_params (schema and cross-checks) on params with values of other types."""
    import yaml

    from stages.common.params import load_params

    root = tmp_path_factory.mktemp("params")
    (root / "params.yaml").write_text(yaml.safe_dump(swap_values(repo_params(), data, swaps=2)))
    monkeypatch_module.chdir(root)
    assert_one_line_or_accepted(load_params)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def rte_zip() -> bytes:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("RTE/dev.tsv", RTE_DEV)
        zipped.writestr("RTE/train.tsv", RTE_DEV[:2000])
    return buffer.getvalue()


@fuzz
@given(data=byte_mutations(rte_zip()))
def test_zip_archive(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("zip"), "RTE.zip", data)

    def read():
        check_content(path, "https://example.org/RTE.zip")
        read_zip_members(path, lambda name: name.endswith(".tsv"), "https://example.org/RTE.zip")

    assert_one_line_or_accepted(read)


@fuzz
@given(data=st.data())
def test_weight_index(tiny_model, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("index")
    shutil.copy(tiny_model / "pytorch_model.bin", folder / "pytorch_model-00001-of-00001.bin")
    index = {"metadata": {}, "weight_map": {"bert.pooler.dense.bias": "pytorch_model-00001-of-00001.bin"}}
    text = json.dumps(index).encode()
    mutated = data.draw(
        st.one_of(byte_mutations(text), st.just(json.dumps(swap_values(index, data)).encode()))
    )
    path = file_with(folder, "pytorch_model.bin.index.json", mutated)
    assert_one_line_or_accepted(lambda: read_weight_index(path))


@fuzz
@given(data=byte_mutations(b"BZh91AY&SY" + bytes(range(256)) * 4))
def test_downloaded_dump_content(tmp_path_factory, data):
    path = file_with(tmp_path_factory.mktemp("dump"), "enwiki-latest-pages-articles.xml.bz2", data)
    assert_one_line_or_accepted(lambda: check_content(path, "https://dumps.example.org/x.bz2"))


# ---- the execution settings and the command line -----------------------------------------------

EXECUTION_VARIABLES = ("BERT_RDZV_ENDPOINT", "BERT_DIST_TIMEOUT_MINUTES", "BERT_MAX_RESTARTS", "BERT_LOG_DIR")
# What an environment variable can hold: no NUL, and no lone surrogate but those that stand for
# undecodable bytes (os.environ's surrogateescape).
ENV_CHARACTERS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\0")
ENV_VALUES = st.one_of(
    st.text(ENV_CHARACTERS, max_size=30),
    st.text(st.characters(whitelist_categories=("Nd", "No")), min_size=1, max_size=6),  # every script's digits
    st.from_regex(r"[a-z0-9.\[\]:]{0,12}:[0-9²١]{0,7}", fullmatch=True),
    st.sampled_from(["data", "data/models", "data/squad", "metrics", "notes.txt", "notes.txt/logs", "/", "..",
                     "1e3", "nan", "-0", "1_0", " 7 ", "[::1]:29500", "x" * 300]),
)  # fmt: skip


@fuzz
@given(name=st.sampled_from(EXECUTION_VARIABLES), value=ENV_VALUES, run=st.sampled_from(["phase1", "squad"]))
def test_execution_settings(tmp_path_factory, monkeypatch_module, name, value, run):
    """Any value of each variable gives a valid Execution, or a UserError in one line naming the
    variable, checked as a training stage checks them (bert.distributed.launch.launch)."""
    from bert.distributed.launch import PORT, execution_from_environment
    from stages.common import layout

    root = tmp_path_factory.mktemp("project")
    (root / "data/models").mkdir(parents=True)
    (root / "notes.txt").write_text("a file")
    monkeypatch_module.chdir(root)
    for variable in EXECUTION_VARIABLES:
        monkeypatch_module.delenv(variable, raising=False)
    monkeypatch_module.setenv(name, value)
    try:
        execution = execution_from_environment(os.environ, layout.logs(run), layout.OUTPUT_FOLDERS)
    except UserError as error:
        message = str(error)
        assert "\n" not in message and message.startswith(f"{name}=" if value else "data/logs/"), message
        return
    host, _, port = execution.rdzv_endpoint.rpartition(":")
    assert host and PORT.fullmatch(port) and 1 <= int(port) <= 65535
    assert 0 < execution.timeout_minutes <= 24 * 60 and 0 <= execution.max_restarts <= 100
    assert execution.log_dir == layout.logs(run)
    assert not any(execution.log_dir.is_relative_to(output) for output in layout.OUTPUT_FOLDERS)


@fuzz
@given(
    value=st.text(ENV_CHARACTERS, max_size=30),
    key=st.sampled_from(["seed", "model.size", "distributed.threads_per_rank"]),
)
def test_set_params_values(tmp_path_factory, monkeypatch_module, key, value):
    """`python -m scripts.set_params KEY=VALUE` (the SLURM script's, and -S's syntax): any value
    is set, or one line that leaves params.yaml as it was."""
    from scripts.set_params import set_params

    monkeypatch_module.chdir(REPO)  # where params.yaml's sources are
    path = tmp_path_factory.mktemp("params") / "params.yaml"
    path.write_text((REPO / "params.yaml").read_text())
    before = path.read_bytes()
    try:
        set_params(path, [f"{key}={value}"])
    except UserError as error:
        assert "\n" not in str(error).split("\n  params.yaml: ")[0], str(error)
        assert path.read_bytes() == before


# ---- local source trees (bert.source_tree) ---------------------------------------------------------

# What a user's source folder may hold, and what the walk makes of it: "file" (returned), "skipped"
# (a link to a folder, named), "bad" (refused), or "outside" (a link leaving the folder: returned
# or skipped with follow_links, refused without it).
TREE_ENTRIES = {
    "file": "file",
    "folder": "folder",
    "fifo": "bad",
    "link to a file inside": "file",
    "link to a folder inside": "skipped",
    "dangling link": "bad",
    "link loop": "bad",
    "link to a file outside": "outside file",
    "link to a folder outside": "outside skipped",
}


def build_entry(path: Path, kind: str, root: Path, outside: Path) -> None:
    make = {
        "file": lambda: path.write_text("a book"),
        "folder": lambda: path.mkdir(),
        "fifo": lambda: os.mkfifo(path),
        "link to a file inside": lambda: path.symlink_to(root / "target.txt"),
        "link to a folder inside": lambda: path.symlink_to(root / "shelf"),
        "dangling link": lambda: path.symlink_to(root / "nowhere"),
        "link loop": lambda: path.symlink_to(path.name),
        "link to a file outside": lambda: path.symlink_to(outside / "book.txt"),
        "link to a folder outside": lambda: path.symlink_to(outside),
    }
    make[kind]()


class WalkTookTooLong(Exception):
    pass


def _took_too_long(*_) -> None:
    raise WalkTookTooLong  # interrupts a blocking open() of a FIFO, which is what a hang would be


REFUSED_ENTRIES = sorted(kind for kind, verdict in TREE_ENTRIES.items() if verdict == "bad")
OTHER_ENTRIES = sorted(kind for kind, verdict in TREE_ENTRIES.items() if verdict != "bad")


@settings(fuzz, max_examples=60 if QUICK else 2000)  # cheap: no file is read
@given(
    entries=st.lists(
        st.tuples(st.sampled_from(["", "sub", "sub/deeper"]), st.sampled_from(["a", ".hidden", "b c", "new\nline"]),
                  # one entry in three refused whatever follow_links says: trees with one alone are common
                  st.one_of(st.sampled_from(OTHER_ENTRIES), st.sampled_from(OTHER_ENTRIES),
                            st.sampled_from(REFUSED_ENTRIES))),
        max_size=6,
    ),
    follow_links=st.booleans(),
)  # fmt: skip
# Each kind alone, whatever the draws (the quick profile's few dozen may miss one):
@example(entries=[("", "a", "fifo")], follow_links=True)
@example(entries=[("sub", "new\nline", "dangling link")], follow_links=True)
@example(entries=[("sub/deeper", ".hidden", "link loop")], follow_links=True)
@example(entries=[("", "a", "link to a file outside")], follow_links=False)
@example(entries=[("sub", "a", "link to a file outside")], follow_links=True)
@example(entries=[("", "b c", "link to a folder outside")], follow_links=False)
@example(entries=[("", "b c", "link to a folder outside")], follow_links=True)
@example(
    entries=[("sub", "a", "link to a folder inside"), ("", "a", "link to a file inside")], follow_links=False
)
def test_a_source_tree_is_its_allowed_files_or_one_line_naming_an_offending_entry(
    tmp_path_factory, entries, follow_links
):
    """Folders of regular files, folders, FIFOs, and links inside, out of the folder, dangling or
    looping: the walk returns exactly the regular files the rule allows (and names the links to
    folders it skips), or raises one UserError naming an offending entry; it never follows a link
    out of the folder without follow_links, and never hangs (an alarm would interrupt it)."""
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "source", base / "outside"
    (root / "shelf").mkdir(parents=True)
    (root / "target.txt").write_text("the target")
    outside.mkdir()
    (outside / "book.txt").write_text("a book elsewhere")
    made = {"shelf": "folder", "target.txt": "file"}
    for folder, name, kind in entries:
        relative = f"{folder}/{name}" if folder else name
        if relative in made:
            continue
        (root / folder).mkdir(parents=True, exist_ok=True)  # entry names are never "sub" nor "deeper"
        made.update({parent: "folder" for parent in ("sub", "sub/deeper") if (root / parent).is_dir()})
        build_entry(root / relative, kind, root, outside)
        made[relative] = kind
    verdicts = {relative: TREE_ENTRIES[kind] for relative, kind in made.items()}
    if follow_links:
        verdicts = {relative: verdict.removeprefix("outside ") for relative, verdict in verdicts.items()}
    refused = {
        relative
        for relative, verdict in verdicts.items()
        if verdict == "bad" or verdict.startswith("outside")
    }

    previous = signal.signal(signal.SIGALRM, _took_too_long)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        tree = walk_source(str(root), root, Rules(follow_links=follow_links), "corpora.c.sources")
    except UserError as error:
        message = str(error)
        assert "\n" not in message and message.startswith("corpora.c.sources: "), message
        assert any(
            message.startswith(f"corpora.c.sources: {printable(f'{root}/{relative}')} ")
            for relative in refused
        ), message
        return
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not refused, f"accepted {refused}"
    assert sorted(tree.files) == sorted(
        relative for relative, verdict in verdicts.items() if verdict == "file"
    )
    assert set(tree.skipped) == {relative for relative, verdict in verdicts.items() if verdict == "skipped"}
    for path in tree.file_paths():  # each is a regular file, readable without a wait
        with open_regular(path, str(path)) as file:
            file.read()


# ---- two doors through the real stage command ---------------------------------------------------

STAGE_EXAMPLES = settings(fuzz, max_examples=4 if QUICK else 200)


def assert_stage_fails_cleanly_or_publishes(root: Path, command: tuple[str, ...], published: str) -> None:
    result = run_stage(root, *command, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    if result.returncode == 0:
        assert (root / published).exists()
        return
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert ".partial" not in errors[0] and ".tmp-" not in errors[0], errors[0]
    assert not (root / published).exists()


@STAGE_EXAMPLES
@given(data=byte_mutations(RTE_DEV))
def test_download_task_stage(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("project")
    write_params(root)
    file_with(root, "sources/RTE/train.tsv", RTE_DEV)
    file_with(root, "sources/RTE/dev.tsv", data)
    set_params(root, {"tasks.rte.sources": ["sources/RTE"]})
    assert_stage_fails_cleanly_or_publishes(root, ("stages.download_task", "rte"), "data/tasks/rte")


@STAGE_EXAMPLES
@given(data=st.data())
def test_download_squad_stage(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("project")
    write_params(root)
    dev = data.draw(
        st.one_of(
            byte_mutations(SQUAD_DEV), st.just(json.dumps(swap_values(json.loads(SQUAD_DEV), data)).encode())
        )
    )
    file_with(root, "sources/train.json", SQUAD_DEV)
    file_with(root, "sources/dev.json", dev)
    files = {"train": "sources/train.json", "dev": "sources/dev.json"}
    set_params(root, {"squad.sources": {"v1.1": files, "v2.0": files}, "squad.run": ["v2.0"]})
    assert_stage_fails_cleanly_or_publishes(root, ("stages.download_squad",), "data/squad")


# ---- a corpus folder's life, in any order, through the real DVC commands (issue 49) ----------------

# What a user does to a corpus folder between DVC commands: `run` is `dvc repro download@books`,
# `status` is `dvc status`; the rest change the folder (wherever it is: `delete` moves it away,
# `restore` back; `fifo` puts a named pipe into it, `fix` removes the pipe).
FOLDER_EVENTS = ["run", "status", "add", "edit", "remove", "fifo", "fix", "delete", "restore"]
FIRST_BOOKS = 2


@pytest.fixture(scope="module")
def books_project(tmp_path_factory) -> Path:
    """A project whose one corpus is a folder of the user's books, downloaded once."""
    from tests.support.dvc_commands import dvc
    from tests.support.stage_workspace import copy_project

    base = tmp_path_factory.mktemp("books-project")
    root = copy_project(base / "project")
    books = base / "books"
    set_params(root, {"corpora": {"books": {"kind": "text", "columns": [], "sources": [str(books)], "checksums": []}},
                      "mixing.weights": {"books": 1.0}})  # fmt: skip
    reset_books(books)
    dvc(root, "repro", "download@books")
    return root


def reset_books(books: Path) -> None:
    """The folder as the fixture downloaded it, at its place (bytes equal: its manifest is too)."""
    for folder in (books, books.with_name("books-away")):
        shutil.rmtree(folder, ignore_errors=True)
    books.mkdir()
    for book in sorted((SAMPLE / "books/txt").glob("*.txt"))[:FIRST_BOOKS]:
        shutil.copy(book, books / book.name)


def apply_event(event: str, books: Path, away: Path) -> None:
    folder = books if books.exists() else away
    texts = sorted(folder.glob("*.txt"))
    if event == "add":
        (folder / f"added-{len(texts)}.txt").write_text(f"An added book, the {len(texts)}th.\n")
    elif event == "edit":
        texts[0].write_text(texts[0].read_text() + "An edited line.\n")
    elif event == "remove" and len(texts) > 1:
        texts[-1].unlink()
    elif event == "fifo" and not (folder / "pipe").exists():
        os.mkfifo(folder / "pipe")
    elif event == "fix":
        (folder / "pipe").unlink(missing_ok=True)
    elif event == "delete" and books.exists():
        books.rename(away)
    elif event == "restore" and away.exists():
        away.rename(books)


def check_repro(project: Path, books: Path) -> None:
    """`dvc repro download@books` ends, and: a missing folder or a FIFO in it is one line of the
    `sources` stage naming the param and entry; otherwise data/raw/books holds the folder's books,
    and the download ran only if they changed."""
    from tests.support.dvc_commands import error_lines, run_dvc, stages_run

    raw = project / "data/raw/books"
    published = {path.name: path.read_bytes() for path in raw.iterdir()}
    done = run_dvc(project, "repro", "download@books", timeout=120)
    if not books.exists():
        assert done.returncode != 0 and error_lines(done.stderr) == [
            f"error: params.yaml: corpora.books.sources: {books} does not exist"
        ], done.stderr
    elif (books / "pipe").exists():
        assert done.returncode != 0 and error_lines(done.stderr) == [
            f"error: corpora.books.sources: {books}/pipe is a named pipe (FIFO); a source folder holds regular "
            "files and folders only (reading it could hang or fail): remove it"
        ], done.stderr
    else:
        assert done.returncode == 0, done.stderr
        wanted = {path.name: path.read_bytes() for path in books.glob("*.txt")}
        assert {path.name: path.read_bytes() for path in raw.iterdir()} == wanted
        if wanted == published:
            assert "download@books" not in stages_run(done.stdout), done.stdout


@settings(fuzz, max_examples=2 if QUICK else 100)  # seconds of DVC per event
@given(events=st.lists(st.sampled_from(FOLDER_EVENTS), min_size=1, max_size=4))
@example(events=["fifo", "status", "run", "fix", "run"])
@example(events=["run", "delete", "status", "run", "restore", "edit", "run"])
def test_a_corpus_folder_changed_in_any_order_never_hangs_dvc_and_reruns_exactly_its_download(
    books_project, events
):
    """Runs, added, edited and removed books, a FIFO put in and taken out, the folder moved away and
    back, in any order: no DVC command hangs (each has a timeout) or fails but `dvc repro` on a
    FIFO or a missing folder, in one line of the `sources` stage; every good `dvc repro` leaves
    data/raw/books equal to the folder. Each example starts from the folder the fixture downloaded."""
    from tests.support.dvc_commands import run_dvc

    books = books_project.parent / "books"
    reset_books(books)
    for event in [*events, "status"]:
        if event == "run":
            check_repro(books_project, books)
        elif event == "status":
            done = run_dvc(books_project, "status", timeout=60)
            assert done.returncode == 0, done.stderr
        else:
            apply_event(event, books, books.with_name("books-away"))
