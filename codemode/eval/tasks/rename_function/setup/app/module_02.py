from lib.util import fetch_data


def job_2():
    first = fetch_data('a2')
    return first + fetch_data('b2')
