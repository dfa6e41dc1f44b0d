"""Text helpers: slugs and money formatting."""

import re


def slugify(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def money(cents):
    return f"${cents // 100}.{cents % 100:02d}"
