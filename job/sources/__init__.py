"""Sources: where a dagger's rows come from."""
