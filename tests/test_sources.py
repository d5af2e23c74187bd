"""Local sources are tracked by content: an edited, added or removed file of a task, a corpus folder,
weights or SQuAD makes `dvc status` name its download stage (and nothing else), and `dvc repro`
reruns it; the bundled data/sample reruns nothing once params point elsewhere; URLs are never deps.
A source DVC could not hash (a FIFO, a device, a link loop, ...) stops `dvc repro` in one line of
the `sources` stage, and no DVC command hangs or is left stuck by it.

One throw-away project whose params point at a user's own folders under tmp; its download stages
run once (seconds), then each test compares `dvc status` before and after its edit."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bert.download.source_links import LISTING, link_sources
from bert.errors import UserError
from bert.source_tree import STRICT, Rules
from tests.support.stage_workspace import copy_project, run_stage, set_params

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data/sample"
DVC = str(Path(sys.executable).with_name("dvc"))
DOWNLOADS = ["download@books", "download_task@rte", "download_squad@v1.1", "download_weights@mine",
             "download_weights@other"]  # fmt: skip


def run_dvc(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`dvc <args>` in a process group of its own: a hang fails the test (and the group is killed)
    instead of hanging the suite, and so does a process it leaves behind."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [DVC, *args]
    process = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"dvc {' '.join(args)} hung for {timeout} s")
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail(f"dvc {' '.join(args)} left a process behind")


def dvc(project: Path, *args: str) -> subprocess.CompletedProcess:
    done = run_dvc(project, *args)
    assert done.returncode == 0, f"dvc {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def status(project: Path) -> dict:
    return json.loads(dvc(project, "status", "--json").stdout)


def changed_by(project: Path, edit) -> set[str]:
    """The stages whose `dvc status` entry differs after `edit()` from before it."""
    before = status(project)
    edit()
    after = status(project)
    return {stage for stage in {*before, *after} if before.get(stage) != after.get(stage)}


def repro(project: Path, target: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", dvc(project, "repro", target).stdout)


def save_weights(folder: Path, seed: int) -> None:
    import torch

    from bert.model.config import BertConfig
    from bert.model.network import BertForQuestionAnswering
    from tests.support.shard_fixtures import VOCAB, write_vocab

    folder.mkdir(exist_ok=True)
    write_vocab(folder / "vocab.txt")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=32)  # fmt: skip
    BertForQuestionAnswering(config).save_pretrained(folder, vocab_file=folder / "vocab.txt")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project whose params name the user's own files (and a URL corpus), its downloads done."""
    tmp = tmp_path_factory.mktemp("sources")
    user = tmp / "user"
    shutil.copytree(SAMPLE / "glue/RTE", user / "RTE")
    (user / "books").mkdir(parents=True)
    for book in sorted((SAMPLE / "books/txt").glob("*.txt"))[:3]:
        shutil.copy(book, user / "books" / book.name)
    for split in ("train", "dev"):
        shutil.copy(SAMPLE / f"squad/v1.1/{split}-v1.1.json", user / f"{split}.json")
    save_weights(user / "weights", seed=0)
    save_weights(user / "other-weights", seed=1)
    root = copy_project(tmp / "project")
    set_params(
        root,
        {
            "corpora": {
                "books": {"kind": "text", "columns": [], "sources": [str(user / "books")], "checksums": []},
                "web": {"kind": "wikipedia", "columns": [], "sources": ["https://127.0.0.1:9/x.xml.bz2"], "checksums": []},
            },
            "mixing.weights": {"books": 1.0},
            "tasks.run": {"rte": "finetune.init"},
            "tasks.rte.sources": [str(user / "RTE")],
            "squad.sources": {"v1.1": {"train": str(user / "train.json"), "dev": str(user / "dev.json")},
                              "v2.0": {"train": "https://127.0.0.1:9/t.json", "dev": "https://127.0.0.1:9/d.json"}},
            "weights": {"mine": str(user / "weights"), "other": str(user / "other-weights"),
                        "google": "https://127.0.0.1:9/bert"},
            "finetune.init": "mine",
        },
    )  # fmt: skip
    ran = re.findall(r"Running stage '([^']+)'", dvc(root, "repro", *DOWNLOADS).stdout)
    assert sorted(ran) == sorted(["sources", *DOWNLOADS])
    return root


