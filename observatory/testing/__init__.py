"""Test and benchmark helpers shipped with the package (the stand-in Hub)."""
