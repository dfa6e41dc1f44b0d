from lib.util import fetch_data


def job_3():
    first = fetch_data('a3')
    return first + fetch_data('b3')
