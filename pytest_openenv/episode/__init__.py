"""One episode: its spec, the tool-calling loop, the finished episode and its dataset row."""
