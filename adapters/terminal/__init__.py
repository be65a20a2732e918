"""The terminal surface: the renderer of a run for a console (styled, or plain when piped)."""
