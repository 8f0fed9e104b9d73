"""Conversations walked turn by turn: history and responses, prepared turns, resumption, and the local and Ray runners."""
