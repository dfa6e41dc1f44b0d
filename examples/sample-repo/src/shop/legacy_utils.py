"""Helpers kept for old callers; new code imports shop.text instead."""

import re


def slugify(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def money(cents):
    return f"${cents // 100}.{cents % 100:02d}"
