"""Do the processes of a Dask cluster run this stage's environment? Checked by bert.parallel before
a stage sends any task to a scheduler given by its address.

The scheduler reads the stage's tasks (it unpickles them, importing the project's modules) and the
workers run them, so each process must run the Python, torch, dask and distributed versions the
stage runs, and the same project. Otherwise the first task fails on the remote side with a page of
Dask traceback ("Error during deserialization of the task graph", ModuleNotFoundError), or worse,
runs other code and writes other bytes. The check makes that one line naming the process, what
differs and the command that fixes it.

The project's version is what its code says, not its package version (always 0.1.0) nor its path:
a digest of the .py files of the `bert` package a process imports. Two copies of one commit at
other paths (a `dvc exp run --temp` copy, a container's mount) agree; two commits at one path (a
folder that is not shared after all) do not. A worker that loaded the project before its files
changed (a cluster left running while the code is edited: an editable install keeps the files
live, not the modules a running process has loaded) runs the old code whatever the files say, so
a loaded module whose file changed after the worker started is a difference too.

`probe` runs in the remote process, which may be unable to import `bert`: it is sent by value
(cloudpickle would send a function of an importable module as a reference to it, which the remote
side then fails to import) and it needs only the standard library and psutil, which Dask needs.
"""

import os
import sys
import urllib.parse

from bert.errors import UserError, first_line

PACKAGES = ("torch", "dask", "distributed")  # what the stages' tasks and Dask's own protocol depend on


def probe() -> dict:
    """This process: its Python, the versions of PACKAGES, the folder of the `bert` it imports (or
    has imported) and a digest of its sources, and which of its loaded `bert` modules changed on
    disk after the process started."""
    import hashlib
    import importlib.metadata
    import importlib.util

    import psutil

    versions = {"python": "{}.{}".format(*sys.version_info[:2])}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    loaded = sys.modules.get("bert")
    if loaded is not None:
        folder = os.path.dirname(loaded.__file__)
    else:  # where `import bert` would find it, without running it
        spec = importlib.util.find_spec("bert")
        folder = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None
    if folder is None:
        return {"executable": sys.executable, "versions": versions, "project": None}

    digest = hashlib.sha256()
    for parent, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if name != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(parent, name)
                with open(path, "rb") as source:
                    text = source.read()
                digest.update(f"{os.path.relpath(path, folder)}\0{len(text)}\0".encode() + text)

    # A second's margin: the start time is known to the second (the system's boot time is), and a
    # shared disk's clock may be a little off this machine's; an edit that close to the start
    # comes before the worker's first task has imported anything of the project anyway.
    started = psutil.Process().create_time() + 1
    changed = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.split(".")[0] == "bert" else None
        if path is not None and (not os.path.exists(path) or os.path.getmtime(path) > started):
            changed.append(os.path.relpath(path, os.path.dirname(folder)))
    return {"executable": sys.executable, "versions": versions, "project": folder,
            "digest": digest.hexdigest(), "changed": sorted(changed)}  # fmt: skip


def problem(mine: dict, theirs: dict, start: str, worker: bool = True) -> str | None:
    """What differs in a remote process's probe from this stage's, and the fix: `start` is the
    command that starts that process from this stage's environment."""
    differ = [name for name, version in mine["versions"].items() if theirs["versions"].get(name) != version]
    if differ:
        runs = " and ".join(f"{name} {theirs['versions'].get(name) or '(none)'}" for name in differ)
        expected = " and ".join(f"{name} {mine['versions'][name]}" for name in differ)
        return (
            f"runs {runs} where this stage runs {expected}; start it from this stage's environment: {start}"
        )
    if theirs["project"] is None:
        python, project = theirs["executable"], os.path.dirname(mine["project"])
        return (
            f"cannot import the project (no module named 'bert' in {python}); install it into that "
            f"environment, then start the process again: `{python} -m pip install -e {project}`"
        )
    if theirs["digest"] != mine["digest"]:
        return (
            f"imports other project code ({theirs['project']}) than this stage ({mine['project']}); "
            f"start it from this stage's checkout and environment: {start}"
        )
    if worker and theirs["changed"]:
        more = f" and {len(theirs['changed']) - 1} more" if len(theirs["changed"]) > 1 else ""
        return f"still runs the code it loaded before {theirs['changed'][0]}{more} changed on disk; start it again: {start}"
    return None


def check_cluster(client, address: str) -> None:
    """A UserError if the scheduler at `address` or one of its workers (those connected now) runs
    another environment than this stage, naming the first such process and its fix."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # see the module's docstring
    mine = probe()
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    port = urllib.parse.urlsplit(address).port
    processes = [("the Dask scheduler", f"`{dask} scheduler{f' --port {port}' if port else ''}`")]
    try:
        found = [client.run_on_scheduler(probe)]
    except Exception as error:  # the probe could not run there (another Python, a broken install)
        found = [error]
    workers = client.run(probe, on_error="return")  # {address: probe() or the exception it raised}
    for worker in sorted(workers):
        processes.append((f"the Dask worker {worker}", f"`{dask} worker {address}`"))
        found.append(workers[worker])
    problems = []
    for (process, start), theirs in zip(processes, found):
        if isinstance(theirs, BaseException):
            said = (
                f"could not run this stage's environment check ({first_line(theirs)}); "
                f"start it from this stage's environment: {start}"
            )
        else:  # the scheduler only reads the tasks: modules it loaded before an edit do no harm
            said = problem(mine, theirs, start, worker=process != processes[0][0])
        if said is not None:
            problems.append(f"{process} {said}")
    if problems:
        more = len(problems) - 1
        others = f" ({more} more process{'es' if more > 1 else ''} of the cluster differ{'' if more > 1 else 's'} too)"
        raise UserError(f"compute.scheduler {address}: {problems[0]}{others if more else ''}")
