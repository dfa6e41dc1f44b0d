from lib.util import fetch_data


def job_12():
    first = fetch_data('a12')
    return first + fetch_data('b12')
