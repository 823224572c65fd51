"""One module per ``nb`` subcommand; each defines ``register(app)``."""
