"""Controller side: the JSONL dataset, its card and its upload."""
