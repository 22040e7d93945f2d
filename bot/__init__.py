"""Trauma-bond support chatbot: everything around Rasa that the project owns.

Custom NLU components, the content store, the hotline directory, storage,
the web app and the maintainers' command line live here; Rasa's own files
(config.yml, domain/, data/) stay in the layout Rasa users know.
"""
