"""The shipped sample photos (data only; see README.md here)."""
