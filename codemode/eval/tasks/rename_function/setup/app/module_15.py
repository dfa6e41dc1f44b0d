from lib.util import fetch_data


def job_15():
    first = fetch_data('a15')
    return first + fetch_data('b15')
