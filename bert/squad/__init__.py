"""Question answering on SQuAD v1.1 / v2.0, one module per step a question goes through; each
stage imports only the steps it runs, so an edit reruns only the stages it affects:

- dataset.py     the official JSON (data[].paragraphs[].qas[]) -> `SquadExample`s, and its version
- features.py    examples -> `SquadFeatures`: question + context windows, token and word character spans
- objective.py   the span loss fine-tuning minimises (stage finetune_squad)
- predict.py     a model over the windows -> start/end logits (stage predict_squad, benchmark)
- answers.py     logits -> answer strings of whole words: the n-best `Span`s, SQuAD 2.0's null answer
- evaluation.py  the official EM/F1 (`python -m bert.squad DATA_FILE PRED_FILE`, stage evaluate_squad)
- ask.py         one question about one text (`python -m bert.squad.ask --model DIR ...`)
- benchmark.py   training and inference speed of a question-answering model (stage benchmark)

This file imports none of them, so importing one step does not load the others.
"""
