"""Small helpers with no knowledge of pytest items or episodes (URLs, secrets, limits)."""
