from lib.util import fetch_data


def job_7():
    first = fetch_data('a7')
    return first + fetch_data('b7')
