"""Controller side: figures, terminal summary, gates."""
