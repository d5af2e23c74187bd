"""BERT pretraining and fine-tuning as a library: every stage in stages/ calls into it."""
