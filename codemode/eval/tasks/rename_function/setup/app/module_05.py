from lib.util import fetch_data


def job_5():
    first = fetch_data('a5')
    return first + fetch_data('b5')
