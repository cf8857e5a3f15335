"""An ordinary Python file: no newt, no deuteron, so no kernel diagnostics."""


def total(xs):
    return sum(xs)
