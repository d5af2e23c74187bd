"""Corpora: Wikipedia extraction, plain text, sentence shards and mixing."""
