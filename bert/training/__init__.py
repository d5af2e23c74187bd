"""Running the network over batches: the typed recipe (`recipe`), optimisers and schedules
(`optim`), length-binned batches (`binning`) split over ranks and micro-batches (`global_batch`),
what ranks do together inside a run (`collectives`), checkpoint files and the resume decision
(`checkpoints`), the loop (`loop`), fine-tuning (`finetune`), batched prediction (`inference`) and
the speed benchmark (`benchmark`)."""
