"""Starting a training run on one or many processes: the launcher every training stage calls
(`launch`: relaunch under torchrun, `--join`, the process group, the execution settings) and
torchrun's per-rank logs with its one-line failure (`torchrun`)."""
