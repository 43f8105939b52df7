"""Test and benchmark helpers shipped with the package: the stand-in Hub on loopback and a server
runner. Imports nothing of ours, so a test's stand-in never shares code with what it tests.
"""
