"""Corpus cleaning between documents and shards: exact and near-duplicate removal across every
corpus of a run (`dedup`), overlap with the evaluation sets (`contamination`), on the task engine
(bert.parallel). `text` says what is compared, `tables` reads and writes the document tables."""
