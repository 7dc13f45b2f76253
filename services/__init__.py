"""Conquian services: engine worker, projector, gateway, store, command line."""
