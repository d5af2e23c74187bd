"""Stage sources: data/sources/, links to the local sources params.yaml names, which DVC hashes.

    python -m stages.sources

Each download stage depends on its slot here (docs/pipeline.md#tracking-local-sources):
corpora/<corpus> (download@<corpus>), tasks/<task> (download_task@<task>, the tasks of tasks.run),
squad (download_squad@<version>: the train and dev of the version squad.run names, if any) and weights/<name> (download_weights@<name>:
the entries finetune.init and pretrain.phases start from; the others' slots stand for nothing, as those stages fetch nothing).
A slot is a link to the one local source, or a folder with a link per local file and sources.txt
(bert.download.source_links). DVC follows the links when it hashes a stage's dependencies, so `dvc status`
names the download stage whose local files changed, and `dvc repro` reruns it and what depends on
it; remote sources (URLs) are never contacted here, so `dvc status` works offline. The links are
committed with the project (cache: false), as a cloned project needs them to be up to date.
Every local source is walked first (bert.source_tree, params.yaml's follow_links): one DVC could not
hash (a FIFO, a device, a link that dangles or loops, a pipeline output) is refused in one line, and
no slot is published (docs/pipeline.md#what-a-local-source-may-be).
"""

import logging

from bert.atomic import atomic_folder
from bert.download.source_links import link_sources
from bert.download.transport import local_path
from bert.errors import run_main
from bert.source_tree import Rules
from stages import layout
from stages.params import load_params

log = logging.getLogger("stages.sources")


def main() -> None:
    params = load_params()
    fetched = (params.finetune.init, params.pretrain_start)
    weights = {name: [url] if name in fetched else [] for name, url in params.weights.items()}
    slots = {
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
        slots[layout.SQUAD_SOURCES] = ([squad.train, squad.dev], f"squad.sources.{version}")
    rules = Rules(params.follow_links, layout.OUTPUT_ROOTS, bundled=(layout.SAMPLE,))
    with atomic_folder(layout.SOURCES) as building:
        for slot, (sources, name) in slots.items():
            link_sources(building / slot.relative_to(layout.SOURCES), sources, name, rules)
            remote = [source for source in sources if local_path(source) is None]
            if remote:
                log.info(
                    "%s: %s tracked by URL and checksum only; `dvc repro -f -s` its download stage to fetch "
                    "it again (docs/pipeline.md#remote-sources)",
                    name,
                    ", ".join(remote),
                )
    log.info("%s: %d slots", layout.SOURCES, len(slots))


if __name__ == "__main__":
    run_main(main)
