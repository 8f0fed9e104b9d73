"""Offline builders of the entity resources: the Wikipedia vocabulary, name casing, surface forms and the collection's entity files."""
