"""Text to token ids: the tokenizer every stage uses (`tokenization`) and the vocabulary, trained,
Google's, a file or a checkpoint's (`vocab`)."""
