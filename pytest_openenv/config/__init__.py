"""Options, ini keys and the typed settings they fill (read by both sides)."""
