"""Stage sources: data/sources/, a manifest of the local sources of each download stage, which DVC hashes.

    python -m stages.sources

It runs at every `dvc repro` (always_changed), before the downloads; each download stage depends on
its manifest here (docs/downloads.md#tracking-local-sources): corpora/<corpus>.json
(download@<corpus>), tasks/<task>.json (download_task@<task>, the tasks of tasks.run), squad.json
(download_squad@<version>: the train and dev of the version squad.run names, if any) and weights/<name>.json (download_weights@<name>:
the entries finetune.init and pretrain.phases start from; the others' list no source, as those
stages fetch nothing). A manifest lists every source as given, and each local file's path, size and
SHA-256 (bert.download.manifest), so an edited, added or removed file changes exactly its
download's manifest, and DVC never opens a user's file. Remote sources (URLs) are listed, never
contacted. Digests are cached by file identity in data/source_hashes.json, so an unchanged corpus is
not read again.
Every local source is walked first (bert.source_tree, params.yaml's follow_links): a FIFO, a device,
a link that dangles, loops or leaves its folder, a pipeline output, or a source that is gone is
refused in one line naming the param, and no manifest is published
(docs/downloads.md#what-a-local-source-may-be).
"""

import logging

from bert.atomic import atomic_folder
from bert.download.manifest import HashCache, build_manifest, write_manifest
from bert.download.transport import human, local_path
from bert.errors import run_main
from bert.source_tree import Rules
from stages.common import layout
from stages.common.params import load_params

log = logging.getLogger("stages.sources")


def main() -> None:
    params = load_params()
    fetched = (params.finetune.init, params.pretrain_start)
    weights = {name: [url] if name in fetched else [] for name, url in params.weights.items()}
    manifests = {
        **{
            layout.corpus_sources(corpus): (spec.sources, f"corpora.{corpus}.sources")
            for corpus, spec in params.corpora.items()
        },
        **{
            layout.task_sources(task): (getattr(params.tasks, task).sources, f"tasks.{task}.sources")
            for task in params.tasks.run
        },
        **{layout.weights_sources(name): (urls, f"weights.{name}") for name, urls in weights.items()},
    }
    for version in params.squad.run:  # none when SQuAD is left out (squad.run: [])
        squad = params.squad.sources[version]
        manifests[layout.SQUAD_SOURCES] = ([squad.train, squad.dev], f"squad.sources.{version}")
    rules = Rules(params.follow_links, layout.OUTPUT_ROOTS, bundled=(layout.SAMPLE,))
    hashes = HashCache.load(layout.SOURCE_HASHES)
    try:
        built = {
            path: build_manifest(sources, name, rules, hashes) for path, (sources, name) in manifests.items()
        }
    finally:  # what was read is not read again, even when a later source is refused
        hashes.save()
    with atomic_folder(layout.SOURCES) as building:
        for path, manifest in built.items():
            write_manifest(building / path.relative_to(layout.SOURCES), manifest)
    for sources, name in manifests.values():
        remote = [source for source in sources if local_path(source) is None]
        if remote:
            log.info(
                "%s: %s tracked by URL and checksum only; `dvc repro -f -s` its download stage to fetch it "
                "again (docs/downloads.md#remote-sources)",
                name,
                ", ".join(remote),
            )
    log.info(
        "%s: %d manifests; %d file(s) read (%s), the others unchanged since hashed",
        layout.SOURCES, len(manifests), hashes.read, human(hashes.read_bytes),
    )  # fmt: skip


if __name__ == "__main__":
    run_main(main)
