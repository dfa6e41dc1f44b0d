from lib.util import fetch_data


def job_11():
    first = fetch_data('a11')
    return first + fetch_data('b11')
