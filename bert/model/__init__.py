"""The network and what describes it: size presets, `BertConfig` and its checks (`config`, no
torch), Hugging Face import and export (`hf`), BERT itself with its padded and unpadded paths
(`network`), autocast dtypes and the grad scaler (`precision`), FLOPs per step (`flops`)."""
