"""Custom actions for the Rasa SDK action server (python -m rasa_sdk --actions actions)."""
