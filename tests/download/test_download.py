"""bert.download and the download stages, against an HTTP server on 127.0.0.1 started here."""

import bz2
import hashlib
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bert.download.fetch import download
from bert.download.staging import download_many, download_staged
from bert.download.transport import SourceNotFound
from bert.errors import UserError
from tests.support.shard_fixtures import tiny_hf_folder
from tests.support.stage_workspace import write_params

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = bytes(range(256)) * 400  # 100 KiB: several reads, so a cut lands mid-file
FAST = {"retries": 3, "backoff": 0.01, "timeout": 5}


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves `server.files` with ETag `server.etags[path]` ("v1" if not set, none if None); 206
    for Range requests, 304 for If-None-Match of the current ETag; misbehaves as `server.faults` says."""

    def do_GET(self):
        server = self.server
        with server.lock:
            server.requests.append((self.path, self.headers.get("Range")))
            faults = server.faults
            if faults.get("fail_first", 0) > 0:
                faults["fail_first"] -= 1
                self.send_error(500, "Injected failure")
                return
        body = server.files.get(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        etag = server.etags.get(self.path, '"v1"')
        if etag and self.headers.get("If-None-Match") == etag:
            server.not_modified.append(self.path)
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if_range = self.headers.get("If-Range")
        if match and not faults.get("ignore_range") and if_range in (None, etag):
            start = int(match[1])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
            self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body) - start))
        if etag:
            self.send_header("ETag", etag)
        self.end_headers()
        if "trickle_every" in faults:
            self._trickle(body[start:], faults["trickle_every"])
            return
        chunk = body[start:]
        # truncate_at: the server never sends bytes past this offset (yet promised them all).
        if "truncate_at" in faults:
            chunk = chunk[: max(0, faults["truncate_at"] - start)]
        with server.lock:
            cut = faults.get("cut_times", 0) > 0
            if cut:
                faults["cut_times"] -= 1
        if cut:
            chunk = chunk[: faults["cut_after"]]
        self.wfile.write(chunk)
        if cut or len(chunk) < len(body) - start:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)

    def _trickle(self, body: bytes, every: float) -> None:
        """Send one byte per `every` seconds: at most 100, and none once the client hangs up."""
        try:
            for byte in body[:100]:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(every)
        except OSError:  # the client gave up on us
            pass

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.files, httpd.faults, httpd.requests, httpd.lock = {}, {}, [], threading.Lock()
    httpd.etags, httpd.not_modified = {}, []
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_full_download_with_sha256(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    checksum = "sha256:" + hashlib.sha256(PAYLOAD).hexdigest()
    out = download(f"{server.url}/data.bin", tmp_path / "data.bin", checksum, **FAST)
    assert out.read_bytes() == PAYLOAD
    assert leftovers(tmp_path) == ["data.bin"]
    assert server.requests == [("/data.bin", None)]


def test_resume_after_connection_cut(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(cut_times=1, cut_after=30_000)
    checksum = "sha1:" + hashlib.sha1(PAYLOAD).hexdigest()
    out = download(f"{server.url}/data.bin", tmp_path / "data.bin", checksum, **FAST)
    assert out.read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", None), ("/data.bin", "bytes=30000-")]
    assert leftovers(tmp_path) == ["data.bin"]


def test_rerun_resumes_a_kept_part_file(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(truncate_at=50_000)
    with pytest.raises(UserError, match="run again to resume"):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert (tmp_path / "data.bin.part").stat().st_size == 50_000
    server.faults.clear()
    server.requests.clear()
    download(
        f"{server.url}/data.bin", tmp_path / "data.bin", "md5:" + hashlib.md5(PAYLOAD).hexdigest(), **FAST
    )
    assert server.requests == [("/data.bin", "bytes=50000-")]
    assert (tmp_path / "data.bin").read_bytes() == PAYLOAD
    assert leftovers(tmp_path) == ["data.bin"]


def test_retry_on_500(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(fail_first=2)
    download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert (tmp_path / "data.bin").read_bytes() == PAYLOAD
    assert len(server.requests) == 3


def test_persistent_500_gives_up(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(fail_first=100)
    with pytest.raises(UserError, match=r"failed after 4 attempts: HTTP 500"):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert not (tmp_path / "data.bin").exists()


def test_checksum_mismatch_leaves_nothing(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    with pytest.raises(UserError, match="checksum mismatch") as error:
        download(f"{server.url}/data.bin", tmp_path / "data.bin", "sha1:" + "0" * 40, **FAST)
    assert f"{server.url}/data.bin" in str(error.value)
    assert leftovers(tmp_path) == []


def test_invalid_checksum_is_rejected_before_downloading(server, tmp_path):
    with pytest.raises(UserError, match="not valid"):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", "sha1:abc", **FAST)
    assert server.requests == []


def test_published_checksum_from_wikimedia_sums_file(server, tmp_path):
    name = "enwiki-20250201-pages-articles.xml.bz2"
    server.files[f"/enwiki/20250201/{name}"] = PAYLOAD
    sums = f"{'1' * 40}  enwiki-20250201-abstract.xml.gz\n{hashlib.sha1(PAYLOAD).hexdigest()}  {name}\n"
    server.files["/enwiki/20250201/enwiki-20250201-sha1sums.txt"] = sums.encode()
    out = download(f"{server.url}/enwiki/20250201/{name}", tmp_path / name, "published", **FAST)
    assert out.read_bytes() == PAYLOAD
    # Wrong published sum: mismatch, nothing left.
    server.files["/enwiki/20250201/enwiki-20250201-sha1sums.txt"] = f"{'2' * 40}  {name}\n".encode()
    with pytest.raises(UserError, match="checksum mismatch"):
        download(f"{server.url}/enwiki/20250201/{name}", tmp_path / "again" / name, "published", **FAST)
    assert leftovers(tmp_path / "again") == []


def test_published_checksum_falls_back_to_md5(server, tmp_path):
    name = "simplewiki-latest-pages-articles.xml.bz2"
    server.files[f"/{name}"] = PAYLOAD
    server.files["/simplewiki-latest-md5sums.txt"] = f"{hashlib.md5(PAYLOAD).hexdigest()} *{name}\n".encode()
    download(f"{server.url}/{name}", tmp_path / name, "published", **FAST)
    assert (tmp_path / name).read_bytes() == PAYLOAD


def test_published_checksum_for_a_local_dump(tmp_path):
    name = "enwiki-20250201-pages-articles.xml.bz2"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_bytes(PAYLOAD)
    (tmp_path / "src" / "enwiki-20250201-sha1sums.txt").write_text(
        f"{hashlib.sha1(PAYLOAD).hexdigest()}  {name}\n"
    )
    download(tmp_path / "src" / name, tmp_path / "out" / name, "published")
    assert (tmp_path / "out" / name).read_bytes() == PAYLOAD
    (tmp_path / "src" / "enwiki-20250201-sha1sums.txt").unlink()
    with pytest.raises(UserError, match="no \\*sha1sums.txt"):
        download(tmp_path / "src" / name, tmp_path / "out2" / name, "published")


def test_404_is_not_retried_and_leaves_nothing(server, tmp_path):
    with pytest.raises(SourceNotFound, match="HTTP 404") as error:
        download(f"{server.url}/missing.bin", tmp_path / "missing.bin", **FAST)
    assert f"{server.url}/missing.bin" in str(error.value)
    assert len(server.requests) == 1
    assert leftovers(tmp_path) == []


def test_server_without_range_restarts_from_zero(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(cut_times=1, cut_after=30_000, ignore_range=True)
    download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert (tmp_path / "data.bin").read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", None), ("/data.bin", "bytes=30000-")]


def test_server_without_range_cut_twice_is_a_clear_error(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(cut_times=2, cut_after=30_000, ignore_range=True)
    with pytest.raises(UserError, match="does not support resuming"):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert len(server.requests) == 2
    assert leftovers(tmp_path) == []


def test_truncated_body_is_retried_then_an_error(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(truncate_at=len(PAYLOAD) - 10)
    with pytest.raises(UserError, match=f"closed after {len(PAYLOAD) - 10} of {len(PAYLOAD)} bytes"):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert not (tmp_path / "data.bin").exists()
    assert len(server.requests) == FAST["retries"] + 1
    assert all(rng == f"bytes={len(PAYLOAD) - 10}-" for _, rng in server.requests[1:])


def test_complete_part_file_is_finished_on_416(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD)
    (tmp_path / "data.bin.part.json").write_text(
        json.dumps({"source": f"{server.url}/data.bin", "etag": '"v1"'})
    )
    download(
        f"{server.url}/data.bin", tmp_path / "data.bin", "sha1:" + hashlib.sha1(PAYLOAD).hexdigest(), **FAST
    )
    assert (tmp_path / "data.bin").read_bytes() == PAYLOAD
    assert leftovers(tmp_path) == ["data.bin"]
    assert server.requests == [("/data.bin", f"bytes={len(PAYLOAD)}-")]


def test_part_file_without_a_validator_is_not_resumed(server, tmp_path):
    # Nothing proves the bytes of a .part whose server gave no ETag / Last-Modified are still current.
    server.files["/data.bin"] = PAYLOAD
    (tmp_path / "data.bin.part").write_bytes(b"old" * 1000)
    (tmp_path / "data.bin.part.json").write_text(json.dumps({"source": f"{server.url}/data.bin"}))
    download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert (tmp_path / "data.bin").read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", None)]


def test_part_file_from_another_url_is_not_resumed(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    (tmp_path / "data.bin.part").write_bytes(b"x" * 1000)
    (tmp_path / "data.bin.part.json").write_text(json.dumps({"source": f"{server.url}/other.bin"}))
    download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert (tmp_path / "data.bin").read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", None)]


def test_part_file_of_a_changed_file_starts_over(server, tmp_path):
    # If-Range with an old ETag: the server sends the whole new file (200). That is a restart, not
    # a server without resume: a later cut is still resumed.
    server.files["/data.bin"] = PAYLOAD
    server.faults.update(cut_times=1, cut_after=30_000)
    (tmp_path / "data.bin.part").write_bytes(b"old" * 1000)
    (tmp_path / "data.bin.part.json").write_text(
        json.dumps({"source": f"{server.url}/data.bin", "etag": '"v0"'})
    )
    download(
        f"{server.url}/data.bin", tmp_path / "data.bin", "sha1:" + hashlib.sha1(PAYLOAD).hexdigest(), **FAST
    )
    assert (tmp_path / "data.bin").read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", "bytes=3000-"), ("/data.bin", "bytes=30000-")]


def test_local_path_and_file_url(tmp_path):
    source = tmp_path / "src" / "book.parquet"
    source.parent.mkdir()
    source.write_bytes(PAYLOAD)
    download(source, tmp_path / "a" / "book.parquet", "sha1:" + hashlib.sha1(PAYLOAD).hexdigest())
    download(source.as_uri(), tmp_path / "b" / "book.parquet")
    assert (tmp_path / "a" / "book.parquet").read_bytes() == PAYLOAD
    assert (tmp_path / "b" / "book.parquet").read_bytes() == PAYLOAD
    with pytest.raises(UserError, match="checksum mismatch"):
        download(source, tmp_path / "c" / "book.parquet", "md5:" + "0" * 32)
    assert leftovers(tmp_path / "c") == []
    with pytest.raises(SourceNotFound, match="does not exist"):
        download(tmp_path / "nope.bin", tmp_path / "d" / "nope.bin")


def test_download_many_directory_sources_and_clashes(server, tmp_path, caplog):
    books = tmp_path / "books"
    (books / "drafts").mkdir(parents=True)
    for name in ("b.txt", "a.txt", ".hidden", "drafts/c.txt"):
        (books / name).write_text(name)
    server.files["/x/c.parquet"] = PAYLOAD
    paths = download_many([str(books), f"{server.url}/x/c.parquet"], tmp_path / "out", **FAST)
    assert [p.name for p in paths] == ["a.txt", "b.txt", "c.parquet"]
    assert f"{books}: not copied, as a folder source stands for its top-level files, hidden ones aside: " \
           ".hidden, drafts/ (1 file)" in caplog.text  # fmt: skip
    records = [".a.txt.source.json", ".b.txt.source.json", ".c.parquet.source.json"]
    assert leftovers(tmp_path / "out") == [*records, "a.txt", "b.txt", "c.parquet"]
    assert (tmp_path / "out" / "a.txt").read_text() == "a.txt"
    # A finished file of the same version is not fetched again: the server says 304 Not Modified.
    server.requests.clear()
    download_many([f"{server.url}/x/c.parquet"], tmp_path / "out", **FAST)
    assert server.requests == [("/x/c.parquet", None)] and server.not_modified == ["/x/c.parquet"]
    server.files["/y/a.txt"] = b"other"
    with pytest.raises(UserError, match="same file name 'a.txt'"):
        download_many([str(books), f"{server.url}/y/a.txt"], tmp_path / "out2", **FAST)
    with pytest.raises(UserError, match="one checksum per source"):
        download_many([str(books)], tmp_path / "out3", ["sha1:" + "0" * 40, None])


# --- stages, run as the pipeline runs them -------------------------------------------------------


def run_stage(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )


def test_stage_download_publishes_the_folder(server, tmp_path):
    dump = bz2.compress(PAYLOAD)  # a .bz2 must begin as one (bert.inputs.check_content)
    server.files["/dumps/enwiki-20250201-pages-articles.xml.bz2"] = dump
    server.files["/dumps/enwiki-20250201-sha1sums.txt"] = (
        f"{hashlib.sha1(dump).hexdigest()}  enwiki-20250201-pages-articles.xml.bz2\n".encode()
    )
    source = f"{server.url}/dumps/enwiki-20250201-pages-articles.xml.bz2"
    write_params(
        tmp_path,
        {
            "corpora.wikipedia": {
                "kind": "wikipedia",
                "columns": [],
                "sources": [source],
                "checksums": ["published"],
            }
        },
    )
    result = run_stage(tmp_path, "stages.download", "wikipedia")
    assert result.returncode == 0, result.stderr
    assert leftovers(tmp_path / "data" / "raw") == ["wikipedia"]
    assert (tmp_path / "data/raw/wikipedia/enwiki-20250201-pages-articles.xml.bz2").read_bytes() == dump


def test_stage_download_404_is_one_error_line(server, tmp_path):
    server.files["/ok.dat"] = PAYLOAD
    sources = [f"{server.url}/ok.dat", f"{server.url}/missing.dat"]
    write_params(
        tmp_path,
        {"corpora.wikipedia": {"kind": "wikipedia", "columns": [], "sources": sources, "checksums": []}},
    )
    result = run_stage(tmp_path, "stages.download", "wikipedia")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {server.url}/missing.dat: HTTP 404 Not Found; the file is not there — check the URL"
    ]
    assert not (tmp_path / "data/raw/wikipedia").exists()
    # The finished file waits in the staging folder; once the server has the file, only it is fetched
    # (the finished one is only revalidated: 304 Not Modified).
    assert (tmp_path / "data/raw/.partial/wikipedia/ok.dat").exists()
    server.files["/missing.dat"] = b"now here"
    server.requests.clear()
    result = run_stage(tmp_path, "stages.download", "wikipedia")
    assert result.returncode == 0, result.stderr
    assert server.requests == [("/ok.dat", None), ("/missing.dat", None)]
    assert server.not_modified == ["/ok.dat"]
    assert leftovers(tmp_path / "data/raw/wikipedia") == ["missing.dat", "ok.dat"]
    assert leftovers(tmp_path / "data/raw") == ["wikipedia"]


def test_stage_download_refetches_staged_files_whose_source_changed(server, tmp_path):
    # A multi-source download fails half-way; before the re-run the user replaces the local source
    # (same size, even the old mtime put back) and the server's file changes (a new ETag): the re-run
    # publishes the new bytes of both, not the staged old ones.
    local = tmp_path / "books.txt"
    local.write_bytes(b"old local")
    server.files["/web.bin"] = b"old web"
    sources = [str(local), f"{server.url}/web.bin", f"{server.url}/late.bin"]
    write_params(
        tmp_path, {"corpora.books": {"kind": "text", "columns": [], "sources": sources, "checksums": []}}
    )
    result = run_stage(tmp_path, "stages.download", "books")
    assert result.returncode == 1 and "late.bin: HTTP 404" in result.stderr
    staging = tmp_path / "data/raw/.partial/books"
    assert (staging / "books.txt").read_bytes() == b"old local"
    assert (staging / "web.bin").read_bytes() == b"old web"

    old_times = local.stat().st_atime_ns, local.stat().st_mtime_ns
    local.write_bytes(b"new local")
    os.utime(local, ns=old_times)  # `cp -p` of a same-size file: only the ctime tells
    server.files["/web.bin"], server.etags["/web.bin"] = b"new web", '"v2"'
    server.files["/late.bin"] = b"late"
    result = run_stage(tmp_path, "stages.download", "books")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "data/raw/books"
    assert leftovers(out) == ["books.txt", "late.bin", "web.bin"]
    assert [(out / name).read_bytes() for name in leftovers(out)] == [b"new local", b"late", b"new web"]
    assert server.not_modified == []
    assert leftovers(tmp_path / "data/raw") == ["books"]


def test_download_staged_reuses_only_the_same_version(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD
    target = tmp_path / "staging" / "data.bin"
    sha1 = "sha1:" + hashlib.sha1(PAYLOAD).hexdigest()
    download_staged(f"{server.url}/data.bin", target, sha1, **FAST)
    # With a checksum, the same expected sum is the proof: no request at all.
    server.requests.clear()
    download_staged(f"{server.url}/data.bin", target, sha1, **FAST)
    assert server.requests == []
    # Another checksum (a new release): fetched again, and verified.
    server.files["/data.bin"] = PAYLOAD[::-1]
    download_staged(
        f"{server.url}/data.bin", target, "sha1:" + hashlib.sha1(PAYLOAD[::-1]).hexdigest(), **FAST
    )
    assert target.read_bytes() == PAYLOAD[::-1] and len(server.requests) == 1
    # Without one: the ETag. A staged file without its record proves nothing: fetched again.
    (tmp_path / "staging" / ".data.bin.source.json").unlink()
    server.requests.clear()
    download_staged(f"{server.url}/data.bin", target, **FAST)
    download_staged(f"{server.url}/data.bin", target, **FAST)
    assert server.requests == [("/data.bin", None)] * 2 and server.not_modified == ["/data.bin"]
    # A server without ETag or Last-Modified cannot prove anything either.
    server.etags["/data.bin"] = None
    server.requests.clear()
    download_staged(f"{server.url}/data.bin", target, **FAST)
    download_staged(f"{server.url}/data.bin", target, **FAST)
    assert len(server.requests) == 3  # the "v1" check (200, no ETag), the refetch, and again a refetch
    assert target.read_bytes() == PAYLOAD[::-1]


def test_stage_download_squad_fetches_a_fixed_file_again(tmp_path):
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    squad_file(train, "2.0")  # the wrong file behind the v1.1 name
    squad_file(dev, "1.1")
    sources = {"v1.1": {"train": str(train), "dev": str(dev)}, "v2.0": {"train": str(train), "dev": str(dev)}}
    write_params(tmp_path, {"squad.sources": sources, "squad.run": ["v1.1"]})
    result = run_stage(tmp_path, "stages.download_squad")
    assert result.returncode == 1 and "SQuAD version '2.0' in the file" in result.stderr
    train.write_text(json.dumps({"version": "1.1", "data": [], "fixed": True}))
    result = run_stage(tmp_path, "stages.download_squad")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "data/squad/train.json").read_text())["fixed"] is True
    assert leftovers(tmp_path / "data") == ["squad"]


def squad_file(path: Path, version: str) -> str:
    path.write_text(json.dumps({"version": version, "data": []}))
    return str(path)


def test_stage_download_squad(tmp_path):
    sources = {
        "v1.1": {
            "train": squad_file(tmp_path / "t1.json", "1.1"),
            "dev": squad_file(tmp_path / "d1.json", "1.1"),
        },
        "v2.0": {
            "train": squad_file(tmp_path / "t2.json", "v2.0"),
            "dev": squad_file(tmp_path / "d2.json", "1.1"),
        },
    }
    write_params(tmp_path, {"squad.sources": sources, "squad.run": ["v1.1"]})
    result = run_stage(tmp_path, "stages.download_squad")
    assert result.returncode == 0, result.stderr
    assert leftovers(tmp_path / "data/squad") == ["dev.json", "train.json"]
    write_params(tmp_path, {"squad.sources": sources, "squad.run": ["v2.0"]})
    result = run_stage(tmp_path, "stages.download_squad")
    assert result.returncode == 1
    assert "SQuAD version '1.1' in the file, but squad.run runs 'v2.0'" in result.stderr
    assert (
        json.loads((tmp_path / "data/squad/train.json").read_text())["version"] == "1.1"
    )  # old output intact


def test_stage_download_weights(server, tmp_path):
    model = tiny_hf_folder(tmp_path / "model")
    for path in model.iterdir():
        server.files[f"/bert/{path.name}"] = path.read_bytes()
    weights = {"google-tiny": f"{server.url}/bert", "other": f"{server.url}/nowhere"}
    write_params(tmp_path, {"weights": weights, "finetune.init": "google-tiny"})
    result = run_stage(tmp_path, "stages.download_weights", "google-tiny")
    assert result.returncode == 0, result.stderr
    assert leftovers(tmp_path / "data/weights/google-tiny") == [
        "config.json",
        "pytorch_model.bin",
        "vocab.txt",
    ]
    assert (tmp_path / "data/weights/google-tiny/pytorch_model.bin").read_bytes() == server.files[
        "/bert/pytorch_model.bin"
    ]
    # an entry finetune.init does not name is not fetched (its URL here would fail)
    result = run_stage(tmp_path, "stages.download_weights", "other")
    assert result.returncode == 0, result.stderr
    assert leftovers(tmp_path / "data/weights/other") == ["README.txt"]
    assert (
        "finetune.init is google-tiny, not other" in (tmp_path / "data/weights/other/README.txt").read_text()
    )
    write_params(tmp_path, {"weights": weights, "finetune.init": "random"})
    result = run_stage(tmp_path, "stages.download_weights", "google-tiny")
    assert result.returncode == 0, result.stderr
    assert leftovers(tmp_path / "data/weights/google-tiny") == ["README.txt"]
    result = run_stage(tmp_path, "stages.download_weights", "google-large")
    assert result.returncode == 1 and result.stderr.strip() == (
        "error: params.yaml: no `weights.google-large`; weights: google-tiny, other"
    )


def test_progress_is_logged_when_no_terminal(server, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("bert.download.transport.LOG_EVERY_SECONDS", 0.0)
    server.files["/data.bin"] = PAYLOAD
    with caplog.at_level("INFO", logger="bert.download"):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", **FAST)
    assert any(f"of {len(PAYLOAD) / 1024:.1f} KiB (" in message for message in caplog.messages), (
        caplog.messages
    )


# --- a slow server -------------------------------------------------------------------------------


def test_a_trickling_server_is_cut_off_with_progress_lines(server, tmp_path, monkeypatch, caplog):
    # 1 byte per 0.05 s is 20 B/s; the minimum here is 1000 B per 0.3 s. Each attempt ends after
    # about 0.3 s, with a progress line on the way; the error names the URL, the rate and the fix.
    monkeypatch.setattr("bert.download.transport.MIN_BYTES_PER_WINDOW", 1000)
    monkeypatch.setattr("bert.download.transport.RATE_WINDOW_SECONDS", 0.3)
    monkeypatch.setattr("bert.download.transport.LOG_EVERY_SECONDS", 0.1)
    server.files["/slow.bin"] = PAYLOAD
    server.faults.update(trickle_every=0.05)
    started = time.monotonic()
    with caplog.at_level("INFO", logger="bert.download"), pytest.raises(UserError) as error:
        download(f"{server.url}/slow.bin", tmp_path / "slow.bin", retries=1, backoff=0.01, timeout=5)
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert message.startswith(f"{server.url}/slow.bin: failed after 2 attempts: too slow: ")
    assert re.search(
        r"too slow: \d+ B in the last \d+\.\d s \(\d+ B/s, under the minimum of 1000 B per 0\.3 s\)", message
    )
    assert "download the file by hand and give its local path" in message and "\n" not in message
    assert len(server.requests) == 2 and server.requests[1][1].startswith("bytes=")  # it resumed
    assert (
        "B kept for the next run" in message and ".part" not in message and "run again to resume" in message
    )
    progress = [m for m in caplog.messages if m.startswith("slow.bin: ") and "B/s" in m]
    assert progress, caplog.messages
