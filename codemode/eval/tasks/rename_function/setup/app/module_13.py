from lib.util import fetch_data


def job_13():
    first = fetch_data('a13')
    return first + fetch_data('b13')
