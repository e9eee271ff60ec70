"""Text for rlctl's terminal: untrusted strings made safe to print, and
tables padded to their widest cells."""


def text(value, limit=1000):
    """`value` as plain text for a terminal: control characters (C0, C1,
    DEL: escape sequences, carriage returns) and invisible format characters
    (bidirectional overrides, zero-width marks) that a user or a remote
    peer put there are shown escaped, never obeyed; at most `limit`
    characters of it. Every string that came over the network goes through
    here before it is printed."""
    value = str(value)
    cut = len(value) > limit
    value = value[:limit]
    out = "".join(c if c.isprintable() else
                  (repr(c)[1:-1] if len(repr(c)) > 3 else f"\\u{ord(c):04x}")
                  for c in value)
    return out + (f"... ({len(value)}+ characters)" if cut else "")


def text_lines(value, indent="    ", limit=1000):
    """`value` as text() shows it, except that its line breaks (a failure
    reason's traceback, a worker's multi-line detail) start new lines,
    indented by `indent` so they read as part of the line they continue.
    Every other control character is still shown escaped; at most `limit`
    characters of it."""
    value = str(value)
    cut = len(value) > limit
    value = value[:limit].replace("\r\n", "\n").rstrip("\n")
    shown = ("\n" + indent).join(text(line, limit) for line in value.split("\n"))
    return shown + (f"... ({limit}+ characters)" if cut else "")


def format_table(headers, rows, right=()):
    """Lines with columns padded to their widest cell (`right`: right-aligned)."""
    rows = [[text(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(headers)] + [line(r) for r in rows]


def print_table(headers, rows, right=()):
    print("\n".join(format_table(headers, rows, right)))
