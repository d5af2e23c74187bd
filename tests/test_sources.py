"""Local sources are tracked by content through manifests DVC hashes in their place: an edited, added
or removed file of a task, a corpus folder, weights or SQuAD makes `dvc repro` (whose `sources` stage
always runs first) rerun its download stage and nothing else; the bundled data/sample reruns nothing
once params point elsewhere; no dep is a URL or a user's file. A source that cannot be read (a FIFO,
a device, a link loop, ...) or is gone stops `dvc repro` in one line of the `sources` stage, and no
DVC command hangs or errors because of it. A file changed between the `sources` stage and its
download is one line of the download. Digests are cached: an unchanged file is not read again.

One throw-away project whose params point at a user's own folders under tmp; its download stages
run once (seconds), then each test compares `dvc status` before and after its edit (and the
`sources` stage's run that finds it)."""

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import bert.download.manifest
from bert.download.manifest import HashCache, build_manifest
from bert.errors import UserError
from bert.source_tree import STRICT, Rules
from tests.support.dvc_commands import dvc, error_lines, run_dvc, stages_run, status
from tests.support.stage_workspace import copy_project, run_stage, set_params

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data/sample"
DOWNLOADS = ["download@books", "download_task@rte", "download_squad@v1.1", "download_weights@mine",
             "download_weights@other"]  # fmt: skip


def changed_by(project: Path, edit) -> set[str]:
    """The stages whose `dvc status` entry differs after `edit()` and the `sources` stage's run (which
    every `dvc repro` starts with) from before it."""
    before = status(project)
    edit()
    dvc(project, "repro", "sources")
    after = status(project)
    return {stage for stage in {*before, *after} if before.get(stage) != after.get(stage)}


def repro(project: Path, target: str) -> list[str]:
    return stages_run(dvc(project, "repro", target).stdout)


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


