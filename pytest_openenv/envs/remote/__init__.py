"""The remote backend: deployed OpenEnv servers over their WebSocket protocol."""
