from lib.util import fetch_data


def job_14():
    first = fetch_data('a14')
    return first + fetch_data('b14')
