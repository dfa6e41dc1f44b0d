from lib.util import fetch_data


def job_8():
    first = fetch_data('a8')
    return first + fetch_data('b8')
