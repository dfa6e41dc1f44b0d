from lib.util import fetch_data


def job_19():
    first = fetch_data('a19')
    return first + fetch_data('b19')
