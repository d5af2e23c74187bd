"""Corpus cleaning between documents and shards: exact and near-duplicate removal across every
corpus of a run (`dedup`), overlap with the evaluation sets (`contamination`), on the task engine
(bert.parallel). `settings` says how (`CleanSettings`: params.yaml's `clean`), `text` what is
compared, `tables` reads and writes the document tables."""