def test_downloads_are_up_to_date_and_no_dep_is_a_url(project):
    """`dvc status` never needs the network: URL sources are no deps (the web corpus's stage is
    listed only because it never ran)."""
    from dvc.repo import Repo

    assert not set(status(project)) & {"sources", *DOWNLOADS}
    with Repo(str(project)) as repo:
        urls = [dep.def_path for stage in repo.index.stages for dep in stage.deps if "://" in dep.def_path]
    assert urls == []


def test_an_edited_task_file_reruns_its_download_stage_only(project):
    train = project.parent / "user/RTE/train.tsv"

    def edit():  # the first example's first sentence
        train.write_text(re.sub(r"\n(\d+)\t", r"\n\1\tEdited. ", train.read_text(), count=1))

    assert changed_by(project, edit) == {"download_task@rte"}
    assert repro(project, "download_task@rte") == ["download_task@rte"]
    assert "Edited. " in (project / "data/tasks/rte/train.tsv").read_text()
    assert "download_task@rte" not in status(project)


def test_a_book_added_to_or_removed_from_a_corpus_folder_reruns_its_download(project):
    new_book = project.parent / "user/books/new-book.txt"
    assert changed_by(project, lambda: new_book.write_text("A new book.\n\nIts second paragraph.\n")) == {
        "download@books"
    }
    assert repro(project, "download@books") == ["download@books"]
    assert (project / "data/raw/books/new-book.txt").is_file()
    assert changed_by(project, new_book.unlink) == {"download@books"}


def test_weights_replaced_in_place_rerun_the_download_finetune_init_names(project):
    user = project.parent / "user"
    # The entry finetune.init does not name is not fetched: its folder is nobody's dependency.
    assert changed_by(project, lambda: save_weights(user / "other-weights", seed=3)) == set()
    assert changed_by(project, lambda: save_weights(user / "weights", seed=2)) == {"download_weights@mine"}


def test_an_edited_squad_file_reruns_download_squad(project):
    """A file among several sources is a link inside the slot folder, which the sources stage's
    own output holds too: both are named, and the sources stage reruns to the same links."""
    dev = project.parent / "user/dev.json"
    assert changed_by(project, lambda: dev.write_text(dev.read_text().replace('"title"', '"title" ', 1))) == {
        "sources",
        "download_squad@v1.1",
    }
    assert repro(project, "download_squad") == ["sources", "download_squad@v1.1"]


def test_the_bundled_sample_reruns_nothing_once_params_point_elsewhere(project):
    def edit():
        for path in (
            project / "data/sample/glue/RTE/train.tsv",
            project / "data/sample/squad/v1.1/dev-v1.1.json",
        ):
            path.write_text(path.read_text() + "\n")
        shutil.rmtree(project / "data/sample/books")

    assert changed_by(project, edit) == set()


# --- sources DVC could not hash: refused before they are linked ---------------------------------


def bad_sources(root: Path) -> dict[str, tuple[str, str]]:
    """Every kind of local source the `sources` stage refuses, made under `root`:
    {kind: (the source as params.yaml gives it, what its error line says)}. (/dev/urandom, another
    character device, and data/ itself, another place the pipeline writes, are rows of
    test_a_source_that_cannot_be_tracked_is_one_line: the same classes, seconds of DVC each.)"""
    root.mkdir()
    os.mkfifo(root / "fifo")
    for folder in ("piped", "escaping", "line\nbreak"):
        (root / folder).mkdir()
        (root / folder / "book.txt").write_text("A book.\n")
    os.mkfifo(root / "piped/pipe")
    (root / "escaping/passwd").symlink_to("/etc/passwd")
    (root / "loop").symlink_to("loop")
    (root / "dangling").symlink_to("nowhere")
    return {
        "FIFO": (f"{root}/fifo", "fifo is a named pipe (FIFO), not a file or folder"),
        "/dev/zero": ("/dev/zero", "/dev/zero is a character device, not a file or folder"),
        "a folder holding a FIFO": (f"{root}/piped", "piped/pipe is a named pipe (FIFO); a source folder holds"),
        "a link loop": (f"{root}/loop", "loop is a symbolic link loop; check the path in params.yaml"),
        "a dangling link": (f"{root}/dangling", "dangling is a symbolic link to nowhere, which does not exist"),
        "a link out of the folder": (f"{root}/escaping", "escaping/passwd is a symbolic link to /etc/passwd, outside"),
        "a pipeline output": ("data/raw/books", "data/raw/books lies in data/, where the pipeline writes its outputs"),
        "a line break": (f"{root}/line\nbreak", "line\\nbreak' holds a line break"),
    }  # fmt: skip


