"""Real servers on 127.0.0.1 for the tests and benchmarks (OpenEnv, model APIs)."""
