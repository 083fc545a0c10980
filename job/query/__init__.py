"""One dagger's streaming query: its plan, the runner that starts and watches it, the preview, its
events, offset and commit logs and liveness file."""
