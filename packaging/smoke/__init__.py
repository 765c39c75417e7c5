"""Helpers of packaging/dist_test.sh (run with the development venv's Python against the installed program)."""