def test_a_source_dvc_could_not_hash_stops_dvc_repro_in_one_line_and_hangs_nothing(project):
    """Each kind through `dvc repro` (a hang fails run_dvc): one line of the `sources` stage naming
    the param, and no link left for DVC to hash (DVC removed the old ones before running the stage,
    which published none), so `dvc status` runs; the fixed params then run with no clean-up. (One
    `dvc status` for all kinds: each leaves the same state, which the lexists check holds.)"""
    books, before = project.parent / "user/books", status(project)
    for kind, (source, words) in bad_sources(project.parent / "bad").items():
        set_params(project, {"corpora.books.sources": [source]})
        done = run_dvc(project, "repro", "sources", timeout=60)
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode != 0 and len(errors) == 1, (kind, done.stderr)
        assert errors[0].startswith("error: corpora.books.sources: "), (kind, errors[0])
        assert words in errors[0], (kind, errors[0])
        assert not os.path.lexists(project / "data/sources"), kind
    assert run_dvc(project, "status", timeout=60).returncode == 0
    set_params(project, {"corpora.books.sources": [str(books)]})
    assert repro(project, "sources") == ["sources"]
    assert status(project) == before


def test_a_source_deleted_after_a_good_run_hangs_nothing_and_is_relinked_where_params_point(project):
    """DVC hashes the links before any stage runs, so a link whose source is gone stops `dvc status`
    and `dvc repro` with DVC's own line naming it (they cannot run the stage first); the stage run
    alone names the param. Pointing params.yaml at the new place relinks it with no clean-up.
    (Last of the project's tests: it leaves the books at their new place.)"""
    books, before = project.parent / "user/books", status(project)
    moved = books.rename(project.parent / "user/moved-books")
    for command in ("status", "repro"):
        done = run_dvc(project, command, timeout=60)
        assert done.returncode != 0 and "data/sources/corpora/books" in done.stderr, done.stderr
    stage = run_stage(project, "stages.sources")
    assert stage.returncode == 1 and stage.stderr.strip() == (
        f"error: params.yaml: corpora.books.sources: {books} does not exist"
    )
    set_params(project, {"corpora.books.sources": [str(moved)]})
    assert repro(project, "download@books") == ["sources", "download@books"]
    after = status(project)
    assert "download@books" not in after and after == {
        k: v for k, v in before.items() if k != "download@books"
    }


# --- the slots themselves (bert.download.source_links) ------------------------------------------------------


def test_a_slot_links_one_source_or_lists_several(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder/a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    link_sources(Path("slots/one"), ["folder"], "corpora.one.sources", STRICT)
    assert os.readlink("slots/one") == "../folder"  # relative: the project may move
    assert Path("slots/one/a.txt").read_text() == "a"
    link_sources(Path("slots/url"), ["file://" + str(tmp_path / "b.txt")], "weights.url", STRICT)
    assert os.readlink("slots/url") == str(tmp_path / "b.txt")
    sources = ["b.txt", "https://example.org/b.txt", "folder/a.txt"]
    link_sources(Path("slots/many"), sources, "tasks.swag.sources", STRICT)
    assert sorted(p.name for p in Path("slots/many").iterdir()) == ["0-b.txt", "2-a.txt", LISTING]
    assert Path("slots/many", LISTING).read_text().splitlines() == sources
    link_sources(Path("slots/remote"), ["https://example.org/x"], "weights.google", STRICT)
    assert [p.name for p in Path("slots/remote").iterdir()] == [LISTING]


# The stages' rules (stages/layout.py OUTPUT_ROOTS) in a test's folder, with params.yaml's follow_links true.
FOLLOWING = Rules(follow_links=True, reserved=(Path("data"), Path("metrics")), bundled=(Path("data/sample"),))


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        (["folder", "b.txt"], "corpora.c.sources: folder is a folder among 2 sources; DVC can track"),
        (["missing.txt"], "corpora.c.sources: missing.txt does not exist; check the path in params.yaml"),
        (["."], "corpora.c.sources: . holds data/, where the pipeline writes its outputs"),
        (["data"], "corpora.c.sources: data is data/, where the pipeline writes its outputs"),
        (["b.txt", "/dev/urandom"], "corpora.c.sources: /dev/urandom is a character device, not a file or folder"),
        (["metrics/squad.json"], "corpora.c.sources: metrics/squad.json lies in metrics/, where the pipeline"),
        (["b.txt", "https://example.org/a\rb"], "corpora.c.sources: 'https://example.org/a\\rb' holds a line break"),
        (["books"], "corpora.c.sources: books/gone.txt is a symbolic link to ../nowhere.txt, which does not exist; "
                    "remove the link"),
        (["data/sample/books"], "corpora.c.sources: data/sample/books/raw.txt (a link to "),
    ],
)  # fmt: skip
def test_a_source_that_cannot_be_tracked_is_one_line(tmp_path, monkeypatch, sources, message):
    """Nothing is linked then, not even the sources before the bad one. (Each kind DVC could not
    hash is a row of test_a_source_dvc_could_not_hash_stops_dvc_repro_in_one_line_and_hangs_nothing.)"""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/squad.json").write_text("{}")
    (tmp_path / "books").mkdir()
    (tmp_path / "books/gone.txt").symlink_to("../nowhere.txt")  # a dangling link would drop a book unseen
    (tmp_path / "data/sample/books").mkdir(parents=True)
    (tmp_path / "data/raw").mkdir()
    (tmp_path / "data/raw/book.txt").write_text("a pipeline output")
    (tmp_path / "data/sample/books/raw.txt").symlink_to("../../raw/book.txt")
    with pytest.raises(UserError) as error:
        link_sources(Path("slot"), sources, "corpora.c.sources", FOLLOWING)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert not os.path.lexists("slot")