def test_downloads_are_up_to_date_and_no_dep_is_a_url_nor_a_users_file(project):
    """`dvc status` never needs the network nor opens a user's file: URL sources are no deps, and
    every dep lies in the project (the web corpus's stage is listed only because it never ran)."""
    from dvc.repo import Repo

    assert not set(status(project)) & set(DOWNLOADS)
    with Repo(str(project)) as repo:
        deps = [dep.def_path for stage in repo.index.stages for dep in stage.deps]
    assert [path for path in deps if "://" in path] == []
    assert [path for path in deps if Path(path).is_absolute() or ".." in Path(path).parts] == []
    manifest = json.loads((project / "data/sources/corpora/books.json").read_text())
    books = project.parent / "user/books"
    assert manifest["sources"] == [{"source": str(books), "files": {
        path.name: {"size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        for path in sorted(books.iterdir())}}]  # fmt: skip


def test_an_edited_task_file_reruns_its_download_stage_only(project):
    train = project.parent / "user/RTE/train.tsv"

    def edit():  # the first example's first sentence
        train.write_text(re.sub(r"\n(\d+)\t", r"\n\1\tEdited. ", train.read_text(), count=1))

    assert changed_by(project, edit) == {"download_task@rte"}
    assert repro(project, "download_task@rte") == ["sources", "download_task@rte"]
    assert "Edited. " in (project / "data/tasks/rte/train.tsv").read_text()
    assert "download_task@rte" not in status(project)


def test_a_book_added_to_or_removed_from_a_corpus_folder_reruns_its_download(project):
    new_book = project.parent / "user/books/new-book.txt"
    assert changed_by(project, lambda: new_book.write_text("A new book.\n\nIts second paragraph.\n")) == {
        "download@books"
    }
    assert repro(project, "download@books") == ["sources", "download@books"]
    assert (project / "data/raw/books/new-book.txt").is_file()
    assert changed_by(project, new_book.unlink) == {"download@books"}
    dvc(project, "repro", "download@books")  # (from DVC's run cache: the sources of its first run)
    assert not (project / "data/raw/books/new-book.txt").exists()


def test_weights_replaced_in_place_rerun_the_download_finetune_init_names(project):
    user = project.parent / "user"
    # The entry finetune.init does not name is not fetched: its folder is in no manifest.
    assert changed_by(project, lambda: save_weights(user / "other-weights", seed=3)) == set()
    assert changed_by(project, lambda: save_weights(user / "weights", seed=2)) == {"download_weights@mine"}


def test_an_edited_squad_file_reruns_download_squad(project):
    dev = project.parent / "user/dev.json"
    assert changed_by(project, lambda: dev.write_text(dev.read_text().replace('"title"', '"title" ', 1))) == {
        "download_squad@v1.1"
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


def test_a_file_changed_between_the_sources_stage_and_its_download_is_one_line(project):
    """The download checks what it reads against the manifest: an edited or an added book after the
    `sources` stage ran is one line, nothing is published, and `dvc repro` then goes through."""
    books = project.parent / "user/books"
    edited, added = sorted(books.glob("*.txt"))[0], books / "late-book.txt"
    published = {path.name: path.read_bytes() for path in (project / "data/raw/books").iterdir()}
    size = edited.stat().st_size  # and 9 bytes more after "An edit.\n"
    for change, words in (
        (lambda: edited.write_text(edited.read_text() + "An edit.\n"), f"{edited} changed since the `sources` "
                                                                       f"stage hashed it ({size} bytes then, {size + 9} now)"),
        (lambda: added.write_text("A late book.\n"), f"{books} changed since the `sources` stage listed it "
                                                      "(late-book.txt added)"),
    ):  # fmt: skip
        assert run_stage(project, "stages.sources").returncode == 0
        change()
        done = run_stage(project, "stages.download", "books")
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert error_lines(done.stderr) == [f"error: corpora.books.sources: {words}; run `dvc repro` again (its "
                                            "`sources` stage hashes the sources anew)"]  # fmt: skip
        assert {path.name: path.read_bytes() for path in (project / "data/raw/books").iterdir()} == published
    assert repro(project, "download@books") == ["sources", "download@books"]
    assert (project / "data/raw/books/late-book.txt").read_text() == "A late book.\n"
    assert (project / "data/raw/books" / edited.name).read_text().endswith("An edit.\n")


# --- sources that cannot be read to their end: refused before anything is hashed ----------------


def bad_sources(root: Path) -> dict[str, tuple[str, str]]:
    """Every kind of local source the `sources` stage refuses, made under `root`:
    {kind: (the source as params.yaml gives it, what its error line says)}. (/dev/urandom, another
    character device, and data/ itself, another place the pipeline writes, are rows of
    test_a_source_that_cannot_be_tracked_is_one_line: the same classes, seconds of DVC each.)"""
    root.mkdir()
    os.mkfifo(root / "fifo")
    for folder in ("piped", "escaping"):
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
    }  # fmt: skip


def test_a_source_that_cannot_be_read_stops_dvc_repro_in_one_line_and_hangs_nothing(project):
    """Each kind through `dvc repro` (a hang fails run_dvc): one line of the `sources` stage naming
    the param, and no manifest published (DVC removed the old ones before running the stage), so
    `dvc status` runs; the fixed params then run with no clean-up. (One `dvc status` for all kinds:
    each leaves the same state, which the lexists check holds.)"""
    books, before = project.parent / "user/books", status(project)
    for kind, (source, words) in bad_sources(project.parent / "bad").items():
        set_params(project, {"corpora.books.sources": [source]})
        done = run_dvc(project, "repro", "sources", timeout=60)
        errors = error_lines(done.stderr)
        assert done.returncode != 0 and len(errors) == 1, (kind, done.stderr)
        assert errors[0].startswith("error: corpora.books.sources: "), (kind, errors[0])
        assert words in errors[0], (kind, errors[0])
        assert not os.path.lexists(project / "data/sources"), kind
    assert run_dvc(project, "status", timeout=60).returncode == 0
    set_params(project, {"corpora.books.sources": [str(books)]})
    assert repro(project, "sources") == ["sources"]
    assert status(project) == before


def test_a_fifo_put_into_a_corpus_folder_after_a_good_run_hangs_nothing(project):
    """DVC hashes the manifest, never the folder: `dvc status` answers, `dvc repro` stops at the
    `sources` stage in one line naming the entry, and once it is gone nothing reruns but `sources`."""
    books, before = project.parent / "user/books", status(project)
    os.mkfifo(books / "pipe")
    assert status(project) == before
    done = run_dvc(project, "repro", "download@books", timeout=60)
    assert done.returncode != 0 and error_lines(done.stderr) == [
        f"error: corpora.books.sources: {books}/pipe is a named pipe (FIFO); a source folder holds regular files "
        "and folders only (reading it could hang or fail): remove it"
    ], done.stderr
    (books / "pipe").unlink()
    assert repro(project, "download@books") == ["sources"]
    assert status(project) == before


def test_a_source_deleted_after_a_good_run_is_one_line_and_found_where_params_point(project):
    """`dvc status` answers as before (it reads the manifests only); `dvc repro` stops in one line
    of the `sources` stage naming the param; pointing params.yaml at the new place needs no clean-up.
    (Last of the project's tests: it leaves the books at their new place.)"""
    books, before = project.parent / "user/books", status(project)
    moved = books.rename(project.parent / "user/moved-books")
    assert status(project) == before
    done = run_dvc(project, "repro", timeout=60)
    assert done.returncode != 0 and error_lines(done.stderr) == [
        f"error: params.yaml: corpora.books.sources: {books} does not exist"
    ], done.stderr
    set_params(project, {"corpora.books.sources": [str(moved)]})
    assert repro(project, "download@books") == ["sources", "download@books"]
    after = status(project)
    assert "download@books" not in after and after == {
        k: v for k, v in before.items() if k != "download@books"
    }


# --- the manifests themselves (bert.download.manifest) ----------------------------------------------


def digest_of(text: str) -> dict:
    return {"size": len(text.encode()), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_a_manifest_lists_each_local_file_by_size_and_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder/sub").mkdir(parents=True)
    (tmp_path / "folder/a.txt").write_text("a")
    (tmp_path / "folder/sub/.c").write_text("c")
    (tmp_path / "b.txt").write_text("b")
    hashes = HashCache.load(tmp_path / "hashes.json")
    sources = ["folder", "https://example.org/x.txt", f"file://{tmp_path}/b.txt"]
    assert build_manifest(sources, "corpora.c.sources", STRICT, hashes) == {
        "param": "corpora.c.sources",
        "sources": [
            {"source": "folder", "files": {"a.txt": digest_of("a"), "sub/.c": digest_of("c")}},
            {"source": "https://example.org/x.txt"},
            {"source": f"file://{tmp_path}/b.txt", **digest_of("b")},
        ],
    }


def test_an_unchanged_file_is_not_read_again(tmp_path, monkeypatch):
    """The digest cache (file identity: device, inode, size, mtime, ctime): a second manifest reads
    nothing; an edited file, one whose old mtime was put back, and a new file are read, and only they."""
    reads = []
    real_digest = bert.download.manifest.file_digest
    monkeypatch.setattr(bert.download.manifest, "file_digest", lambda path, shown: reads.append(path.name)
                        or real_digest(path, shown))  # fmt: skip
    folder, cache = tmp_path / "books", tmp_path / "hashes.json"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / name).write_text(f"book {name}")

    def manifest() -> dict:
        hashes = HashCache.load(cache)
        built = build_manifest([str(folder)], "corpora.c.sources", STRICT, hashes)
        hashes.save()
        return built["sources"][0]["files"]

    first = manifest()
    assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]
    reads.clear()
    assert manifest() == first and reads == []
    old = (folder / "b.txt").stat()
    (folder / "a.txt").write_text("book A.txt")  # same size, other bytes
    (folder / "b.txt").write_text("book B.txt")
    os.utime(folder / "b.txt", ns=(old.st_atime_ns, old.st_mtime_ns))  # as `touch -r` or `cp -p` would
    (folder / "d.txt").write_text("book d.txt")
    second = manifest()
    assert sorted(reads) == ["a.txt", "b.txt", "d.txt"]
    assert second["a.txt"] == digest_of("book A.txt") and second["b.txt"] == digest_of("book B.txt")
    assert second["c.txt"] == first["c.txt"]
    (folder / "d.txt").unlink()
    manifest()
    assert str(folder / "d.txt") not in json.loads(cache.read_text())  # the cache forgets what is gone
    for damaged in (json.dumps({os.path.realpath(folder / "a.txt"): [1, 2]}), "not JSON"):
        cache.write_text(damaged)  # a cache, so a damaged one is read past
        reads.clear()
        assert manifest() == {name: second[name] for name in ("a.txt", "b.txt", "c.txt")}
        assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]


# The stages' rules (stages/common/layout.py OUTPUT_ROOTS) in a test's folder, with params.yaml's follow_links true.
FOLLOWING = Rules(follow_links=True, reserved=(Path("data"), Path("metrics")), bundled=(Path("data/sample"),))


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        (["missing.txt"], "corpora.c.sources: missing.txt does not exist; check the path in params.yaml"),
        (["."], "corpora.c.sources: . holds data/, where the pipeline writes its outputs"),
        (["data"], "corpora.c.sources: data is data/, where the pipeline writes its outputs"),
        (["b.txt", "/dev/urandom"], "corpora.c.sources: /dev/urandom is a character device, not a file or folder"),
        (["metrics/squad.json"], "corpora.c.sources: metrics/squad.json lies in metrics/, where the pipeline"),
        (["books"], "corpora.c.sources: books/gone.txt is a symbolic link to ../nowhere.txt, which does not exist; "
                    "remove the link"),
        (["data/sample/books"], "corpora.c.sources: data/sample/books/raw.txt (a link to "),
    ],
)  # fmt: skip
def test_a_source_that_cannot_be_tracked_is_one_line(tmp_path, monkeypatch, sources, message):
    """Every source is walked before any file is read: nothing is hashed then, not even the
    sources before the bad one. (Each kind that would hang a read is a row of
    test_a_source_that_cannot_be_read_stops_dvc_repro_in_one_line_and_hangs_nothing.)"""
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
    hashes = HashCache.load(tmp_path / "hashes.json")
    with pytest.raises(UserError) as error:
        build_manifest(sources, "corpora.c.sources", FOLLOWING, hashes)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert hashes.read == 0


