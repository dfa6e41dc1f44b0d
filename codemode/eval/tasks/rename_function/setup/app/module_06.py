from lib.util import fetch_data


def job_6():
    first = fetch_data('a6')
    return first + fetch_data('b6')
