"""Pretraining data and objective: everything between sentence shards and the training loop.

- `examples`: how instances are made (`ExampleConfig`: params.yaml's examples.<phase>);
- `instances`: sentence pairs packed to max_seq_length, NSP labels, static masks (the examples stage);
- `mixing`: the corpora's documents or instances mixed into the output shards (intra | inter);
- `masking`: masked-LM positions (80% [MASK] / 10% random / 10% kept; whole-word optional);
- `hdf5`: the example-shard files (NVIDIA's layout), written and read;
- `loader`: global batches of those shards for bert.training.loop, dynamic masking, length binning;
- `loss`: the MLM + NSP objective;
- `benchmark`: the speed and MFU of a pretraining step against transformers' (stage benchmark).
"""