def test_follow_links_lets_links_out_of_a_folder_be_tracked_and_links_to_folders_are_named(
    tmp_path, monkeypatch, caplog
):
    """follow_links: true links the folder whose link leaves it (DVC then hashes the file it leads
    to); a link to a folder is never followed, and named; the bundled sample may be a source."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere/shelf").mkdir(parents=True)
    (tmp_path / "elsewhere/book.txt").write_text("a book kept elsewhere")
    (tmp_path / "books").mkdir()
    (tmp_path / "books/book.txt").symlink_to("../elsewhere/book.txt")
    (tmp_path / "books/shelf").symlink_to("../elsewhere/shelf")
    (tmp_path / "data/sample").mkdir(parents=True)
    (tmp_path / "data/sample/demo.txt").write_text("demo")
    with pytest.raises(UserError, match="books/book.txt is a symbolic link to .*, outside the source folder"):
        link_sources(Path("slots/refused"), ["books"], "corpora.c.sources", STRICT)
    link_sources(Path("slots/books"), ["books"], "corpora.c.sources", FOLLOWING)
    assert Path("slots/books/book.txt").read_text() == "a book kept elsewhere"
    assert "corpora.c.sources: books: not followed, as DVC would not track their files: shelf" in caplog.text
    link_sources(Path("slots/demo"), ["data/sample/demo.txt"], "corpora.c.sources", FOLLOWING)
    assert Path("slots/demo").read_text() == "demo"


def test_a_remote_file_changed_under_its_checksum_is_one_line(tmp_path):
    """A pinned URL whose file changed on the server: the download stops, one line, nothing new."""
    import hashlib
    import http.server
    import threading
    from functools import partial

    from tests.support.stage_workspace import write_params

    served = tmp_path / "served"
    served.mkdir()
    (served / "dump.xml").write_bytes(b"<mediawiki>version 1</mediawiki>")
    pinned = "sha256:" + hashlib.sha256(b"<mediawiki>version 1</mediawiki>").hexdigest()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/dump.xml"
        write_params(
            tmp_path,
            {
                "corpora.wikipedia": {
                    "kind": "wikipedia",
                    "columns": [],
                    "sources": [url],
                    "checksums": [pinned],
                }
            },
        )
        assert run_stage(tmp_path, "stages.download", "wikipedia").returncode == 0
        (served / "dump.xml").write_bytes(b"<mediawiki>version 2</mediawiki>")  # a new release, same URL
        shutil.rmtree(tmp_path / "data/raw/wikipedia")  # as `dvc repro -f` does before running the stage
        done = run_stage(tmp_path, "stages.download", "wikipedia")
    finally:
        server.shutdown()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: {url}: checksum mismatch: expected {pinned}, got sha256:"
    )
    assert not (tmp_path / "data/raw/wikipedia").exists()
