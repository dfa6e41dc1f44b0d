def add(a, b):
    return a - b


def mul(a, b):
    return a * b


def helper_0(x):
    return x + 0


def helper_1(x):
    return x + 1


def helper_2(x):
    return x + 2


def helper_3(x):
    return x + 3


def helper_4(x):
    return x + 4


def helper_5(x):
    return x + 5


def helper_6(x):
    return x + 6


def helper_7(x):
    return x + 7


def helper_8(x):
    return x + 8


def helper_9(x):
    return x + 9


def helper_10(x):
    return x + 10


def helper_11(x):
    return x + 11


def helper_12(x):
    return x + 12


def helper_13(x):
    return x + 13


def helper_14(x):
    return x + 14


def helper_15(x):
    return x + 15


def helper_16(x):
    return x + 16


def helper_17(x):
    return x + 17


def helper_18(x):
    return x + 18


def helper_19(x):
    return x + 19


def helper_20(x):
    return x + 20


def helper_21(x):
    return x + 21


def helper_22(x):
    return x + 22


def helper_23(x):
    return x + 23


def helper_24(x):
    return x + 24


def helper_25(x):
    return x + 25


def helper_26(x):
    return x + 26


def helper_27(x):
    return x + 27


def helper_28(x):
    return x + 28


def helper_29(x):
    return x + 29


