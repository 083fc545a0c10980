"""Small rules shared by every layer: names, text shown to users, counts in words, URLs, the
strict model base and optional packages."""
