from lib.util import fetch_data


def job_4():
    first = fetch_data('a4')
    return first + fetch_data('b4')
