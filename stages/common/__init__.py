"""What the stages share: the params schema (params), where every file lives (layout), and the
one fine-tuning body of SQuAD and the tasks (finetune)."""
