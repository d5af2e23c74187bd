"""Fine-tuning tasks beyond SQuAD: SWAG and GLUE."""
