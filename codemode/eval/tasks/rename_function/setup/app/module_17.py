from lib.util import fetch_data


def job_17():
    first = fetch_data('a17')
    return first + fetch_data('b17')