def test_follow_links_lets_links_out_of_a_folder_be_tracked_and_links_to_folders_are_named(
    tmp_path, monkeypatch, caplog
):
    """follow_links: true hashes the file a link leaving the folder leads to; a link to a folder is
    never followed, and named; the bundled sample may be a source."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere/shelf").mkdir(parents=True)
    (tmp_path / "elsewhere/book.txt").write_text("a book kept elsewhere")
    (tmp_path / "books").mkdir()
    (tmp_path / "books/book.txt").symlink_to("../elsewhere/book.txt")
    (tmp_path / "books/shelf").symlink_to("../elsewhere/shelf")
    (tmp_path / "data/sample").mkdir(parents=True)
    (tmp_path / "data/sample/demo.txt").write_text("demo")
    hashes = HashCache.load(tmp_path / "hashes.json")
    with pytest.raises(UserError, match="books/book.txt is a symbolic link to .*, outside the source folder"):
        build_manifest(["books"], "corpora.c.sources", STRICT, hashes)
    built = build_manifest(["books", "data/sample/demo.txt"], "corpora.c.sources", FOLLOWING, hashes)
    assert built["sources"] == [{"source": "books", "files": {"book.txt": digest_of("a book kept elsewhere")}},
                                {"source": "data/sample/demo.txt", **digest_of("demo")}]  # fmt: skip
    assert "corpora.c.sources: books: not followed, as links to folders never are: shelf" in caplog.text


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
