"""reactbot core: the ReAct engine.

Imports no platform SDK, no CLI and no config-file format; adapters and the app build on it.
"""
