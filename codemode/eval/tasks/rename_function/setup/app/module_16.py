from lib.util import fetch_data


def job_16():
    first = fetch_data('a16')
    return first + fetch_data('b16')
