import math


def total(values):
    return sum(values)


def mean(items):
    return total(items) / len(items)
