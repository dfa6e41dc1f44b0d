from lib.util import fetch_data


def job_0():
    first = fetch_data('a0')
    return first + fetch_data('b0')
