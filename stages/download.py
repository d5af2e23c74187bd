"""Stage download@<corpus>: fetch params.corpora.<corpus>.sources into data/raw/<corpus>/.

Files collect in data/raw/.partial/<corpus>/ (kept across failed runs so a re-run resumes the
interrupted file and skips the finished ones that are still the same version of their source);
data/raw/<corpus> appears, complete, only at the end.
"""

import argparse
import logging

from bert.download.manifest import Manifest
from bert.download.staging import staged
from bert.errors import UserError, run_main
from bert.source_tree import Rules
from stages.common import layout
from stages.common.params import load_params

RAW_DIR = layout.DATA / "raw"
log = logging.getLogger("stages.download")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", help="a key of `corpora` in params.yaml, e.g. wikipedia")
    corpus = parser.parse_args().corpus
    params = load_params()
    if corpus not in params.corpora:
        raise UserError(f"params.yaml: no `corpora.{corpus}`; corpora: {', '.join(params.corpora)}")
    spec = params.corpora[corpus]
    out_dir = RAW_DIR / corpus
    rules = Rules(params.follow_links, layout.OUTPUT_ROOTS, bundled=(layout.SAMPLE,))
    manifest = Manifest.read(layout.corpus_sources(corpus), f"corpora.{corpus}.sources", spec.sources)
    with staged(out_dir, {"sources": spec.sources, "checksums": spec.checksums}, rules, manifest) as staging:
        files = staging.fetch_many(spec.sources, spec.checksums or None)
        staging.publish({path.name: path for path in files})
    size = sum(path.stat().st_size for path in out_dir.iterdir())
    log.info("%s: %d file(s), %.1f MiB", out_dir, len(files), size / 2**20)


if __name__ == "__main__":
    run_main(main)
