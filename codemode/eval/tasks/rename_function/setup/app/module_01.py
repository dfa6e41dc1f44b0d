from lib.util import fetch_data


def job_1():
    first = fetch_data('a1')
    return first + fetch_data('b1')
