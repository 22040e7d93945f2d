"""Custom Rasa NLU graph components of the project (used in config.yml)."""
