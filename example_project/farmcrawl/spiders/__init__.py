"""Spiders of the farmcrawl example project."""
