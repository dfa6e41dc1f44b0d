def first():
    x = 1
    return x


def second():
    x = 1
    return x + 2
