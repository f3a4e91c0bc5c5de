"""Plain-text tables for the listing commands."""


def print_table(header, rows):
    """Prints `rows` under `header`, each column right-aligned."""
    widths = [
        max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))
    ]
    for row in (header, *rows):
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths)))
